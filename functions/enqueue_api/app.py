"""Enqueue API (API Gateway HTTP API, IAM auth): POST /jobs/{job_type}, GET /operations/{id} (the caller's
own), POST /operations/{id}/cancel (the caller's own), GET /admin/operations/{id} (any, for principals
IAM grants that route)."""

import json
import os
from functools import cache
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response
from aws_lambda_powertools.utilities.typing import LambdaContext

from converge.api.http import DEFAULT_RETENTION_SECONDS, ApiResponse, EnqueueApi, caller_principal
from converge.observability import logger, metrics, tracer
from converge.runtime import Converge

converge = Converge.from_env()
resolver = APIGatewayHttpResolver()


@cache
def api() -> EnqueueApi:
    retention = int(os.environ.get("IDEMPOTENCY_RETENTION_SECONDS", DEFAULT_RETENTION_SECONDS))
    return EnqueueApi(converge, os.environ["IDEMPOTENCY_TABLE"], retention)


def caller() -> str | None:
    """The IAM principal that signed the request (API Gateway's IAM authorizer), or a JWT subject."""
    authorizer = resolver.current_event.request_context.authorizer
    iam = authorizer.iam if authorizer else None
    if iam is not None and (iam.user_arn or iam.caller_id):
        return caller_principal(iam.user_arn or iam.caller_id or "")
    claims = authorizer.jwt_claim if authorizer else None
    subject = claims.get("sub") if claims else None
    return f"jwt:{subject}" if subject else None  # never mistaken for an IAM principal


def respond(result: ApiResponse) -> Response:
    return Response(result.status, "application/json", json.dumps(result.body), headers=result.headers)


@resolver.post("/jobs/<job_type>")
def post_job(job_type: str) -> Response:
    event = resolver.current_event
    return respond(
        api().submit(
            caller(),
            event.headers.get("idempotency-key"),
            job_type,
            event.body,  # undecoded: the API checks its size before anything else
            event.headers.get("x-correlation-id"),
            base64_encoded=event.is_base64_encoded,
            run_at=event.headers.get("run-at"),
            expires_at=event.headers.get("expires-at"),
        )
    )


@resolver.post("/operations/<operation_id>/cancel")
def cancel_operation(operation_id: str) -> Response:
    return respond(api().cancel(caller(), operation_id, resolver.current_event.body))


@resolver.get("/operations/<operation_id>")
def get_operation(operation_id: str) -> Response:
    return respond(api().status(caller(), operation_id))


@resolver.get("/admin/operations/<operation_id>")
def get_any_operation(operation_id: str) -> Response:
    return respond(api().admin_status(operation_id))


@logger.inject_lambda_context(correlation_id_path='headers."x-correlation-id"')
@metrics.log_metrics
@tracer.capture_lambda_handler
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    api().register_context(context)
    return resolver.resolve(event, context)
