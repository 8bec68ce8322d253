"""`converge toggles`: every job's kill switch, its effective state and where that comes from; flip one."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import typer
from rich.table import Table

from converge.errors import UnknownJobType
from converge.registry import JobBinding, Registry
from converge_cli.errors import fails_cleanly
from converge_cli.options import Endpoint, Json, Region, Stack, console, print_json, target
from converge_cli.quiet import quiet_logs

toggles_app = typer.Typer(help="Kill switches: one SSM parameter per job, failing closed.")


class Switch(StrEnum):
    ON = "on"
    OFF = "off"


@toggles_app.command("list")
@fails_cleanly
def list_toggles(
    endpoint_url: Endpoint = None,
    stack: Stack = "converge",
    region: Region = None,
    as_json: Json = False,
) -> None:
    """Every registered job: on or off, and whether that comes from its parameter, its default or the last value."""
    converge = target(endpoint_url, stack, region).converge
    rows = []
    for binding in converge.registry:
        with quiet_logs():
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
    table = Table("job type", "state", "source", "parameter", "note")
    for row in rows:
        table.add_row(
            row["job_type"],
            "[green]on[/]" if row["enabled"] else "[red]off[/]",
            str(row["source"]) + ("" if row["default_enabled"] else " (fail-closed)"),
            row["parameter"],
            row["note"],
        )
    console.print(table)


@toggles_app.command("set")
@fails_cleanly
def set_toggle(
    name: Annotated[str, typer.Argument(help="Job type, with or without its version (.vN).")],
    value: Annotated[Switch, typer.Argument(help="on or off.", case_sensitive=False)],
    endpoint_url: Endpoint = None,
    stack: Stack = "converge",
    region: Region = None,
    as_json: Json = False,
) -> None:
    """Turn a job on or off (writes its SSM parameter; paused work resumes when turned on)."""
    deployment = target(endpoint_url, stack, region)
    converge = deployment.converge
    binding = find_binding(converge.registry, name)
    parameter = converge.toggles.parameter_name(binding.toggle_key)
    deployment.client("ssm").put_parameter(Name=parameter, Value=value.value, Type="String", Overwrite=True)
    result = {"toggle": binding.toggle_key, "parameter": parameter, "value": value.value}
    if as_json:
        print_json(result)
        return
    console.print(f"{binding.toggle_key}: [bold]{value.value}[/] ({parameter})")


def find_binding(registry: Registry, name: str) -> JobBinding:
    """The binding a toggle name means: an exact job type, else the (latest) job with that toggle key."""
    if name in registry:
        return registry.get(name)
    matches = [binding for binding in registry if binding.toggle_key == name]
    if not matches:
        raise UnknownJobType(f"unknown job type {name!r}; `converge toggles list` shows the registered ones")
    return matches[-1]
