"""`converge ops`: inspect operations and list them; the decisions (resolve, retry) are in ops_actions."""

from __future__ import annotations

import base64
import binascii
import json
from enum import StrEnum
from typing import Annotated, Any

import typer

from converge_cli.errors import UsageError, fails_cleanly
from converge_cli.lookup import require_job_type
from converge_cli.options import Endpoint, Json, Profile, Region, Stack, print_json, target
from converge_cli.output import records, say, stdout
from converge_cli.present import LISTING_COLUMNS, listing_rows, show_operation

ops_app = typer.Typer(help="Operations: their stored receipts, attention lists and operator decisions.")


class AttentionState(StrEnum):
    UNKNOWN = "UNKNOWN"
    FAILED = "FAILED"
    PAUSED = "PAUSED"
    REJECTED = "REJECTED"
    STUCK = "STUCK"  # open, with nothing to move it on (the reason says why)
    CONFLICT = "CONFLICT"  # a producer wrote other content under its id


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


def _register_action_commands() -> None:
    from converge_cli.ops_actions import register

    register(ops_app)


_register_action_commands()
