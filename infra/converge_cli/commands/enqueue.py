"""`converge enqueue`: admit one job to a deployment."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from converge_cli.support.errors import UsageError, fails_cleanly
from converge_cli.support.lookup import require_job_type
from converge_cli.support.options import Json, on_deployment, print_json
from converge_cli.support.output import say, stdout, styled
from converge_cli.support.target import Target


@fails_cleanly
@on_deployment
def enqueue(
    job_type: Annotated[str, typer.Argument(help="Versioned job type, e.g. billing.invoice-email.v1.")],
    operation_id: Annotated[str, typer.Option("--id", help="The business-operation id (reused on every retry).")],
    payload: Annotated[str, typer.Option("--payload", help="The job's payload as a JSON object.")],
    correlation_id: Annotated[str | None, typer.Option("--correlation-id", help="Ties logs together.")] = None,
    run_at: Annotated[
        str | None, typer.Option("--at", help="Not before this time (ISO-8601 UTC, at most a year ahead).")
    ] = None,
    expires_at: Annotated[
        str | None, typer.Option("--expires-at", help="Not started by this time (ISO-8601 UTC), it ends EXPIRED.")
    ] = None,
    *,
    deployment: Target,
    as_json: Json = False,
) -> None:
    """Admit a job. The same id with the same payload is the same operation; other content is refused."""
    try:
        data = json.loads(payload)
    except ValueError as exc:
        raise UsageError(f"--payload is not valid JSON: {exc}") from None
    require_job_type(deployment.registry, job_type)
    converge = deployment.converge
    admission = converge.enqueue(job_type, operation_id, data, correlation_id, run_at=run_at, expires_at=expires_at)
    result = {"operation_id": operation_id, "created": admission.created, "state": admission.operation.state.value}
    if run_at:
        result["run_at"] = admission.operation.request.run_at if admission.operation.request else run_at
    if as_json:
        print_json(result)
    elif admission.created:
        due = f", due at {result['run_at']}" if run_at else ""
        say(stdout(), "accepted ", styled(operation_id, "bold"), f" ({job_type}{due})")
    else:
        say(
            stdout(),
            styled(operation_id, "bold"),
            f" already exists with the same content: {result['state']}, not re-sent",
        )
