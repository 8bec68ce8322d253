"""`converge ops`: inspect operations, list those needing attention, resolve UNKNOWN outcomes."""

from __future__ import annotations

import base64
import binascii
import json
from enum import StrEnum
from typing import Annotated, Any

import typer

from converge.resolve import Resolution
from converge.resolve import resolve as resolve_operation
from converge_cli.cancel_cmd import cancel_bulk_command, cancel_command
from converge_cli.errors import UsageError, fails_cleanly
from converge_cli.lookup import require_job_type
from converge_cli.options import Endpoint, Json, Profile, Region, Stack, print_json, target
from converge_cli.output import records, say, stdout, styled
from converge_cli.present import LISTING_COLUMNS, listing_rows, show_operation

ops_app = typer.Typer(help="Operations: their stored receipts, attention lists and operator decisions.")


class AttentionState(StrEnum):
    UNKNOWN = "UNKNOWN"
    FAILED = "FAILED"
    PAUSED = "PAUSED"
    REJECTED = "REJECTED"
    SCHEDULED = "SCHEDULED"  # waiting for its run_at
    CANCELLED = "CANCELLED"
    EXPIRED = "EXPIRED"
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
    profile: Profile = None,
    as_json: Json = False,
) -> None:
    """An operation's current outcome, earlier errors apart, and its whole history (the stored receipt)."""
    operation = target(endpoint_url, stack, region, profile).converge.operations.require(operation_id)
    if as_json:
        print_json(operation.to_json())
        return
    show_operation(stdout(), operation)


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
    profile: Profile = None,
    as_json: Json = False,
) -> None:
    """One page of operations in an attention state, newest last (a query on the attention index)."""
    converge = target(endpoint_url, stack, region, profile).converge
    if job_type:
        require_job_type(converge.registry, job_type)
    page = converge.operations.list_attention(state.value, job_type, limit, decode_token(next_token))
    token = encode_token(page.next_token)
    if as_json:
        print_json({"operations": page.operations, "next": token})
        return
    console = stdout()
    records(console, LISTING_COLUMNS, listing_rows(page.operations), title=state.value)
    if token:
        say(console, "more: --next ", token)


@ops_app.command("resolve", help=RESOLVE_HELP)
@fails_cleanly
def resolve(
    operation_id: Annotated[str, typer.Argument(help="An operation in state UNKNOWN.")],
    resolution: Annotated[Resolution, typer.Option("--as", help="succeeded, failed or retry.")],
    reason: Annotated[str, typer.Option("--reason", help="What you established, recorded in the history.")],
    endpoint_url: Endpoint = None,
    stack: Stack = "converge",
    region: Region = None,
    profile: Profile = None,
    as_json: Json = False,
) -> None:
    if not reason.strip():
        raise UsageError("--reason must say what you established")
    converge = target(endpoint_url, stack, region, profile).converge
    resolved = resolve_operation(converge.operations, converge.dispatcher, operation_id, resolution, reason.strip())
    if as_json:
        print_json(resolved.to_json())
        return
    say(stdout(), styled(operation_id, "bold"), f" resolved as {resolution.value}: now {resolved.state.value}")


# Cancel has its own module; registered here so it reads as one of the operator's commands.
ops_app.command("cancel")(cancel_command)
ops_app.command("cancel-bulk")(cancel_bulk_command)


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
