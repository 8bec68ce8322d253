"""`converge ops`: inspect operations and list them; the decisions (resolve, retry) are in ops_actions."""

from __future__ import annotations

from typing import Annotated

import typer

from converge.operate.listing import DEFAULT_BUDGET, Filters, Listing, listable
from converge_cli.support.errors import UsageError, fails_cleanly
from converge_cli.support.lookup import require_job_type
from converge_cli.support.options import Json, on_deployment, parse_duration, print_json
from converge_cli.support.output import records, say, stdout
from converge_cli.support.paging import decode_token, encode_token
from converge_cli.support.present import LISTING_COLUMNS, listing_rows, show_operation
from converge_cli.support.target import Target

ops_app = typer.Typer(help="Operations: their stored receipts, attention lists and operator decisions.")


@ops_app.command("show")
@fails_cleanly
@on_deployment
def show(
    operation_id: Annotated[str, typer.Argument(help="The operation id.")],
    *,
    deployment: Target,
    as_json: Json = False,
) -> None:
    """An operation's current outcome, earlier errors apart, and its whole history (the stored receipt)."""
    operation = deployment.converge.operations.require(operation_id, steps=True)
    if as_json:
        print_json(operation.to_json())
        return
    show_operation(stdout(), operation)


LIST_HELP = (
    "One page of operations, filtered by state, job type, correlation id and age.\n\n"
    "An attention key (FAILED, UNKNOWN, PAUSED, REJECTED, STUCK, CONFLICT) is a query on its sparse index: "
    "it costs the result. Any other state, or no --state (recent operations, newest first within the page), "
    "has no index (the happy path writes none): it SCANS the state table, evaluating at most --scan-max items "
    "per call; --next continues where it stopped, and a page may hold fewer rows than --limit while more remain. "
    "An operation admitted but not yet taken by a worker has no state record yet, so the scan does not list it."
)


@ops_app.command("list", help=LIST_HELP)
@fails_cleanly
@on_deployment
def list_operations(
    state: Annotated[
        str | None, typer.Option("--state", help="An attention key or any state; none: every state (a scan).")
    ] = None,
    job_type: Annotated[str | None, typer.Option("--job-type", help="Only this job type.")] = None,
    correlation_id: Annotated[str | None, typer.Option("--correlation-id", help="Only this correlation id.")] = None,
    since: Annotated[
        str | None, typer.Option("--since", help="Only those changed (or listed) in the last 90s, 10m, 2h, 1d.")
    ] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, max=1000, help="Operations per page.")] = 50,
    next_token: Annotated[str | None, typer.Option("--next", help="The `next` token of the previous page.")] = None,
    scan_max: Annotated[
        int, typer.Option("--scan-max", min=1, max=100_000, help="Items evaluated per call at most.")
    ] = DEFAULT_BUDGET,
    *,
    deployment: Target,
    as_json: Json = False,
) -> None:
    wanted = state.upper() if state else None
    if wanted is not None and wanted not in listable():
        raise UsageError(f"--state {state!r} is not a state; choose one of {', '.join(listable())}")
    age = parse_duration(since, "--since")
    if job_type:
        require_job_type(deployment.registry, job_type)
    converge = deployment.converge
    filters = Filters(wanted, job_type, correlation_id, None if age is None else converge.clock.now() - age)
    page = Listing(converge.operations.listings).page(filters, limit, decode_token(next_token), budget=scan_max)
    token = encode_token(page.next_token)
    if as_json:
        print_json({"operations": page.operations, "next": token, "source": page.source, "evaluated": page.evaluated})
        return
    console = stdout()
    title = wanted or "recent (every state)"
    records(console, LISTING_COLUMNS, listing_rows(page.operations), title=title)
    if page.source == "scan":
        say(console, f"scanned {page.evaluated} state record(s): no index serves this listing")
    if token:
        say(console, "more: --next ", token)
