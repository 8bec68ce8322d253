"""The enqueue API's routes on API Gateway's HTTP API (IAM auth), by the route key API Gateway matched.

POST /jobs/{job_type}, GET /operations/{id} (the caller's own), POST /operations/{id}/cancel (the caller's
own), GET /admin/operations/{id} (any, for principals IAM grants that route), POST /batches/{name} (a batch, the
caller's own), POST /operations/{id}/signals/{name} (a signal to the caller's own) and POST
/admin/operations/{id}/signals/{name} (to any). What each route does is `converge.api.http.EnqueueApi`'s
(`converge.api.batches.BatchApi`'s for a batch, `converge.api.signals.SignalApi`'s for a signal); this module only
reads the request and writes the response.

API Gateway has already matched the request to one of the template's routes and says which (`routeKey`, with the
path's parameters in `pathParameters`, payload format 2.0), so routing is a lookup in `ROUTES`, not a match of the
path again: Powertools' event handler did that, and its import was some 8% of the function's cold start
(docs/benchmarks.md). Each route builds what it uses on first use (`HttpApp`'s parts), so a first POST /jobs
loads neither the batch, the signal nor the cancel machinery.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from converge.api.http import ApiResponse, EnqueueApi, caller_principal, error

ROUTES: dict[str, tuple[str, str]] = {
    "POST /jobs/{job_type}": ("post_job", "job_type"),
    "GET /operations/{operation_id}": ("get", "operation_id"),
    "POST /operations/{operation_id}/cancel": ("cancel", "operation_id"),
    "GET /admin/operations/{operation_id}": ("get_any", "operation_id"),
    "POST /batches/{name}": ("post_batch", "name"),
    "POST /operations/{operation_id}/signals/{name}": ("signal", "operation_id"),
    "POST /admin/operations/{operation_id}/signals/{name}": ("signal_any", "operation_id"),
}
"""API Gateway's route key (as the template declares the route) -> the HttpApp method and its path parameter."""


@dataclass(frozen=True)
class Request:
    """What a route reads of API Gateway's event (payload format 2.0)."""

    headers: Mapping[str, str]
    """Lower-cased names (HTTP's are case-insensitive; API Gateway lower-cases them too)."""
    body: str | None
    base64_encoded: bool
    caller: str | None
    path: Mapping[str, str]
    """The path's parameters (a route's second one, such as a signal's name, is read from here)."""

    @classmethod
    def of(cls, event: Mapping[str, Any]) -> Request:
        headers = {str(name).lower(): str(value) for name, value in (event.get("headers") or {}).items()}
        path = {str(name): str(value) for name, value in (event.get("pathParameters") or {}).items()}
        return cls(headers, event.get("body"), bool(event.get("isBase64Encoded")), _caller(event), path)


def _caller(event: Mapping[str, Any]) -> str | None:
    """The IAM principal that signed the request (API Gateway's IAM authorizer), or a JWT subject."""
    authorizer = (event.get("requestContext") or {}).get("authorizer") or {}
    iam = authorizer.get("iam") or {}
    principal = iam.get("userArn") or iam.get("callerId")
    if principal:
        return caller_principal(str(principal))
    subject = ((authorizer.get("jwt") or {}).get("claims") or {}).get("sub")
    return f"jwt:{subject}" if subject else None  # never mistaken for an IAM principal


class HttpApp:
    """The enqueue API function's part: the seven routes, around one EnqueueApi (and a BatchApi, built by the first
    batch request, None: this deployment has no batches; and a SignalApi, built by the first signal request)."""

    def __init__(
        self, api: EnqueueApi, batches: Callable[[], Any] | None = None, signals: Callable[[], Any] | None = None
    ) -> None:
        self.api = api
        self._batches = batches
        self._batch_api: Any = None
        self._signals = signals
        self._signal_api: Any = None

    def handle(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        """The function's handler: the request's route, with Powertools' idempotency aware of the invocation."""
        self.api.register_context(context)
        route = ROUTES.get(str(event.get("routeKey")))
        parameter = ((event.get("pathParameters") or {}) if route else {}).get(route[1] if route else "")
        if route is None or not parameter:
            return _response(error(404, "not_found", "no such route"))
        result: ApiResponse = getattr(self, route[0])(Request.of(event), str(parameter))
        return _response(result)

    def post_job(self, request: Request, job_type: str) -> ApiResponse:
        return self.api.submit(
            request.caller,
            request.headers.get("idempotency-key"),
            job_type,
            request.body,  # undecoded: the API checks its size before anything else
            request.headers.get("x-correlation-id"),
            base64_encoded=request.base64_encoded,
            run_at=request.headers.get("run-at"),
            expires_at=request.headers.get("expires-at"),
        )

    def post_batch(self, request: Request, name: str) -> ApiResponse:
        if self._batches is None:
            return error(501, "batches_not_deployed", "this deployment has no batches table (BATCHES_TABLE)")
        if self._batch_api is None:
            self._batch_api = self._batches()
        return self._batch_api.submit(request.caller, name, request.body, base64_encoded=request.base64_encoded)

    def signal(self, request: Request, operation_id: str) -> ApiResponse:
        return self._send_signal(request, operation_id, any_caller=False)

    def signal_any(self, request: Request, operation_id: str) -> ApiResponse:
        return self._send_signal(request, operation_id, any_caller=True)

    def _send_signal(self, request: Request, operation_id: str, any_caller: bool) -> ApiResponse:
        if self._signals is None:
            return error(501, "signals_not_deployed", "this deployment's API sends no signals")
        if self._signal_api is None:
            self._signal_api = self._signals()
        name = request.path.get("name", "")
        return self._signal_api.send(
            request.caller, operation_id, name, request.body, request.base64_encoded, any_caller=any_caller
        )

    def cancel(self, request: Request, operation_id: str) -> ApiResponse:
        return self.api.cancel(request.caller, operation_id, request.body)

    def get(self, request: Request, operation_id: str) -> ApiResponse:
        return self.api.status(request.caller, operation_id)

    def get_any(self, request: Request, operation_id: str) -> ApiResponse:
        return self.api.admin_status(operation_id)


def _response(result: ApiResponse) -> dict[str, Any]:
    """API Gateway's response (payload format 2.0): a JSON body with its status and headers."""
    return {
        "statusCode": result.status,
        "headers": {"Content-Type": "application/json", **(result.headers or {})},
        "body": json.dumps(result.body),
        "isBase64Encoded": False,
    }
