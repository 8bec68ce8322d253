"""What an operation answers to and when it runs are fixed at admission: a producer's later write of the jobs
table item cannot name another caller, and an API retry cannot change a request's times."""

from __future__ import annotations

import json
from typing import Any

from converge.model.clock import iso
from converge.store.operations import OperationStore

from .conftest import RESET, ApiCloud, Producer, signed_by

ACCOUNT = "123456789012"


def body(response: Any) -> dict[str, Any]:
    return json.loads(response.body)


def timed_post(producer: Producer, payload: Any, key: str, **headers: str) -> Any:
    sent = {**signed_by(producer.access_key), "Idempotency-Key": key, **headers}
    return producer.cloud.http("POST", f"/jobs/{RESET}", headers=sent, body=json.dumps(payload))


def cancel(producer: Producer, operation_id: str) -> Any:
    headers = signed_by(producer.access_key)
    body = json.dumps({"reason": "mine now"})
    return producer.cloud.http("POST", f"/operations/{operation_id}/cancel", headers=headers, body=body)


def operations(api_cloud: ApiCloud) -> OperationStore:
    outputs = api_cloud.cloud.outputs
    return OperationStore(outputs["JobsTableName"], outputs["StateTableName"], api_cloud.cloud.client("dynamodb"))


def test_a_rewrite_naming_another_caller_is_a_conflict_and_takes_no_ownership(
    api_cloud: ApiCloud, producer: Producer, payloads: dict[str, Any]
) -> None:
    # Given an operation one caller enqueued through the API, dispatched
    operation_id = body(producer.post(RESET, payloads[RESET], key="owned-1"))["operation_id"]
    assert api_cloud.dispatches(operation_id) == 1
    # When a producer with a plain PutItem re-puts the item: the same content, another caller as submitted_by
    other = api_cloud.producer("AKIDREWRITER00001")
    dynamodb, key = api_cloud.cloud.client("dynamodb"), {"operation_id": {"S": operation_id}}
    item = dynamodb.get_item(TableName=api_cloud.jobs_table, Key=key)["Item"]
    item["submitted_by"] = {"S": f"arn:aws:iam::{ACCOUNT}:user/{other.access_key}"}
    dynamodb.put_item(TableName=api_cloud.jobs_table, Item=item)
    api_cloud.cloud.drain()
    # Then the caller that enqueued it still reads it; the named one gets the 404 of a missing operation,
    # on reading it and on cancelling it, and the operation is unchanged
    assert (producer.status(operation_id).status, other.status(operation_id).status) == (200, 404)
    assert cancel(other, operation_id).status == 404
    assert body(producer.status(operation_id))["state"] == "ACCEPTED"
    # And the rewrite is an identity conflict on the receipt, listed under CONFLICT, the original kept;
    # nothing was dispatched for it
    store = operations(api_cloud)
    assert operation_id in {row["operation_id"] for row in store.listings.iter_attention("CONFLICT")}
    operation = store.require(operation_id)
    assert len(operation.conflicts) == 1 and operation.state_record.original is not None
    assert operation.submitted_by == f"arn:aws:iam::{ACCOUNT}:user/{producer.access_key}"
    assert api_cloud.dispatches(operation_id) == 1


def test_a_retry_with_the_same_key_and_body_but_another_run_at_is_refused(
    api_cloud: ApiCloud, producer: Producer, payloads: dict[str, Any]
) -> None:
    # Given a request timed an hour ahead
    run_at, other = (iso(api_cloud.cloud.clock.now() + seconds) for seconds in (3600, 7200))
    first = timed_post(producer, payloads[RESET], "timed-retry", **{"Run-At": run_at})
    operation_id = body(first)["operation_id"]
    # When it is retried with the same key and body and the same time / Then it is replayed
    same = timed_post(producer, payloads[RESET], "timed-retry", **{"Run-At": run_at})
    assert (same.status, same.headers.get("idempotent-replayed")) == (202, "true")
    # When it is retried with another Run-At / Then it is refused (never replayed as if the time were taken)
    moved = timed_post(producer, payloads[RESET], "timed-retry", **{"Run-At": other})
    assert (moved.status, body(moved)["error"]) == (422, "idempotency_key_reused")
    # And the same once the request record has expired (admission refuses the same id with other options)
    api_cloud.expire_request_record(operation_id, "deleted")
    late = timed_post(producer, payloads[RESET], "timed-retry", **{"Run-At": other})
    assert (late.status, body(late)["error"]) == (422, "idempotency_key_reused")
    # And the operation keeps the time it was admitted with
    api_cloud.cloud.drain(max_fast_forward=0)
    assert body(producer.status(operation_id))["run_at"] == run_at


def test_a_time_before_the_epoch_is_a_400_not_a_500(
    api_cloud: ApiCloud, producer: Producer, payloads: dict[str, Any]
) -> None:
    # When a request carries a Run-At or an Expires-At before 1970 (a year below 1000 among them)
    before = set(api_cloud.operation_ids())
    for key, headers in (
        ("old-1", {"Run-At": "0999-01-01T00:00:00Z"}),
        ("old-2", {"Run-At": "1969-12-31T23:59:59Z"}),
        ("old-3", {"Expires-At": "0001-01-01T00:00:00Z"}),
    ):
        response = timed_post(producer, payloads[RESET], key, **headers)
        # Then it is refused with the reason, and nothing is stored
        assert (response.status, body(response)["error"]) == (400, "invalid_timing"), response.body
        assert "the Unix epoch" in body(response)["message"]
    assert set(api_cloud.operation_ids()) == before
