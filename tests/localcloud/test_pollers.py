"""The local cloud's pollers (the SQS and stream event sources, the one-time schedules, the parameter-change
detector) stand in for AWS's own, which cost the application nothing: they skip the round trips whose answer
moto's state already gives (an empty queue, a stream read to its end, no schedule, no parameter changed) and
deliver exactly as before."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import botocore.client
import pytest

from localcloud import LocalCloud

from .support import Recorder, put_operation, send

WORKER = "CriticalWorkerFunction"
QUEUE = "CriticalQueueUrl"
RELAY = "OutboxRelayFunction"
POLLED = ("ReceiveMessage", "DescribeStream", "GetShardIterator", "GetRecords", "ListSchedules", "DescribeParameters")


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[Counter[str]]:
    """Every API call made while the test runs, by operation name (any client: the cloud's and the test's)."""
    counted: Counter[str] = Counter()
    original = botocore.client.BaseClient._make_api_call

    def counting(self: Any, operation_name: str, api_params: dict[str, Any]) -> Any:
        counted[operation_name] += 1
        return original(self, operation_name, api_params)

    monkeypatch.setattr(botocore.client.BaseClient, "_make_api_call", counting)
    yield counted


def test_an_idle_cloud_drains_without_polling_and_a_batch_takes_one_receive(
    cloud: LocalCloud, calls: Counter[str]
) -> None:
    # Given a deployed cloud with nothing to do, drained once
    worker, relay = Recorder(), Recorder({"batchItemFailures": []})
    cloud.override_handler(WORKER, worker)
    cloud.override_handler(RELAY, relay)
    cloud.drain()
    calls.clear()

    # When it drains again / Then no poller made a call: every queue empty, every stream read to its end, no
    # schedule, no parameter changed
    assert cloud.drain().quiescent
    assert {name: calls[name] for name in POLLED if calls[name]} == {}

    # When three messages wait on a worker's queue (batches of ten)
    send(cloud, QUEUE, {"n": 1}, {"n": 2}, {"n": 3})
    calls.clear()
    stats = cloud.drain()

    # Then one receive brought all three to one invocation: none came back empty
    assert stats.invocations[WORKER] == 1 and len(worker.records) == 3
    assert calls["ReceiveMessage"] == 1 and calls["DeleteMessageBatch"] == 1

    # When a producer writes one item
    put_operation(cloud, "op-polled", job_type="email.password-reset.v1")
    calls.clear()
    stats = cloud.drain()

    # Then the relay got it from one read of the stream, and no round read it again
    assert stats.invocations[RELAY] == 1 and len(relay.records) == 1
    assert (calls["GetShardIterator"], calls["GetRecords"], calls["DescribeStream"]) == (1, 1, 0)


def test_a_delayed_message_waits_without_receives_then_arrives(cloud: LocalCloud, calls: Counter[str]) -> None:
    # Given a message sent with a delay of 30 seconds
    worker = Recorder()
    cloud.override_handler(WORKER, worker)
    sqs = cloud.client("sqs")
    sqs.send_message(QueueUrl=cloud.outputs[QUEUE], MessageBody="{}", DelaySeconds=30)
    [source] = [s for s in cloud.queue_sources if s.mapping.function_id == WORKER]
    calls.clear()

    # When its worker's queue is polled before the delay has passed / Then nothing is received, and not asked for
    assert source.poll(flush=True).received == 0
    assert calls["ReceiveMessage"] == 0

    # When the emulated clock passes the delay / Then the next poll receives it and the worker runs
    cloud.advance(31)
    assert source.poll(flush=True).received == 1
    assert calls["ReceiveMessage"] == 1 and len(worker.records) == 1

    # And a parameter written by any client is still seen by the next drain, once
    calls.clear()
    cloud.client("ssm").put_parameter(Name="/pollers/probe", Value="1", Type="String")
    assert cloud.drain().parameter_events == 1 and calls["DescribeParameters"] == 1
    assert cloud.drain().parameter_events == 0 and calls["DescribeParameters"] == 1
