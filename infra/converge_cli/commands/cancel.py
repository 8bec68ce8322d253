"""`converge ops cancel` and `converge ops cancel-bulk`: end operations that have not started."""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated

import typer

from converge.model.states import OperationState
from converge.operate.cancel import bulk_cancel
from converge_cli.support.errors import ExitCode, Failure, UsageError, fails_cleanly, report
from converge_cli.support.lookup import require_job_type
from converge_cli.support.operators import actor, operator_for
from converge_cli.support.options import Json, on_deployment, print_json
from converge_cli.support.output import say, stdout, styled
from converge_cli.support.target import Target

_AGE = re.compile(r"^(\d{1,9})([smhd])$")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


class NotStarted(StrEnum):
    SCHEDULED = "SCHEDULED"
    PAUSED = "PAUSED"


def age_seconds(text: str | None) -> float | None:
    """`90s`, `15m`, `2h`, `3d` as seconds."""
    if text is None:
        return None
    match = _AGE.match(text.strip())
    if not match:
        raise UsageError(f"--older-than {text!r} is not an age such as 90s, 15m, 2h or 3d")
    return float(int(match.group(1)) * _UNIT_SECONDS[match.group(2)])


@fails_cleanly
@on_deployment
def cancel_command(
    operation_id: Annotated[
        str, typer.Argument(help="An operation that has not started (ACCEPTED, SCHEDULED, PAUSED).")
    ],
    reason: Annotated[str, typer.Option("--reason", help="Why, recorded in the operation's history.")],
    *,
    deployment: Target,
    as_json: Json = False,
) -> None:
    """Cancel an operation that has not started: CANCELLED, with the reason. A started one is left alone.

    Exit codes: 0 cancelled; 2 too late (it started or settled: the message says which state) or unknown id."""
    if not reason.strip():
        raise UsageError("--reason must say why")
    converge = deployment.converge
    result = operator_for(converge).cancel(operation_id, reason)  # the framework's operator action
    if not result.applied:  # as every operator action that does not apply: why, on stderr, and exit 2
        report(Failure("not_applied", f"{operation_id}: not cancelled: {result.message}", ExitCode.REFUSED), as_json)
        raise typer.Exit(ExitCode.REFUSED)
    if as_json:
        print_json(result.to_json())
    else:
        say(stdout(), styled(operation_id, "bold"), f" cancelled (was {result.before})")


@fails_cleanly
@on_deployment
def cancel_bulk_command(
    state: Annotated[NotStarted, typer.Option("--state", case_sensitive=False, help="SCHEDULED or PAUSED.")],
    reason: Annotated[str, typer.Option("--reason", help="Why, recorded in each operation's history.")] = "",
    job_type: Annotated[str | None, typer.Option("--job-type", help="Only this job type.")] = None,
    older_than: Annotated[
        str | None, typer.Option("--older-than", help="Listed longer ago than this (2h, 3d).")
    ] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Count what would be cancelled; change nothing.")] = False,
    limit: Annotated[int | None, typer.Option("--limit", min=1, help="At most this many.")] = None,
    *,
    deployment: Target,
    as_json: Json = False,
) -> None:
    """Cancel every listed operation in a not-started state (of a job type, older than an age)."""
    if not dry_run and not reason.strip():
        raise UsageError("--reason must say why (or use --dry-run to count)")
    age = age_seconds(older_than)
    if job_type:
        require_job_type(deployment.registry, job_type)
    converge = deployment.converge
    report = bulk_cancel(
        converge.operations,
        converge.delays,
        OperationState(state.value),
        reason.strip(),
        job_type=job_type,
        older_than_seconds=age,
        dry_run=dry_run,
        limit=limit,
        actor=actor(),
        settlement=converge.settlement,
    )
    if as_json:
        print_json(report.to_json())
    elif dry_run:
        say(stdout(), f"{report.matched} {state.value} operation(s) would be cancelled (dry run: nothing changed)")
    else:
        say(stdout(), f"{report.cancelled} cancelled, {report.too_late} too late (of {report.matched} found)")
