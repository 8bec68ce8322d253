"""The SQS event source mapping: batches, partial batch responses, visibility, receive counts, DLQ."""

from __future__ import annotations

import json
from typing import Any

import pytest
from moto.sqs import models as sqs_models

from localcloud import LocalCloud, sqs_time

from .support import Recorder, queue_depth, receive_all, send

WORKER = "CriticalWorkerFunction"
QUEUE = "CriticalQueueUrl"
DLQ = "CriticalDlqUrl"


def _queue_settings(cloud: LocalCloud) -> tuple[int, int]:
    """(visibility timeout, maxReceiveCount) as deployed from the template."""
    attributes = cloud.client("sqs").get_queue_attributes(QueueUrl=cloud.outputs[QUEUE], AttributeNames=["All"])[
        "Attributes"
    ]
    return int(attributes["VisibilityTimeout"]), int(json.loads(attributes["RedrivePolicy"])["maxReceiveCount"])


def test_a_batch_arrives_in_the_lambda_sqs_event_shape(cloud: LocalCloud) -> None:
    # Given a worker and two messages on its queue
    worker = Recorder()
    cloud.override_handler(WORKER, worker)
    send(cloud, QUEUE, {"n": 1}, {"n": 2})

    # When the local cloud drains
    stats = cloud.drain()

    # Then one invocation carried both records, shaped as Lambda delivers them, and both were deleted
    assert stats.quiescent and stats.invocations[WORKER] == 1
    record = worker.records[0]
    assert set(record) == {
        "messageId", "receiptHandle", "body", "attributes", "messageAttributes",
        "md5OfBody", "eventSource", "eventSourceARN", "awsRegion",
    }  # fmt: skip
    assert record["eventSource"] == "aws:sqs"
    assert record["eventSourceARN"].endswith(cloud.outputs[QUEUE].rsplit("/", 1)[-1])
    assert record["attributes"]["ApproximateReceiveCount"] == "1"
    assert {"SentTimestamp", "ApproximateFirstReceiveTimestamp", "SenderId"} <= set(record["attributes"])
    assert sorted(json.loads(r["body"])["n"] for r in worker.records) == [1, 2]
    assert queue_depth(cloud, QUEUE) == (0, 0)


def test_partial_batch_failure_keeps_only_the_reported_messages(cloud: LocalCloud) -> None:
    # Given a worker that reports message "bad" as failed once
    ids = send(cloud, QUEUE, {"name": "good"}, {"name": "bad"}, {"name": "fine"})
    bad_id = ids[1]
    worker = Recorder(
        lambda event: {
            "batchItemFailures": [
                {"itemIdentifier": r["messageId"]}
                for r in event["Records"]
                if json.loads(r["body"])["name"] == "bad" and r["attributes"]["ApproximateReceiveCount"] == "1"
            ]
        }
    )
    cloud.override_handler(WORKER, worker)

    # When the queue is polled once
    cloud.queue_sources[0].poll(flush=True)

    # Then the successes are deleted and the failed message is in flight, hidden for the visibility timeout
    assert queue_depth(cloud, QUEUE) == (0, 1)

    # When the cloud drains (fast-forwarding the visibility timeout instead of sleeping)
    visibility_timeout, _ = _queue_settings(cloud)
    stats = cloud.drain()

    # Then the failed message came back once, with its receive count incremented, and succeeded
    redelivered = worker.events[1]["Records"]
    assert [r["messageId"] for r in redelivered] == [bad_id]
    assert redelivered[0]["attributes"]["ApproximateReceiveCount"] == "2"
    assert stats.fast_forwarded_seconds > visibility_timeout - 5  # what was left of it, not a real wait
    assert queue_depth(cloud, QUEUE) == (0, 0)


def test_an_unknown_item_identifier_fails_the_whole_batch(cloud: LocalCloud) -> None:
    # Given a worker whose response names a message that is not in the batch
    send(cloud, QUEUE, {"n": 1}, {"n": 2})
    cloud.override_handler(WORKER, Recorder({"batchItemFailures": [{"itemIdentifier": "not-in-this-batch"}]}))

    # When the queue is polled
    result = cloud.queue_sources[0].poll(flush=True)

    # Then nothing was deleted: both messages are back in flight
    assert (result.deleted, result.failed) == (0, 2)
    assert queue_depth(cloud, QUEUE) == (0, 2)


def test_an_empty_item_identifier_fails_the_whole_batch(cloud: LocalCloud) -> None:
    # Given a worker that reports a failure without an identifier
    send(cloud, QUEUE, {"n": 1})
    cloud.override_handler(WORKER, Recorder({"batchItemFailures": [{"itemIdentifier": ""}]}))

    # When the queue is polled, then the message is kept
    assert cloud.queue_sources[0].poll(flush=True).failed == 1
    assert queue_depth(cloud, QUEUE) == (0, 1)


def test_a_handler_exception_fails_the_whole_batch(cloud: LocalCloud) -> None:
    # Given a worker that crashes
    def crash(event: object, context: object) -> None:
        raise RuntimeError("boom")

    send(cloud, QUEUE, {"n": 1}, {"n": 2})
    cloud.override_handler(WORKER, crash)

    # When the queue is polled, then both messages stay on the queue
    assert cloud.queue_sources[0].poll(flush=True).failed == 2
    assert queue_depth(cloud, QUEUE) == (0, 2)


def test_visibility_timeout_hides_a_failed_message_until_it_passes(cloud: LocalCloud) -> None:
    # Given a message whose first delivery failed
    send(cloud, QUEUE, {"n": 1})
    failing = Recorder(lambda event: {"batchItemFailures": [{"itemIdentifier": event["Records"][0]["messageId"]}]})
    cloud.override_handler(WORKER, failing)
    cloud.queue_sources[0].poll(flush=True)
    visibility_timeout, _ = _queue_settings(cloud)

    # When almost the whole visibility timeout passes, then the message is still hidden
    cloud.advance(visibility_timeout - 2)
    assert cloud.queue_sources[0].poll(flush=True).received == 0

    # When the rest of it passes, then it is delivered again
    cloud.advance(3)
    assert cloud.queue_sources[0].poll(flush=True).received == 1


def test_a_message_that_reappears_while_the_drain_looks_for_the_next_one_is_still_delivered(
    cloud: LocalCloud, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a message handed back once, and polls that each take real time (60% of the visibility timeout): the
    # message reappears after a poll found the queue empty and before the drain asks what reappears next
    send(cloud, QUEUE, {"n": 1})
    handler = Recorder(
        lambda event: (
            {"batchItemFailures": [{"itemIdentifier": event["Records"][0]["messageId"]}]}
            if len(handler.events) == 1
            else {"batchItemFailures": []}
        )
    )
    cloud.override_handler(WORKER, handler)
    visibility_timeout, _ = _queue_settings(cloud)
    passed = [0.0]  # real seconds gone by in the polls, on moto's clock
    seconds, millis = sqs_models.unix_time, sqs_models.unix_time_millis
    monkeypatch.setattr(sqs_models, "unix_time", lambda: seconds() + passed[0])
    monkeypatch.setattr(sqs_models, "unix_time_millis", lambda: millis() + passed[0] * 1000)
    monkeypatch.setattr(sqs_time, "unix_time_millis", sqs_models.unix_time_millis)
    source = cloud.queue_sources[0]
    poll = source.poll

    def slow_poll(flush: bool = False) -> Any:
        result = poll(flush=flush)
        if not result.received:
            passed[0] += 0.6 * visibility_timeout
        return result

    monkeypatch.setattr(source, "poll", slow_poll)

    # When the cloud drains, then it goes on until the message is delivered again, and only then is quiet
    stats = cloud.drain()
    assert stats.quiescent
    assert len(handler.events) == 2
    assert queue_depth(cloud, QUEUE) == (0, 0)


def test_a_message_moves_to_the_dlq_after_max_receive_count(cloud: LocalCloud) -> None:
    # Given a worker that always fails
    def crash(event: object, context: object) -> None:
        raise RuntimeError("always")

    cloud.override_handler(WORKER, crash)
    [message_id] = send(cloud, QUEUE, {"n": 1})
    _, max_receive_count = _queue_settings(cloud)

    # When the cloud drains
    stats = cloud.drain()

    # Then the worker saw it exactly maxReceiveCount times and SQS moved it to the DLQ
    assert stats.quiescent
    assert stats.invocations[WORKER] == max_receive_count
    assert queue_depth(cloud, QUEUE) == (0, 0)
    assert [m["MessageId"] for m in receive_all(cloud, DLQ)] == [message_id]


def test_batch_size_limits_each_invocation(cloud: LocalCloud) -> None:
    # Given more messages than the mapping's BatchSize
    batch_size = cloud.queue_sources[0].mapping.batch_size
    worker = Recorder()
    cloud.override_handler(WORKER, worker)
    send(cloud, QUEUE, *({"n": n} for n in range(batch_size + 3)))

    # When the cloud drains, then no invocation exceeded the batch size and every message was handled
    cloud.drain()
    assert max(len(e["Records"]) for e in worker.events) <= batch_size
    assert len(worker.records) == batch_size + 3
