"""`converge ops resolve|retry`: an operator's decisions, taken through the framework's operator actions.

Both act in the name of `cli:<user>` (or CONVERGE_ACTOR), which the operation's history records with
the reason given. An action that does not apply (the operation is in another state, or changed
meanwhile) prints why and exits 2; declining the confirmation exits 1 and changes nothing.
"""

from __future__ import annotations

from typing import Annotated

import typer

from converge.operate.actions import ActionResult, Resolution
from converge_cli.support.errors import ExitCode, Failure, fails_cleanly, report
from converge_cli.support.operators import operator_for
from converge_cli.support.options import Json, on_deployment, print_json
from converge_cli.support.output import fields, say, stderr, stdout, styled
from converge_cli.support.target import Target

RESOLVE_HELP = (
    "Record an operator's decision on an UNKNOWN operation (only UNKNOWN ones).\n\n"
    "succeeded / failed: you established with the provider whether the effect happened; the decision "
    "and your reason go into the operation's history.\n\n"
    "retry: you established that the effect did NOT happen. The operation's claim was given back when "
    "it became UNKNOWN, so the next attempt does not take over an old claim and ask the provider again "
    "(which is what made it UNKNOWN); the operation is re-dispatched with the same identity "
    "(same operation id, so the provider's idempotency key is unchanged).\n\n"
    "It needs the project's job catalogue (run it from the project's directory, or pass --catalogue): the job's "
    "binding names what follows each outcome.\n\n"
    "Exit codes: 0 recorded; 2 not UNKNOWN (too late, or another state: the message says which), unknown id, "
    "or no catalogue found (nothing changed)."
)

RETRY_HELP = (
    "Run a FAILED operation again: it is reopened (ACCEPTED, listed under STUCK until a worker takes it) "
    "and its stored request is sent to its queue with the same identity, so the provider's idempotency key "
    "is unchanged. The history records who retried it and why.\n\n"
    "Asks first unless --yes. Exit codes: 0 re-dispatched; 1 not confirmed (nothing changed); "
    "2 not FAILED (too late, or another state: the message says which) or unknown id."
)

Reason = Annotated[str, typer.Option("--reason", help="What you established, recorded in the history.")]


def register(ops_app: typer.Typer) -> None:
    ops_app.command("resolve", help=RESOLVE_HELP)(resolve)
    ops_app.command("retry", help=RETRY_HELP)(retry)


@fails_cleanly
@on_deployment
def resolve(
    operation_id: Annotated[str, typer.Argument(help="An operation in state UNKNOWN.")],
    outcome: Annotated[Resolution, typer.Option("--as", help="succeeded, failed or retry.")],
    reason: Reason,
    *,
    deployment: Target,
    as_json: Json = False,
) -> None:
    # Every outcome needs the job's binding (succeeded and failed write the continuation it names, retry sends it to
    # its queue): without a catalogue, refuse before anything is read or written, saying where it looked.
    deployment.registry  # noqa: B018
    _print(operator_for(deployment.converge).resolve(operation_id, outcome, reason), as_json)


@fails_cleanly
@on_deployment
def retry(
    operation_id: Annotated[str, typer.Argument(help="An operation in state FAILED.")],
    reason: Reason,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    *,
    deployment: Target,
    as_json: Json = False,
) -> None:
    deployment.registry  # noqa: B018 - sent again to its job's queue: refuse now if no catalogue names it
    converge = deployment.converge
    operator = operator_for(converge)
    operation = converge.operations.require(operation_id)
    if not yes and operation.state.value == "FAILED":
        # Say what is about to run again (the confirmation goes to stderr, so --json output stays clean).
        console = stderr()
        fields(
            console,
            [
                ("operation", operation.operation_id),
                ("job type", operation.job_type),
                ("attempts", str(operation.attempts)),
                ("last error", operation.last_error or ""),
            ],
        )
        if not typer.confirm("retry: send it again with the same identity?", err=True):
            say(console, "nothing changed")
            raise typer.Exit(ExitCode.FAILED)
    _print(operator.retry(operation_id, reason), as_json)


def _print(result: ActionResult, as_json: bool) -> None:
    if not result.applied:
        report(Failure("not_applied", f"{result.operation_id}: {result.message}", ExitCode.REFUSED), as_json)
        raise typer.Exit(ExitCode.REFUSED)
    if as_json:
        print_json(result.to_json())
        return
    say(stdout(), styled(result.operation_id, "bold"), f" {result.message}: {result.before} -> {result.after}")
