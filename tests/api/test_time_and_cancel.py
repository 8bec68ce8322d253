"""The enqueue API's times (Run-At, Expires-At headers) and POST /operations/{id}/cancel, scoped to its caller."""

from __future__ import annotations

import json
from typing import Any

from converge.model.clock import iso

from .conftest import RESET, ApiCloud, Producer, signed_by


def body(response: Any) -> dict[str, Any]:
    return json.loads(response.body)


def timed_post(producer: Producer, payload: Any, key: str, **headers: str) -> Any:
    sent = {**signed_by(producer.access_key), "Idempotency-Key": key, **headers}
    return producer.cloud.http("POST", f"/jobs/{RESET}", headers=sent, body=json.dumps(payload))


def cancel(producer: Producer, operation_id: str, reason: Any = "no longer wanted") -> Any:
    return producer.cloud.http(
        "POST",
        f"/operations/{operation_id}/cancel",
        headers=signed_by(producer.access_key),
        body=json.dumps({"reason": reason}),
    )


def test_a_timed_request_is_scheduled_and_its_caller_can_cancel_it(
    api_cloud: ApiCloud, producer: Producer, payloads: dict[str, Any]
) -> None:
    # Given a request timed an hour ahead through the Run-At header
    run_at = iso(api_cloud.cloud.clock.now() + 3600)
    accepted = timed_post(producer, payloads[RESET], "timed-1", **{"Run-At": run_at})
    operation_id = body(accepted)["operation_id"]
    api_cloud.cloud.drain(max_fast_forward=0)
    # Then its caller reads it SCHEDULED with its time
    status = body(producer.status(operation_id))
    assert (accepted.status, status["state"], status["run_at"]) == (202, "SCHEDULED", run_at)
    # When another caller tries to cancel it / Then it gets the 404 of a missing operation, and nothing changes
    other = api_cloud.producer("AKIDCANCELOTHER01")
    assert cancel(other, operation_id).status == 404
    assert body(producer.status(operation_id))["state"] == "SCHEDULED"
    # When its caller cancels it / Then it is CANCELLED with the caller and reason, and never dispatched
    response = cancel(producer, operation_id)
    assert (response.status, body(response)["after"], body(response)["applied"]) == (200, "CANCELLED", True)
    api_cloud.cloud.advance(3601)
    assert api_cloud.dispatches(operation_id) == 0
    operation = api_cloud.cloud.http("GET", f"/operations/{operation_id}", headers=signed_by(producer.access_key))
    assert body(operation)["state"] == "CANCELLED"
    # When it is cancelled again / Then it is too late (409), and the receipt is unchanged
    again = cancel(producer, operation_id)
    assert (again.status, body(again)["message"]) == (409, "too late: it is CANCELLED")


def test_bad_times_and_bad_cancel_bodies_are_refused_with_the_reason(
    api_cloud: ApiCloud, producer: Producer, payloads: dict[str, Any]
) -> None:
    # When the times are malformed or too far ahead / Then 400 invalid_timing, and nothing is stored
    before = set(api_cloud.operation_ids())
    far = iso(api_cloud.cloud.clock.now() + 400 * 86400)
    for key, headers in (("bad-1", {"Run-At": far}), ("bad-2", {"Expires-At": "tomorrow"})):
        response = timed_post(producer, payloads[RESET], key, **headers)
        assert (response.status, body(response)["error"]) == (400, "invalid_timing")
    assert set(api_cloud.operation_ids()) == before
    # When a cancel carries no reason / Then 400 with the reason
    accepted = timed_post(producer, payloads[RESET], "bad-3")
    for reason in ("", None, "x" * 301):
        response = cancel(producer, body(accepted)["operation_id"], reason)
        assert (response.status, body(response)["error"]) == (400, "invalid_reason")
