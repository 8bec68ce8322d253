"""`converge toggles`: every job's kill switch, its effective state and where that comes from; flip one."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import typer

from converge.operate.actions import PAUSED_COUNTED_AT_MOST
from converge_cli.support.errors import fails_cleanly
from converge_cli.support.operators import operator_for
from converge_cli.support.options import Json, on_deployment, print_json
from converge_cli.support.output import records, say, stdout, styled
from converge_cli.support.target import Target

toggles_app = typer.Typer(help="Kill switches: one SSM parameter per job, failing closed.")


class Switch(StrEnum):
    ON = "on"
    OFF = "off"


@toggles_app.command("list")
@fails_cleanly
@on_deployment
def list_toggles(
    *,
    deployment: Target,
    as_json: Json = False,
) -> None:
    """Every registered job: on or off, and whether that comes from its parameter, its default or the last value.

    The jobs are the project's catalogue's: run it from the project, or name it (--template, --catalogue)."""
    registry = deployment.registry  # no catalogue found: said so, not an empty list
    converge = deployment.converge
    rows = []
    for binding in registry:
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
@on_deployment
def set_toggle(
    name: Annotated[str, typer.Argument(help="Job type, with or without its version (.vN).")],
    value: Annotated[Switch, typer.Argument(help="on or off.", case_sensitive=False)],
    reason: Annotated[str, typer.Option("--reason", help="Why; recorded in the parameter's description.")] = "",
    *,
    deployment: Target,
    as_json: Json = False,
) -> None:
    """Turn a job on or off (writes its SSM parameter; paused work resumes when turned on).

    Says what changed (before and after, and where each came from) and, when a job is turned on,
    how many of its PAUSED operations the resumer now re-dispatches (it runs on the parameter's
    change event, and on its schedule)."""
    deployment.registry  # noqa: B018 - the name is looked up in the catalogue: refuse now if there is none
    change = operator_for(deployment.converge).set_toggle(name, value is Switch.ON, reason)
    if as_json:
        print_json(change.to_json())
        return
    console = stdout()
    before = change.before
    was = f"{'on' if before['enabled'] else 'off'} ({before['source']})"
    if change.changed:
        say(
            console,
            styled(change.toggle, "bold"),
            f": {was} → ",
            styled(change.value, "bold"),
            " (",
            change.parameter,
            ")",
        )
    else:
        say(console, styled(change.toggle, "bold"), f": already {change.value} ({change.parameter}); nothing written")
    paused = change.paused_to_resume
    if value is Switch.ON and paused:
        more = "+" if paused >= PAUSED_COUNTED_AT_MOST else ""
        say(
            console,
            f"{paused}{more} PAUSED operation(s) of {change.job_type} resume: the resumer re-dispatches them "
            "on this change (and on its schedule); `converge ops list --state PAUSED` shows what is left",
        )
    elif value is Switch.ON:
        say(console, f"no PAUSED operations of {change.job_type} were waiting")
