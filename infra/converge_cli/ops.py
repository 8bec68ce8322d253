"""`converge ops`: inspect operations, list those needing attention, resolve UNKNOWN outcomes."""

from __future__ import annotations

import base64
import binascii
import json
from enum import StrEnum
from typing import Annotated, Any

import typer
from rich.panel import Panel
from rich.table import Table

from converge.errors import UnknownJobType
from converge.operations import Operation
from converge.resolve import Resolution
from converge.resolve import resolve as resolve_operation
from converge_cli.errors import UsageError, fails_cleanly
from converge_cli.options import Endpoint, Json, Region, Stack, console, print_json, target

ops_app = typer.Typer(help="Operations: their stored receipts, attention lists and operator decisions.")


class AttentionState(StrEnum):
    UNKNOWN = "UNKNOWN"
    FAILED = "FAILED"
    PAUSED = "PAUSED"
    REJECTED = "REJECTED"
    STUCK = "STUCK"  # open, with nothing to move it on (the reason says why)
    CONFLICT = "CONFLICT"  # a producer wrote other content under its id


RESOLVE_HELP = (
    "Record an operator's decision on an UNKNOWN operation (only UNKNOWN ones).\n\n"
    "succeeded / failed: you established with the provider whether the effect happened; the decision "
    "and your reason go into the operation's history.\n\n"
    "retry: you established that the effect did NOT happen. The operation's claim was given back when "
    "it became UNKNOWN, so the next attempt does not take over an old claim and ask the provider again "
    "(which is what made it UNKNOWN); the operation is re-dispatched with the same identity "
    "(same operation id, so the provider's idempotency key is unchanged)."
)


@ops_app.command("show")
@fails_cleanly
def show(
    operation_id: Annotated[str, typer.Argument(help="The operation id.")],
    endpoint_url: Endpoint = None,
    stack: Stack = "converge",
    region: Region = None,
    as_json: Json = False,
) -> None:
    """An operation's state, attempts, history and last error (its stored receipt)."""
    operation = target(endpoint_url, stack, region).converge.operations.require(operation_id)
    if as_json:
        print_json(operation.to_json())
        return
    console.print(_panel(operation))


@ops_app.command("list")
@fails_cleanly
def list_operations(
    state: Annotated[AttentionState, typer.Option("--state", case_sensitive=False, help="State to list.")],
    job_type: Annotated[str | None, typer.Option("--job-type", help="Only this job type.")] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, max=1000, help="Operations per page.")] = 50,
    next_token: Annotated[str | None, typer.Option("--next", help="The `next` token of the previous page.")] = None,
    endpoint_url: Endpoint = None,
    stack: Stack = "converge",
    region: Region = None,
    as_json: Json = False,
) -> None:
    """One page of operations in an attention state, newest last (a query on the attention index)."""
    converge = target(endpoint_url, stack, region).converge
    if job_type and job_type not in converge.registry:
        raise UnknownJobType(f"unknown job type {job_type!r}; `converge jobs list` shows the registered ones")
    page = converge.operations.list_attention(state.value, job_type, limit, decode_token(next_token))
    token = encode_token(page.next_token)
    if as_json:
        print_json({"operations": page.operations, "next": token})
        return
    table = Table("operation id", "job type", "state", "attempts", "listed", "reason", title=f"{state.value}")
    for row in page.operations:
        table.add_row(
            str(row.get("operation_id", "")),
            str(row.get("job_type", "")),
            str(row.get("state", "")),
            str(row.get("attempts", "")),
            str(row.get("listed_at") or ""),
            str(_row_reason(row)),
        )
    console.print(table)
    if token:
        console.print(f"more: --next {token}")


@ops_app.command("resolve", help=RESOLVE_HELP)
@fails_cleanly
def resolve(
    operation_id: Annotated[str, typer.Argument(help="An operation in state UNKNOWN.")],
    resolution: Annotated[Resolution, typer.Option("--as", help="succeeded, failed or retry.")],
    reason: Annotated[str, typer.Option("--reason", help="What you established, recorded in the history.")],
    endpoint_url: Endpoint = None,
    stack: Stack = "converge",
    region: Region = None,
    as_json: Json = False,
) -> None:
    if not reason.strip():
        raise UsageError("--reason must say what you established")
    converge = target(endpoint_url, stack, region).converge
    resolved = resolve_operation(converge.operations, converge.dispatcher, operation_id, resolution, reason.strip())
    if as_json:
        print_json(resolved.to_json())
        return
    console.print(f"[bold]{operation_id}[/] resolved as {resolution.value}: now {resolved.state.value}")


def _row_reason(row: dict[str, Any]) -> str:
    """What a listing row says about why it is listed: the stuck reason, the conflict, or the last error."""
    if row.get("stuck_reason"):
        return str(row["stuck_reason"])
    conflicts = row.get("conflicts") or []
    if conflicts:
        latest = conflicts[-1]
        dropped = int(row.get("conflicts_dropped") or 0)
        more = f" (+{len(conflicts) - 1 + dropped} more)" if len(conflicts) > 1 or dropped else ""
        return f"other content ({latest.get('job_type')}) at {latest.get('at')}{more}"
    return str(row.get("last_error") or "")


def encode_token(key: dict[str, Any] | None) -> str | None:
    """LastEvaluatedKey as an opaque, URL-safe token."""
    if not key:
        return None
    return base64.urlsafe_b64encode(json.dumps(key, sort_keys=True).encode()).decode()


def decode_token(token: str | None) -> dict[str, Any] | None:
    if not token:
        return None
    try:
        key = json.loads(base64.urlsafe_b64decode(token.encode()))
    except (binascii.Error, ValueError):
        raise UsageError("--next is not a token printed by `converge ops list`") from None
    if not isinstance(key, dict):
        raise UsageError("--next is not a token printed by `converge ops list`")
    return key


def _panel(operation: Operation) -> Panel:
    table = Table("state", "at", "reason", box=None, pad_edge=False)
    for entry in operation.history:
        table.add_row(entry.state, entry.at, entry.reason)
    header = Table.grid(padding=(0, 2))
    header.add_row("job type", operation.job_type)
    header.add_row("state", f"[bold]{operation.state.value}[/]")
    view = operation.to_json()
    header.add_row("attempts", str(operation.attempts))
    header.add_row("redrives", str(operation.redrives))
    header.add_row("last error", operation.last_error or "-")
    if view["errors"]:
        header.add_row("earlier errors", "; ".join(f"{e['at']} #{e['attempt']}: {e['error']}" for e in view["errors"]))
    if view["stuck"]:
        header.add_row("stuck", f"{view['stuck']['kind']}: {view['stuck']['reason']}")
    for conflict in view["conflicts"]:
        header.add_row("conflict", f"{conflict['at']}: {conflict['source']} ({conflict['job_type']})")
    if view["lease"]:
        header.add_row("lease", f"{view['lease']['owner']} until {view['lease']['until']}")
    header.add_row("request", view["request"])
    header.add_row("correlation id", operation.correlation_id or "-")
    header.add_row("payload", json.dumps(operation.payload, sort_keys=True))
    grid = Table.grid()
    grid.add_row(header)
    grid.add_row("")
    grid.add_row(table)
    return Panel(grid, title=operation.operation_id, expand=False)
