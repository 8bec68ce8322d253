"""The enqueue API's routes on API Gateway's HTTP API (IAM auth), through Powertools' event handler.

POST /jobs/{job_type}, GET /operations/{id} (the caller's own), POST /operations/{id}/cancel (the caller's
own), GET /admin/operations/{id} (any, for principals IAM grants that route), POST /batches/{name} (a batch, the
caller's own). What each route does is `converge.api.http.EnqueueApi`'s (`converge.api.batches.BatchApi`'s for a
batch); this module only reads the request and writes the response.
"""

from __future__ import annotations

import json
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response

from converge.api.batches import BatchApi
from converge.api.http import ApiResponse, EnqueueApi, caller_principal, error


class HttpApp:
    """The enqueue API function's part: its own resolver, with the five routes, around one EnqueueApi (and BatchApi)."""

    def __init__(self, api: EnqueueApi, batches: BatchApi | None = None) -> None:
        self.api = api
        self.batches = batches
        self._resolver = resolver = APIGatewayHttpResolver()
        resolver.post("/jobs/<job_type>")(self._post_job)
        resolver.post("/operations/<operation_id>/cancel")(self._cancel)
        resolver.get("/operations/<operation_id>")(self._get)
        resolver.get("/admin/operations/<operation_id>")(self._get_any)
        resolver.post("/batches/<name>")(self._post_batch)

    def handle(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        """The function's handler: the request's route, with Powertools' idempotency aware of the invocation."""
        self.api.register_context(context)
        return self._resolver.resolve(event, context)

    def _caller(self) -> str | None:
        """The IAM principal that signed the request (API Gateway's IAM authorizer), or a JWT subject."""
        authorizer = self._resolver.current_event.request_context.authorizer
        iam = authorizer.iam if authorizer else None
        if iam is not None and (iam.user_arn or iam.caller_id):
            return caller_principal(iam.user_arn or iam.caller_id or "")
        claims = authorizer.jwt_claim if authorizer else None
        subject = claims.get("sub") if claims else None
        return f"jwt:{subject}" if subject else None  # never mistaken for an IAM principal

    def _post_job(self, job_type: str) -> Response:
        event = self._resolver.current_event
        return _respond(
            self.api.submit(
                self._caller(),
                event.headers.get("idempotency-key"),
                job_type,
                event.body,  # undecoded: the API checks its size before anything else
                event.headers.get("x-correlation-id"),
                base64_encoded=bool(event.is_base64_encoded),
                run_at=event.headers.get("run-at"),
                expires_at=event.headers.get("expires-at"),
            )
        )

    def _post_batch(self, name: str) -> Response:
        if self.batches is None:
            return _respond(error(501, "batches_not_deployed", "this deployment has no batches table (BATCHES_TABLE)"))
        event = self._resolver.current_event
        return _respond(
            self.batches.submit(self._caller(), name, event.body, base64_encoded=bool(event.is_base64_encoded))
        )

    def _cancel(self, operation_id: str) -> Response:
        return _respond(self.api.cancel(self._caller(), operation_id, self._resolver.current_event.body))

    def _get(self, operation_id: str) -> Response:
        return _respond(self.api.status(self._caller(), operation_id))

    def _get_any(self, operation_id: str) -> Response:
        return _respond(self.api.admin_status(operation_id))


def _respond(result: ApiResponse) -> Response:
    return Response(result.status, "application/json", json.dumps(result.body), headers=result.headers)
