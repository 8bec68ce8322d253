"""The route table: API Gateway's route keys, as the template declares them, to the API's handlers."""

from __future__ import annotations

import json
from typing import Any

from converge.api.http import ApiResponse
from converge.api.routes import ROUTES, HttpApp
from localcloud.template import load_sam_template
from tests.template.conftest import APPLICATION


class Recorded:
    """Stands in for EnqueueApi: records what each route passed it."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def register_context(self, context: Any) -> None:
        self.calls.append(("context", context))

    def submit(self, *args: Any, **kwargs: Any) -> ApiResponse:
        self.calls.append(("submit", *args, kwargs))
        return ApiResponse(202, {"operation_id": "api-1"}, {"Location": "/operations/api-1"})

    def status(self, caller: str | None, operation_id: str) -> ApiResponse:
        self.calls.append(("status", caller, operation_id))
        return ApiResponse(200, {"operation_id": operation_id})


def event(route_key: str, parameters: dict[str, str], **extra: Any) -> dict[str, Any]:
    return {
        "version": "2.0",
        "routeKey": route_key,
        "pathParameters": parameters,
        "headers": extra.pop("headers", {}),
        "requestContext": {"authorizer": {"iam": {"userArn": "arn:aws:iam::123456789012:user/producer"}}},
        **extra,
    }


def test_every_route_the_template_declares_has_a_handler_and_no_other():
    # Given the enqueue API function's HttpApi events in converge's application template
    function = load_sam_template(APPLICATION)["Resources"]["EnqueueApiFunction"]["Properties"]
    declared = {
        f"{spec['Properties']['Method'].upper()} {spec['Properties']['Path']}"
        for spec in function["Events"].values()
        if spec["Type"] == "HttpApi"
    }
    # Then the route table has exactly those keys, each naming a handler and one of its path's parameters
    assert set(ROUTES) == declared
    for route_key, (handler, parameter) in ROUTES.items():
        assert callable(getattr(HttpApp, handler)) and "{" + parameter + "}" in route_key


def test_a_request_reaches_its_route_with_its_path_parameter_and_headers_in_any_case():
    # Given the API with a recorder behind it
    api = Recorded()
    app = HttpApp(api)  # type: ignore[arg-type]
    # When a job is posted with headers in mixed case
    response = app.handle(
        event(
            "POST /jobs/{job_type}",
            {"job_type": "mail.notice.v1"},
            headers={"Idempotency-Key": "k-1", "X-Correlation-Id": "c-1", "Run-At": "2027-01-01T00:00:00Z"},
            body='{"user_id": "u-1"}',
        ),
        "context",
    )
    # Then the submission got the caller, the key, the job type, the body as sent and the headers' values
    kind, caller, key, job_type, body, correlation, options = api.calls[1]
    assert (kind, caller, key, job_type, body, correlation) == (
        "submit",
        "arn:aws:iam::123456789012:user/producer",
        "k-1",
        "mail.notice.v1",
        '{"user_id": "u-1"}',
        "c-1",
    )
    assert options == {"base64_encoded": False, "run_at": "2027-01-01T00:00:00Z", "expires_at": None}
    # And the answer is API Gateway's: status, JSON body and headers
    assert response == {
        "statusCode": 202,
        "headers": {"Content-Type": "application/json", "Location": "/operations/api-1"},
        "body": json.dumps({"operation_id": "api-1"}),
        "isBase64Encoded": False,
    }


def test_a_route_key_not_in_the_table_is_not_found():
    app = HttpApp(Recorded())  # type: ignore[arg-type]
    for route_key, parameters in (("GET /jobs", {}), ("$default", {}), ("GET /operations/{operation_id}", {})):
        response = app.handle(event(route_key, parameters), "context")
        assert response["statusCode"] == 404 and json.loads(response["body"])["error"] == "not_found"


def test_a_jwt_subject_is_a_caller_never_mistaken_for_an_iam_principal():
    api = Recorded()
    app = HttpApp(api)  # type: ignore[arg-type]
    request = event("GET /operations/{operation_id}", {"operation_id": "op-1"})
    request["requestContext"]["authorizer"] = {"jwt": {"claims": {"sub": "user-7"}}}
    app.handle(request, "context")
    request["requestContext"]["authorizer"] = {}
    app.handle(request, "context")
    assert [call for call in api.calls if call[0] == "status"] == [
        ("status", "jwt:user-7", "op-1"),
        ("status", None, "op-1"),
    ]


def test_a_batch_request_builds_the_batch_part_once_and_a_deployment_without_batches_says_so():
    built: list[int] = []

    class Batches:
        def submit(self, caller: str | None, name: str, body: str | None, base64_encoded: bool) -> ApiResponse:
            return ApiResponse(202, {"batch": name})

    app = HttpApp(Recorded(), lambda: built.append(1) or Batches())  # type: ignore[arg-type]
    for _ in range(2):
        response = app.handle(event("POST /batches/{name}", {"name": "b-1"}, body="{}"), "context")
        assert response["statusCode"] == 202
    assert built == [1]
    without = HttpApp(Recorded())  # type: ignore[arg-type]
    response = without.handle(event("POST /batches/{name}", {"name": "b-1"}, body="{}"), "context")
    assert response["statusCode"] == 501 and json.loads(response["body"])["error"] == "batches_not_deployed"
