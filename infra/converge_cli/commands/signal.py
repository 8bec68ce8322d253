"""`converge signal`: send a signal to an operation waiting for it (`ctx.wait_for`), or that will."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from converge.model.submission import SignalSubmission
from converge_cli.support.errors import ExitCode, Failure, UsageError, fails_cleanly, report
from converge_cli.support.operators import actor
from converge_cli.support.options import Json, on_deployment, print_json
from converge_cli.support.output import say, stdout, styled
from converge_cli.support.target import Target


@fails_cleanly
@on_deployment
def signal_command(
    operation_id: Annotated[str, typer.Argument(help="The operation whose step waits (or will wait) for the signal.")],
    name: Annotated[str, typer.Argument(help="The signal's name: the wait's, as in ctx.wait_for(name, ...).")],
    payload: Annotated[
        str, typer.Option("--payload", help="A JSON object of identifiers (screened like a job's payload).")
    ] = "{}",
    signal_id: Annotated[
        str | None,
        typer.Option("--signal-id", help="Its id: the same id again is the same signal (default: from its content)."),
    ] = None,
    *,
    deployment: Target,
    as_json: Json = False,
) -> None:
    """Send a signal: kept once per wait (before the wait too), the same id twice being one signal.

    Exit codes: 0 kept (accepted, or received already under this id); 2 refused (the wait has its outcome: another
    signal or its timeout; listed on the operation), no such operation, or one that has ended."""
    try:
        data = json.loads(payload)
    except ValueError as exc:
        raise UsageError(f"--payload is not valid JSON: {exc}") from None
    converge = deployment.converge
    receipt = converge.signals.send(SignalSubmission(operation_id, name, data, signal_id, sent_by=actor()))
    if not receipt.kept:
        message = f"{operation_id}: signal {name!r} {receipt.answer.value}: {receipt.detail}"
        report(Failure(receipt.answer.value, message, ExitCode.REFUSED), as_json)
        raise typer.Exit(ExitCode.REFUSED)
    if as_json:
        print_json(receipt.to_json())
    else:
        say(
            stdout(),
            f"signal {name!r} for ",
            styled(operation_id, "bold"),
            f" {receipt.answer.value}: {receipt.detail}",
        )
