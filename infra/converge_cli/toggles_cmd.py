"""`converge toggles`: every job's kill switch, its effective state and where that comes from; flip one."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any

import typer

from converge.operations import OperationState
from converge.registry import JobBinding
from converge.runtime import Converge
from converge.toggles import ToggleSource
from converge_cli.errors import fails_cleanly
from converge_cli.lookup import find_binding
from converge_cli.options import Endpoint, Json, Profile, Region, Stack, print_json, target
from converge_cli.output import records, say, stdout, styled

toggles_app = typer.Typer(help="Kill switches: one SSM parameter per job, failing closed.")
PAUSED_COUNTED_AT_MOST = 1000


class Switch(StrEnum):
    ON = "on"
    OFF = "off"


@toggles_app.command("list")
@fails_cleanly
def list_toggles(
    endpoint_url: Endpoint = None,
    stack: Stack = "converge",
    region: Region = None,
    profile: Profile = None,
    as_json: Json = False,
) -> None:
    """Every registered job: on or off, and whether that comes from its parameter, its default or the last value."""
    converge = target(endpoint_url, stack, region, profile).converge
    rows = []
    for binding in converge.registry:
        state = converge.toggles.state(binding.toggle_key, binding.default_enabled)
        rows.append(
            {
                "job_type": binding.job_type,
                "toggle": binding.toggle_key,
                "parameter": converge.toggles.parameter_name(binding.toggle_key),
                "enabled": state.enabled,
                "source": state.source.value,
                "value": state.raw,
                "default_enabled": binding.default_enabled,
                "note": state.note,
            }
        )
    if as_json:
        print_json(rows)
        return
    records(
        stdout(),
        ["job type", "state", "source", "parameter", "note"],
        [
            [
                row["job_type"],
                styled("on", "green") if row["enabled"] else styled("off", "red"),
                str(row["source"]) + ("" if row["default_enabled"] else " (fail-closed)"),
                row["parameter"],
                row["note"],
            ]
            for row in rows
        ],
    )


@toggles_app.command("set")
@fails_cleanly
def set_toggle(
    name: Annotated[str, typer.Argument(help="Job type, with or without its version (.vN).")],
    value: Annotated[Switch, typer.Argument(help="on or off.", case_sensitive=False)],
    endpoint_url: Endpoint = None,
    stack: Stack = "converge",
    region: Region = None,
    profile: Profile = None,
    as_json: Json = False,
) -> None:
    """Turn a job on or off (writes its SSM parameter; paused work resumes when turned on).

    Says what changed (before and after, and where each came from) and, when a job is turned on,
    how many of its PAUSED operations the resumer now re-dispatches (it runs on the parameter's
    change event, and on its schedule)."""
    deployment = target(endpoint_url, stack, region, profile)
    converge = deployment.converge
    binding = find_binding(converge.registry, name)
    parameter = converge.toggles.parameter_name(binding.toggle_key)
    wanted = value is Switch.ON
    before = converge.toggles.state(binding.toggle_key, binding.default_enabled, fresh=True)
    changed = not (before.source is ToggleSource.PARAMETER and before.enabled == wanted)
    if changed:
        deployment.client("ssm").put_parameter(Name=parameter, Value=value.value, Type="String", Overwrite=True)
    paused = _paused(converge, binding) if wanted else 0
    result: dict[str, Any] = {
        "toggle": binding.toggle_key,
        "parameter": parameter,
        "value": value.value,
        "changed": changed,
        "before": {"enabled": before.enabled, "source": before.source.value, "value": before.raw},
        "paused_to_resume": paused,
    }
    if as_json:
        print_json(result)
        return
    console = stdout()
    was = f"{'on' if before.enabled else 'off'} ({before.source.value})"
    if changed:
        say(
            console,
            styled(binding.toggle_key, "bold"),
            f": {was} → ",
            styled(value.value, "bold"),
            " (",
            parameter,
            ")",
        )
    else:
        say(console, styled(binding.toggle_key, "bold"), f": already {value.value} ({parameter}); nothing written")
    if wanted and paused:
        more = "+" if paused >= PAUSED_COUNTED_AT_MOST else ""
        say(
            console,
            f"{paused}{more} PAUSED operation(s) of {binding.job_type} resume: the resumer re-dispatches them "
            "on this change (and on its schedule); `converge ops list --state PAUSED` shows what is left",
        )
    elif wanted:
        say(console, f"no PAUSED operations of {binding.job_type} were waiting")


def _paused(converge: Converge, binding: JobBinding) -> int:
    """PAUSED operations of the job (one query on the attention index, at most PAUSED_COUNTED_AT_MOST)."""
    page = converge.operations.list_attention(OperationState.PAUSED, binding.job_type, PAUSED_COUNTED_AT_MOST)
    return len(page.operations)
