"""The enqueue API's request-level idempotency, and how it composes with admission, through the local cloud."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from converge.api.http import EnqueueApi, caller_principal, operation_id_for
from converge.runtime import Converge
from localcloud.functions import applied_environment

from .conftest import API_FUNCTION, RESET, ApiCloud, Producer, signed_by


def body(response: Any) -> dict[str, Any]:
    return json.loads(response.body)


# --- the happy path and its retries -----------------------------------------------------------------------


def test_a_retry_replays_the_original_response_without_a_second_enqueue(
    api_cloud: ApiCloud, producer: Producer, payloads: dict[str, Any]
) -> None:
    # Given a producer's first request, admitted
    before = set(api_cloud.operation_ids())
    first = producer.post(RESET, payloads[RESET], key="reset-u-1003-1")
    assert first.status == 202
    operation_id = body(first)["operation_id"]
    assert first.headers["location"] == f"/operations/{operation_id}"
    assert "idempotent-replayed" not in first.headers

    # When the producer retries it (same key, same body), twice
    retries = [producer.post(RESET, payloads[RESET], key="reset-u-1003-1") for _ in range(2)]

    # Then each retry replays the original 202, marked as a replay...
    for retry in retries:
        assert (retry.status, body(retry)) == (202, body(first))
        assert retry.headers["idempotent-replayed"] == "true"
    # ...and the system holds exactly one operation, dispatched exactly once
    assert set(api_cloud.operation_ids()) - before == {operation_id}
    assert api_cloud.dispatches(operation_id) == 1


def test_the_same_key_with_a_different_body_is_refused(
    api_cloud: ApiCloud, producer: Producer, payloads: dict[str, Any]
) -> None:
    # Given an admitted request
    first = producer.post(RESET, {"user_id": "u-1003"}, key="reused-key")
    operation_id = body(first)["operation_id"]

    # When the key is reused for another payload, or for another job type
    other_payload = producer.post(RESET, {"user_id": "u-1002"}, key="reused-key")
    other_job = producer.post("email.partner-verification.v1", {"user_id": "u-1003"}, key="reused-key")

    # Then both are refused with a clear error, and nothing but the first operation exists
    for refused in (other_payload, other_job):
        assert refused.status == 422
        assert body(refused)["error"] == "idempotency_key_reused"
        assert "different request" in body(refused)["message"]
    assert api_cloud.dispatches(operation_id) == 1


def test_a_retry_with_a_fresh_correlation_id_is_still_a_retry(
    api_cloud: ApiCloud, producer: Producer, payloads: dict[str, Any]
) -> None:
    # Given a request traced under one correlation id
    first = producer.post(RESET, payloads[RESET], key="traced", correlation_id="trace-1")

    # When its retry carries another (tracing middleware often mints one per attempt)
    retry = producer.post(RESET, payloads[RESET], key="traced", correlation_id="trace-2")

    # Then it is a replay: a request is its job type and payload, as for admission's fingerprint
    assert (retry.status, body(retry)) == (202, body(first))
    assert retry.headers["idempotent-replayed"] == "true"


def test_keys_are_scoped_per_caller(api_cloud: ApiCloud, payloads: dict[str, Any]) -> None:
    # Given two services that happen to use the same Idempotency-Key
    billing, accounts = api_cloud.producer("AKIDBILLING0000001"), api_cloud.producer("AKIDACCOUNTS000001")

    # When each submits its own request under it
    first = billing.post(RESET, {"user_id": "u-1003"}, key="order-42")
    second = accounts.post(RESET, {"user_id": "u-1002"}, key="order-42")

    # Then neither is a replay nor a conflict of the other: two operations
    assert (first.status, second.status) == (202, 202)
    assert "idempotent-replayed" not in second.headers
    assert body(first)["operation_id"] != body(second)["operation_id"]


# --- concurrency ------------------------------------------------------------------------------------------


def second_execution_environment(cloud: Any) -> tuple[EnqueueApi, Converge]:
    """The enqueue API as another Lambda execution environment of EnqueueApiFunction builds it.

    The local cloud runs one invocation at a time, so a request truly in flight beside an HTTP request
    needs a second environment: the same code and settings, its own runtime, the same tables.
    """
    environment = cloud.runtime.environment_of(API_FUNCTION)
    with applied_environment(environment):
        runtime = Converge.from_env(clock=cloud.clock)
        api = runtime.enqueue_api.api
    return api, runtime


class RemainingTime:
    """A Lambda context as far as Powertools needs it: the in-progress lock lasts the invocation's time left."""

    def get_remaining_time_in_millis(self) -> int:
        return 10_000


def test_a_request_arriving_while_the_first_is_in_flight_gets_409(
    api_cloud: ApiCloud, producer: Producer, payloads: dict[str, Any]
) -> None:
    # Given a first request in flight in another execution environment: its enqueue blocks until released
    other_environment, runtime = second_execution_environment(api_cloud.cloud)
    other_environment.register_context(RemainingTime())
    enqueue, in_flight, release = runtime.admit, threading.Event(), threading.Event()

    def blocking_enqueue(*args: Any, **kwargs: Any) -> Any:
        in_flight.set()
        assert release.wait(timeout=10), "the test never released the first request"
        return enqueue(*args, **kwargs)

    runtime.admit = blocking_enqueue  # type: ignore[method-assign]
    caller = caller_principal(f"arn:aws:iam::123456789012:user/{producer.access_key}")
    outcome: dict[str, Any] = {}
    first = threading.Thread(
        target=lambda: outcome.setdefault(
            "first", other_environment.submit(caller, "in-flight", RESET, json.dumps(payloads[RESET]), None)
        )
    )
    first.start()
    try:
        assert in_flight.wait(timeout=10)

        # When the same request arrives at the API meanwhile
        concurrent = producer.post(RESET, payloads[RESET], key="in-flight")

        # Then it is refused as in progress, and nothing was enqueued for it
        assert concurrent.status == 409
        assert body(concurrent)["error"] == "request_in_progress"
    finally:
        release.set()
        first.join(timeout=10)

    # And when the first completes, it is admitted, and a retry now replays it
    assert outcome["first"].status == 202
    operation_id = outcome["first"].body["operation_id"]
    assert operation_id == operation_id_for(caller, "in-flight")
    retry = producer.post(RESET, payloads[RESET], key="in-flight")
    assert (retry.status, body(retry)["operation_id"]) == (202, operation_id)
    assert api_cloud.dispatches(operation_id) == 1


# --- after the request record expired: the layers compose -------------------------------------------------


@pytest.mark.parametrize("how", ["deleted", "lapsed"])
def test_after_expiry_admission_absorbs_a_replay(
    api_cloud: ApiCloud, producer: Producer, payloads: dict[str, Any], how: str
) -> None:
    # Given a request admitted and dispatched
    before = set(api_cloud.operation_ids())
    first = producer.post(RESET, payloads[RESET], key=f"late-retry-{how}")
    operation_id = body(first)["operation_id"]
    assert api_cloud.dispatches(operation_id) == 1

    # ...whose request record has expired (the request layer has forgotten it)
    api_cloud.expire_request_record(operation_id, how)

    # When the producer replays it, a day late
    late = producer.post(RESET, payloads[RESET], key=f"late-retry-{how}")

    # Then the request layer runs it afresh (no replay), but admission recognises the operation id:
    # 202 with the same operation, still one operation and one dispatch
    assert late.status == 202
    assert "idempotent-replayed" not in late.headers
    assert body(late)["operation_id"] == operation_id
    assert set(api_cloud.operation_ids()) - before == {operation_id}
    assert api_cloud.dispatches(operation_id) == 1


def test_after_expiry_a_different_body_is_still_refused(
    api_cloud: ApiCloud, producer: Producer, payloads: dict[str, Any]
) -> None:
    # Given an admitted request whose request record has expired
    first = producer.post(RESET, {"user_id": "u-1003"}, key="late-and-different")
    operation_id = body(first)["operation_id"]
    api_cloud.expire_request_record(operation_id, "deleted")

    # When the key comes back with another payload
    late = producer.post(RESET, {"user_id": "u-1002"}, key="late-and-different")

    # Then admission refuses the identity reuse with the same answer as the request layer
    assert late.status == 422
    assert body(late)["error"] == "idempotency_key_reused"
    assert api_cloud.dispatches(operation_id) == 1
    # ...and the failed request left no record behind that could replay a refusal as a success
    assert not [r for r in api_cloud.request_records() if operation_id in r.get("data", {}).get("S", "")]


def test_a_key_may_hold_spaces_and_the_spaces_around_it_are_not_part_of_it(
    api_cloud: ApiCloud, producer: Producer, payloads: dict[str, Any]
) -> None:
    # Given a request whose key holds spaces (printable ASCII, 0x20-0x7E, as documented)
    first = producer.post(RESET, payloads[RESET], key="reset u-1003 2025-01-01")
    # Then it is admitted
    assert first.status == 202, body(first)
    operation_id = body(first)["operation_id"]
    # When it is retried with spaces around the key (HTTP drops them around a header's value; so does the API)
    retry = producer.post(RESET, payloads[RESET], key="  reset u-1003 2025-01-01 \t")
    # Then it is the same request: the original answer, replayed, and one dispatch
    assert (retry.status, body(retry)) == (202, body(first))
    assert retry.headers["idempotent-replayed"] == "true"
    # And a space inside the key is part of it: two spaces are another key, so another request
    other = producer.post(RESET, payloads[RESET], key="reset u-1003  2025-01-01")
    assert other.status == 202 and body(other)["operation_id"] != operation_id
    assert "idempotent-replayed" not in other.headers
    assert api_cloud.dispatches(operation_id) == 1


# --- bad requests -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("job_type", "raw_body", "key", "error", "reason"),
    [
        (RESET, "{not json", "k", "malformed_json", "not valid JSON"),
        (RESET, '["u-1003"]', "k", "invalid_payload", "JSON object"),
        ("email.unheard-of.v1", '{"user_id": "u-1003"}', "k", "unknown_job_type", "email.unheard-of.v1"),
        (RESET, '{"user_id": 1003}', "k", "invalid_payload", "user_id"),
        (RESET, "{}", "k", "invalid_payload", "user_id"),
        (RESET, '{"user_id": "jane@example.com"}', "k", "invalid_payload", "e-mail address"),
        (RESET, '{"user_id": "u-1003", "email": "x"}', "k", "invalid_payload", "email"),
        (RESET, '{"user_id": "u-1003"}', None, "missing_idempotency_key", "Idempotency-Key"),
        (RESET, '{"user_id": "u-1003"}', "has\ttab", "invalid_idempotency_key", "printable ASCII"),
        (RESET, '{"user_id": "u-1003"}', "has\nnewline", "invalid_idempotency_key", "printable ASCII"),
        (RESET, '{"user_id": "u-1003"}', "clé-1", "invalid_idempotency_key", "0x20-0x7E"),
        (RESET, '{"user_id": "u-1003"}', "k" * 129, "invalid_idempotency_key", "1-128"),
        (RESET, '{"user_id": "u-1003"}', "   ", "missing_idempotency_key", "Idempotency-Key"),
    ],
    ids=[
        "malformed-json",
        "not-an-object",
        "unknown-job-type",
        "wrong-type",
        "missing-field",
        "pii-value",
        "pii-field",
        "missing-key",
        "key-with-a-tab",
        "key-with-a-newline",
        "key-not-ascii",
        "key-too-long",
        "key-of-spaces",
    ],
)
def test_bad_requests_are_400_with_the_reason_and_write_nothing(
    api_cloud: ApiCloud, producer: Producer, job_type: str, raw_body: str, key: str | None, error: str, reason: str
) -> None:
    # Given the stored operations and request records
    operations, records = len(api_cloud.operation_ids()), len(api_cloud.request_records())

    # When a bad request arrives
    response = producer.post(job_type, None, key=key, raw_body=raw_body)

    # Then it is a 400 naming the reason, and nothing was stored
    assert response.status == 400
    assert body(response)["error"] == error
    assert reason in body(response)["message"]
    assert (len(api_cloud.operation_ids()), len(api_cloud.request_records())) == (operations, records)


# --- status and auth --------------------------------------------------------------------------------------


def test_an_operation_status_is_readable_and_an_unknown_one_is_404(
    api_cloud: ApiCloud, producer: Producer, payloads: dict[str, Any]
) -> None:
    # Given an admitted operation
    operation_id = body(producer.post("pdf.cv.v1", payloads["pdf.cv.v1"], key="cv-1"))["operation_id"]

    # When its status is read, and that of an id nobody enqueued
    known, unknown = producer.status(operation_id), producer.status("api-nothing-here")

    # Then the first is its stored state, the second a 404
    assert known.status == 200
    assert {k: body(known)[k] for k in ("operation_id", "job_type", "state", "attempts")} == {
        "operation_id": operation_id,
        "job_type": "pdf.cv.v1",
        "state": "ACCEPTED",
        "attempts": 0,
    }
    assert (unknown.status, body(unknown)["error"]) == (404, "not_found")
    assert body(producer.status("bad id!"))["error"] == "invalid_operation_id"  # refused before any read


def test_an_unsigned_request_is_refused_by_the_api_before_the_function(
    api_cloud: ApiCloud, payloads: dict[str, Any]
) -> None:
    # Given the function's invocation count
    cloud = api_cloud.cloud
    invoked = cloud.runtime.invocation_counts[API_FUNCTION]

    # When requests arrive without a SigV4 Authorization header
    post = cloud.http("POST", f"/jobs/{RESET}", headers={"Idempotency-Key": "k"}, body=json.dumps(payloads[RESET]))
    get = cloud.http("GET", "/operations/api-x")

    # Then API Gateway's IAM authorizer answers 403 and the function never runs
    assert (post.status, get.status) == (403, 403)
    assert cloud.runtime.invocation_counts[API_FUNCTION] == invoked
    assert cloud.http("GET", "/operations/api-x", headers=signed_by("AKIDSOMEONE")).status == 404


def test_an_assumed_role_caller_is_its_role_whatever_the_session() -> None:
    # A retry from a new session of the same role (new task, refreshed credentials) keeps its keys
    first = caller_principal("arn:aws:sts::123456789012:assumed-role/billing-service/task-1a2b")
    second = caller_principal("arn:aws:sts::123456789012:assumed-role/billing-service/task-9z8y")
    assert first == second == "arn:aws:sts::123456789012:assumed-role/billing-service"
    assert operation_id_for(first, "k") == operation_id_for(second, "k")
    # ...while users and roles of other names stay distinct principals
    assert caller_principal("arn:aws:iam::123456789012:user/ci") == "arn:aws:iam::123456789012:user/ci"
    assert caller_principal("arn:aws:sts::123456789012:assumed-role/other/task-1a2b") != first


# --- the deployed shape -----------------------------------------------------------------------------------


def test_the_template_deploys_the_api_and_its_table_locally(api_cloud: ApiCloud) -> None:
    # Given template.yaml deployed by the local cloud (moto's CloudFormation skips ApiGatewayV2)
    cloud = api_cloud.cloud
    [api] = [a for a in cloud.http_apis if a.logical_id == "EnqueueApi"]

    # Then every route is served by the function, behind IAM authorization
    assert {(r.route_key, r.function_id, r.iam_auth) for r in api.routes} == {
        ("POST /jobs/{job_type}", API_FUNCTION, True),
        ("GET /operations/{operation_id}", API_FUNCTION, True),
        ("GET /admin/operations/{operation_id}", API_FUNCTION, True),
        ("POST /operations/{operation_id}/cancel", API_FUNCTION, True),
        ("POST /batches/{name}", API_FUNCTION, True),
        ("POST /operations/{operation_id}/signals/{name}", API_FUNCTION, True),
        ("POST /admin/operations/{operation_id}/signals/{name}", API_FUNCTION, True),
    }
    # ...in-process, the URL output is the API's execute-api URL (server mode rewrites it to loopback)
    assert cloud.outputs["EnqueueApiUrl"] == f"https://{api.api_id}.execute-api.us-east-1.amazonaws.com"
    # ...and the request records' table expires them by TTL, with point-in-time recovery on
    dynamodb = cloud.client("dynamodb")
    ttl = dynamodb.describe_time_to_live(TableName=api_cloud.idempotency_table)["TimeToLiveDescription"]
    assert ttl == {"TimeToLiveStatus": "ENABLED", "AttributeName": "expiration"}
    environment = cloud.functions[API_FUNCTION].environment
    assert environment["IDEMPOTENCY_TABLE"] == api_cloud.idempotency_table
    assert environment["IDEMPOTENCY_RETENTION_SECONDS"] == "86400"
