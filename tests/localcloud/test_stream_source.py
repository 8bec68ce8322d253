"""The DynamoDB stream event source mapping: filters, batch item failures, bisect, retries, age, destination."""

from __future__ import annotations

import json
from typing import Any

import pytest

from localcloud import LocalCloud
from localcloud.clock import TICK

from .support import Recorder, put_operation, receive_all

RELAY = "OutboxRelayFunction"
FAILURES = "RelayFailureQueueUrl"


def _operation_ids(event: dict[str, Any]) -> list[str]:
    return [r["dynamodb"]["Keys"]["operation_id"]["S"] for r in event["Records"]]


def _set(cloud: LocalCloud, operation_id: str, **attributes: str) -> None:
    names = {f"#a{i}": name for i, name in enumerate(attributes)}
    values = {f":v{i}": {"S": value} for i, value in enumerate(attributes.values())}
    cloud.client("dynamodb").update_item(
        TableName=cloud.outputs["JobsTableName"],
        Key={"operation_id": {"S": operation_id}},
        UpdateExpression="SET " + ", ".join(f"#a{i} = :v{i}" for i in range(len(attributes))),
        ExpressionAttributeNames=names,
        ExpressionAttributeValues=values,
    )


def test_records_arrive_in_the_lambda_dynamodb_event_shape(cloud: LocalCloud) -> None:
    # Given a relay and an admitted operation
    relay = Recorder()
    cloud.override_handler(RELAY, relay)
    put_operation(cloud, "op-1", job_type="email.welcome.v1")

    # When the cloud drains
    cloud.drain()

    # Then the relay got the INSERT as Lambda shapes it
    [record] = relay.records
    assert record["eventName"] == "INSERT"
    assert record["eventSource"] == "aws:dynamodb"
    assert record["eventSourceARN"] == cloud.stream_sources[0].mapping.stream_arn
    assert {"eventID", "eventVersion", "awsRegion"} <= set(record)
    dynamodb = record["dynamodb"]
    assert dynamodb["Keys"] == {"operation_id": {"S": "op-1"}}
    assert dynamodb["NewImage"]["job_type"] == {"S": "email.welcome.v1"}
    assert dynamodb["StreamViewType"] == "NEW_AND_OLD_IMAGES"
    assert "OldImage" not in dynamodb  # an INSERT has no old image
    assert isinstance(dynamodb["ApproximateCreationDateTime"], float)
    assert {"SequenceNumber", "SizeBytes"} <= set(dynamodb)
    json.dumps(relay.events[0])  # the event is plain JSON, as Lambda delivers it


def test_filter_criteria_pass_producers_writes_and_drop_deletes(cloud: LocalCloud) -> None:
    # Given two admitted requests, one written again by its producer and one deleted
    relay = Recorder()
    cloud.override_handler(RELAY, relay)
    put_operation(cloud, "op-1", job_type="t.v1")
    put_operation(cloud, "op-2", job_type="t.v1")
    _set(cloud, "op-1", job_type="t2.v1")  # a rewrite: delivered with its old image
    cloud.client("dynamodb").delete_item(TableName=cloud.outputs["JobsTableName"], Key={"operation_id": {"S": "op-2"}})

    # When the cloud drains
    stats = cloud.drain()

    # Then the two INSERTs and the rewrite reached the relay, the delete did not
    delivered = [(r["eventName"], r["dynamodb"]["Keys"]["operation_id"]["S"]) for r in relay.records]
    assert delivered == [("INSERT", "op-1"), ("INSERT", "op-2"), ("MODIFY", "op-1")]
    assert relay.records[2]["dynamodb"]["OldImage"]["job_type"] == {"S": "t.v1"}
    assert stats.stream_records_filtered == 1


def test_reported_item_failure_retries_from_that_record(cloud: LocalCloud) -> None:
    # Given a relay that fails op-2 on its first attempt
    attempts: dict[str, int] = {}

    def respond(event: dict[str, Any]) -> dict[str, Any]:
        failures = []
        for record in event["Records"]:
            op = record["dynamodb"]["Keys"]["operation_id"]["S"]
            attempts[op] = attempts.get(op, 0) + 1
            if op == "op-2" and attempts[op] == 1:
                failures.append({"itemIdentifier": record["dynamodb"]["SequenceNumber"]})
        return {"batchItemFailures": failures}

    relay = Recorder(respond)
    cloud.override_handler(RELAY, relay)
    for n in (1, 2, 3):
        put_operation(cloud, f"op-{n}")

    # When the cloud drains
    cloud.drain()

    # Then the retry started at op-2: op-1 was not delivered again, op-3 was (it followed the failure)
    assert [_operation_ids(e) for e in relay.events] == [["op-1", "op-2", "op-3"], ["op-2", "op-3"]]


def test_bisect_isolates_a_poison_record_and_retries_exhaust_to_the_failure_destination(cloud: LocalCloud) -> None:
    # Given a relay that crashes on any batch containing op-poison
    def respond(event: dict[str, Any]) -> None:
        if "op-poison" in _operation_ids(event):
            raise RuntimeError("poison")

    relay = Recorder(respond)
    cloud.override_handler(RELAY, relay)
    for op in ("op-a", "op-b", "op-poison", "op-c"):
        put_operation(cloud, op)
    mapping = cloud.stream_sources[0].mapping

    # When the cloud drains
    stats = cloud.drain()

    # Then bisecting delivered every healthy record, and the poison record alone used up its retries
    delivered_ok = {op for e in relay.events if "op-poison" not in _operation_ids(e) for op in _operation_ids(e)}
    assert delivered_ok == {"op-a", "op-b", "op-c"}
    poison_alone = [e for e in relay.events if _operation_ids(e) == ["op-poison"]]
    assert len(poison_alone) == mapping.max_retry_attempts + 1
    assert stats.stream_records_skipped == 1

    # And the on-failure destination received the AWS invocation record for it
    [message] = receive_all(cloud, FAILURES)
    record = json.loads(message["Body"])
    assert record["requestContext"]["condition"] == "RetryAttemptsExhausted"
    assert record["requestContext"]["functionArn"] == cloud.functions[RELAY].arn
    assert record["responseContext"]["functionError"] == "Unhandled"
    info = record["DDBStreamBatchInfo"]
    assert info["batchSize"] == 1
    assert info["startSequenceNumber"] == info["endSequenceNumber"]
    assert info["streamArn"] == mapping.stream_arn
    assert {"shardId", "approximateArrivalOfFirstRecord", "approximateArrivalOfLastRecord"} <= set(info)


def test_records_older_than_the_maximum_age_are_skipped_to_the_destination(cloud: LocalCloud) -> None:
    # Given a record written, then the relay is down for longer than the maximum record age
    relay = Recorder()
    cloud.override_handler(RELAY, relay)
    put_operation(cloud, "op-late")
    cloud.advance(cloud.stream_sources[0].mapping.max_record_age + 1)

    # When the cloud drains
    stats = cloud.drain()

    # Then the record never reached the relay and its batch info went to the failure queue
    assert relay.events == []
    assert stats.stream_records_skipped == 1
    [message] = receive_all(cloud, FAILURES)
    record = json.loads(message["Body"])
    assert record["requestContext"]["condition"] == "RecordAgeExceeded"
    assert record["DDBStreamBatchInfo"]["batchSize"] == 1


def test_invalid_item_identifier_fails_the_whole_stream_batch(cloud: LocalCloud) -> None:
    # Given a relay that answers with an identifier not in the batch on its first call
    calls = {"n": 0}

    def respond(event: dict[str, Any]) -> dict[str, Any]:
        calls["n"] += 1
        return {"batchItemFailures": [{"itemIdentifier": "nope"}]} if calls["n"] == 1 else {}

    relay = Recorder(respond)
    cloud.override_handler(RELAY, relay)
    put_operation(cloud, "op-1")

    # When the cloud drains, then the whole batch was retried
    stats = cloud.drain()
    assert [_operation_ids(e) for e in relay.events] == [["op-1"], ["op-1"]]
    assert stats.failed_invocations[RELAY] == 1


def test_while_time_stands_still_a_record_written_after_an_advance_carries_it(cloud: LocalCloud) -> None:
    # Given the cloud's time standing still but for its advances (as the explorer runs it), a tick a reading
    relay = Recorder()
    cloud.override_handler(RELAY, relay)
    with cloud.ticking():
        first, second = cloud.clock.now(), cloud.clock.now()
        # When the clock is advanced a day, and a request written at once (within the millisecond of the advance)
        cloud.advance(86400)
        put_operation(cloud, "op-1", job_type="email.welcome.v1")
        written = cloud.clock.now()
        cloud.drain()
    # Then readings moved by a tick each, and only by them and the advance
    assert second - first == pytest.approx(TICK, abs=1e-6)
    assert written - second == pytest.approx(86400, abs=100 * TICK)
    # And the record's creation time is on the advanced clock (moto stamps it to the millisecond): not a day old,
    # so the relay got it rather than its failure destination
    [record] = relay.records
    assert second + 86400 < record["dynamodb"]["ApproximateCreationDateTime"] <= written
    assert receive_all(cloud, FAILURES) == []
    # And afterwards the clock runs on real time again, never backwards
    assert cloud.clock.now() >= written
