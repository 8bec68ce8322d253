"""Hostile input sized to make a validator slow: at every entry point it is refused in time that grows at
most linearly with its size (the size caps run first), with a visible outcome, and never at the cost of
the good work beside it.

Each entry point (converge.enqueue, the HTTP API, the relay on a raw stream item, the worker on an SQS
body) is fed the slowest of several shapes at 1 KiB, 16 KiB and 256 KiB; each time is the best of a
few repetitions (CPU time) in this one run, and the test asserts ratios between sizes, never a time limit.
"""

from __future__ import annotations

import gc
import itertools
import json
import re
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest

import converge
from catalogue import examples
from converge.model.errors import InvalidMessage
from converge.model.states import OperationState
from converge.screening.heuristics import screen
from converge.screening.limits import MAX_BODY_BYTES, MAX_PAYLOAD_BYTES

from .conftest import Chaos

GOOD = "email.password-reset.v1"
SIZES = (1024, 16 * 1024, 256 * 1024)
REPETITIONS = 7
SLACK = 3
"""A size 16 times larger may take at most 3 x 16 times longer: generous for noise, far below quadratic."""

SHAPES: dict[str, Callable[[int], dict[str, Any]]] = {
    "a long value without an @": lambda n: {"user_id": "a" * n},
    "many fields of @s": lambda n: {f"f{i}": "a@" * 500 for i in range(max(1, n // 1010))},
    "digit groups": lambda n: {"user_id": ("0 12 " * n)[:n]},
    "JWT-like dots": lambda n: {"user_id": ("eyJa." * n)[:n]},
    "spelled-out at": lambda n: {"user_id": (" at " * n)[:n]},
    "colon-joined pieces": lambda n: {"user_id": ("a1:" * n)[:n]},
    "assignments in a URL's path": lambda n: {"user_id": ("https://hooks.slack.com/" + "t=a1/" * n)[:n]},
}
DEEP = "deeply nested"
"""A text-only shape for the JSON entry points: brackets nested far past any parser's depth."""


def deep_json(n: int) -> str:
    depth = max(1, (n - 16) // 2)
    return '{"user_id": ' + "[" * depth + "]" * depth + "}"


def timed(call: Callable[[], Any]) -> float:
    """One call's CPU time on this thread, with the garbage collector held off as timeit does. CPU time,
    because on a machine shared with other work a call longer than the scheduler's time slice also
    waits for other processes, which would make longer calls look slower than they are; and a
    collection of the whole test process's heap is not the validator's cost either."""
    gc.disable()
    try:
        started = time.thread_time()
        call()
        return time.thread_time() - started
    finally:
        gc.enable()


def best_time(call: Callable[[], Any]) -> float:
    return min(timed(call) for _ in range(REPETITIONS))


def slowest(entry: Callable[[str, int], Any], shapes: list[str], sizes: tuple[int, ...] = SIZES) -> dict[int, float]:
    """Per size, the time of the slowest shape, each shape's time being its best of REPETITIONS. The sizes
    take turns within each round, so that a machine busy with other work slows all of them alike."""
    best = {(shape, size): float("inf") for shape in shapes for size in sizes}
    for _ in range(REPETITIONS):
        for shape in shapes:
            for size in sizes:
                best[shape, size] = min(best[shape, size], timed(lambda shape=shape, size=size: entry(shape, size)))
    return {size: max(best[shape, size] for shape in shapes) for size in sizes}


def assert_linear(times: dict[int, float], record: Callable[[str, object], None] | None = None, what: str = "") -> None:
    sizes = sorted(times)
    if record is not None:
        ratios = ", ".join(
            f"t({b // 1024}K)/t({a // 1024}K) {times[b] / times[a]:.1f} (at most {SLACK * b // a})"
            for a, b in itertools.pairwise(sizes)
        )
        record("linear time", f"{what}: {ratios} (t(1K) {times[sizes[0]] * 1000:.1f} ms)")
    for small, large in itertools.pairwise(sizes):
        allowed = SLACK * large / small
        ratio = times[large] / times[small]
        assert ratio <= allowed, f"t({large})/t({small}) = {ratio:.1f}, more than {allowed:.0f}: {times}"


def test_the_ratio_check_catches_a_quadratic_validator() -> None:
    # Given the e-mail pattern converge used to search every value with (quadratic without an @)
    old_email = re.compile(r"[^@\s]+@[^@\s]+\.[A-Za-z]{2,}")
    times = {n: best_time(lambda n=n: old_email.search("a" * n)) for n in (256, 4096)}
    # Then the same ratio check refuses it
    with pytest.raises(AssertionError, match="more than"):
        assert_linear(times)


def test_the_heuristics_alone_are_linear_even_without_the_caps(record_property: Any) -> None:
    # Given values up to 16 times the per-value cap, so the patterns themselves are measured
    def entry(shape: str, size: int) -> None:
        for value in SHAPES[shape](size).values():
            screen(value)

    assert_linear(slowest(entry, list(SHAPES), (1024, 4096, 16384)), record_property, "the heuristics, uncapped")


# --- the entry points --------------------------------------------------------------------------------------


def test_converge_enqueue_refuses_hostile_payloads_in_linear_time(
    chaos: Chaos, monkeypatch: pytest.MonkeyPatch, record_property: Any
) -> None:
    # Given converge.enqueue bound to this deployment
    monkeypatch.setattr(converge, "_runtime", lambda: chaos.workload.converge)

    def entry(shape: str, size: int) -> None:
        with pytest.raises(InvalidMessage):
            converge.enqueue(GOOD, f"hostile-{size}", SHAPES[shape](size))

    # When each shape is enqueued at each size / Then the time grows at most linearly, and nothing is stored
    assert_linear(slowest(entry, list(SHAPES)), record_property, "converge.enqueue")
    assert chaos.workload.converge.operations.get(f"hostile-{SIZES[-1]}") is None


def test_the_http_api_answers_400_or_413_in_linear_time(chaos: Chaos, record_property: Any) -> None:
    # Given signed requests with hostile bodies
    headers = {
        "Authorization": "AWS4-HMAC-SHA256 Credential=AKIDHOSTILE/20250101/us-east-1/execute-api/aws4_request",
        "Idempotency-Key": "hostile",
    }
    statuses: dict[int, set[int]] = {size: set() for size in SIZES}

    def entry(shape: str, size: int) -> None:
        body = deep_json(size) if shape == DEEP else json.dumps(SHAPES[shape](size))
        response = chaos.cloud.http("POST", f"/jobs/{GOOD}", headers=headers, body=body)
        statuses[size].add(response.status)

    # When each shape is posted at each size / Then the time grows at most linearly
    assert_linear(slowest(entry, [*SHAPES, DEEP]), record_property, "the HTTP API")
    # And small bodies are refused as invalid (400), bodies over the cap as too large (413), never a 500
    assert statuses[SIZES[0]] == {400}
    assert statuses[SIZES[1]] <= {400, 413}  # 16 KiB shapes fall either side of the cap
    assert statuses[SIZES[2]] == {413}


def test_the_relay_rejects_hostile_raw_items_in_linear_time(chaos: Chaos, record_property: Any) -> None:
    # Given raw stream records of request items as any producer could write them
    def entry(shape: str, size: int) -> None:
        image = {
            "operation_id": {"S": f"hostile-{size}"},
            "job_type": {"S": GOOD},
            "payload": {"M": {key: {"S": value} for key, value in SHAPES[shape](size).items()}},
        }
        record = {"eventName": "INSERT", "dynamodb": {"SequenceNumber": "1", "NewImage": image}}
        result = chaos.cloud.invoke("OutboxRelayFunction", {"Records": [record]})
        assert result == {"batchItemFailures": []}  # rejected, never retried

    # When each is relayed at each size / Then the time grows at most linearly
    assert_linear(slowest(entry, list(SHAPES)), record_property, "the relay")


def test_the_worker_rejects_hostile_bodies_in_linear_time(chaos: Chaos, record_property: Any) -> None:
    # Given SQS records whose bodies are hostile envelopes
    queue_arn = chaos.cloud.client("sqs").get_queue_attributes(
        QueueUrl=chaos.cloud.outputs["CriticalQueueUrl"], AttributeNames=["QueueArn"]
    )["Attributes"]["QueueArn"]

    def entry(shape: str, size: int) -> None:
        payload = deep_json(size)[12:-1] if shape == DEEP else json.dumps(SHAPES[shape](size))
        body = f'{{"v": 1, "operation_id": "hostile-{size}", "job_type": "{GOOD}", "payload": {payload}}}'
        record = {
            "messageId": str(uuid.uuid4()),
            "receiptHandle": "hostile",
            "body": body,
            "attributes": {"ApproximateReceiveCount": "1"},
            "messageAttributes": {},
            "eventSource": "aws:sqs",
            "eventSourceARN": queue_arn,
        }
        result = chaos.cloud.invoke("CriticalWorkerFunction", {"Records": [record]})
        assert result == {"batchItemFailures": []}  # copied to the DLQ with its reason, then acknowledged

    # When each is delivered at each size / Then the time grows at most linearly
    assert_linear(slowest(entry, [*SHAPES, DEEP]), record_property, "the worker")


# --- the outcomes, beside good work -------------------------------------------------------------------------


def test_a_worker_batch_rejects_a_256_kib_message_with_its_reason_and_runs_the_others(chaos: Chaos) -> None:
    # Given good jobs and a 256 KiB message in the same queue (SQS takes up to 1 MiB)
    good = [chaos.enqueue(GOOD, f"op-good-{n}", {"user_id": examples.CONFIRMED_USER}) for n in range(3)]
    payload = SHAPES["digit groups"](SIZES[-1])
    hostile = json.dumps({"v": 1, "operation_id": "op-huge", "job_type": GOOD, "payload": payload})
    chaos.cloud.client("sqs").send_message(QueueUrl=chaos.cloud.outputs["CriticalQueueUrl"], MessageBody=hostile)

    # When the cloud drains
    chaos.workload.drain()

    # Then the big one is in the DLQ with its reason, body intact, and every good job succeeded once
    [dead] = [m for m in chaos.dlq_messages() if m["Body"] == hostile]
    reason = dead["MessageAttributes"]["error_reason"]["StringValue"]
    assert f"the limit is {MAX_BODY_BYTES} bytes" in reason
    for operation_id in good:
        assert chaos.operation(operation_id).state is OperationState.SUCCEEDED
        assert chaos.effects().emails[operation_id] == 1


def test_a_256_kib_raw_item_is_rejected_visibly_and_the_good_job_runs(chaos: Chaos) -> None:
    # Given a good job and a producer's raw 256 KiB request item
    chaos.enqueue(GOOD, "op-good", {"user_id": examples.CONFIRMED_USER})
    chaos.workload.enqueue_raw(
        {
            "operation_id": {"S": "op-huge"},
            "job_type": {"S": GOOD},
            "payload": {"M": {"user_id": {"S": "a" * SIZES[-1]}}},
        }
    )

    # When the cloud drains / Then the item is REJECTED with the cap in its reason, and the good job succeeded
    chaos.workload.drain()
    huge = chaos.operation("op-huge")
    assert huge.state is OperationState.REJECTED
    assert f"the limit is {MAX_PAYLOAD_BYTES} bytes" in (huge.last_error or "")
    assert chaos.operation("op-good").state is OperationState.SUCCEEDED
