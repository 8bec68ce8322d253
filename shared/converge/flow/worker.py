"""The SQS worker: the pipeline for each record of a batch, one SQS action per outcome.

Acknowledged outcomes are deleted by the partial batch response (`batchItemFailures`: the records that go
back). Permanent failures are copied to the DLQ with their reason *before* being acknowledged. Retries come
back after an exponential backoff with full jitter (a per-message visibility change); out-of-time records come
straight back; a last attempt's message is left to SQS's own redrive once FAILED is recorded.

The batch is walked here rather than by Powertools' BatchProcessor: the pipeline already turns every error of a
record into its outcome, so what is left is a loop and a list, and the batch utility's import (every event
source's record classes, asyncio) was a tenth of a worker's cold start, its per-record wrapping a few per cent
of each message's CPU (docs/benchmarks.md).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from typing import Any

from converge.flow.pipeline import Pipeline
from converge.flow.runner import Delivery
from converge.model.clock import Clock, SystemClock, iso
from converge.model.outcomes import Outcome, Result
from converge.observability import batched_counts, logger

BACKOFF_BASE_SECONDS = 2
BACKOFF_CAP_SECONDS = 900
SQS_MAX_VISIBILITY = 43_200
IN_FLIGHT_ALLOWANCE = 1_200
"""SQS counts a message's 12 hours of visibility from its receive, which comes before the event source's batching
window (5 minutes at most) and this invocation (15 minutes at most): a hand-back that would end later is refused,
and the message comes back after the queue's own timeout instead, a receive spent for nothing."""
MAX_HAND_BACK = SQS_MAX_VISIBILITY - IN_FLIGHT_ALLOWANCE


Record = dict[str, Any]
"""One record of an SQS event, as Lambda passes it (messageId, receiptHandle, body, attributes...)."""


def full_jitter(
    attempt: int, rng: random.Random, base: float = BACKOFF_BASE_SECONDS, cap: float = BACKOFF_CAP_SECONDS
) -> int:
    """Exponential backoff with full jitter: uniform in [0, min(cap, base * 2^attempt)]."""
    return int(rng.uniform(0, min(cap, base * (2 ** max(attempt, 0)))))


class Worker:
    """One queue's SQS worker: each record of a batch through the pipeline, one SQS action for each outcome."""

    def __init__(
        self,
        pipeline: Pipeline,
        sqs_client: Callable[[], Any],
        queue_url: str,
        dlq_url: str,
        max_receive_count: int,
        clock: Clock | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self._pipeline = pipeline
        self._sqs = sqs_client  # built on first use: the happy path never calls SQS itself
        self._queue_url = queue_url
        self._dlq_url = dlq_url
        self._max_receive_count = max_receive_count
        self._clock = clock or SystemClock()
        self._rng = rng or random.Random()

    def handle(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        """Run each record; answer the records that go back to the queue (SQS deletes the others)."""
        records = event.get("Records") if isinstance(event, dict) else None
        if not isinstance(records, list):
            raise ValueError("not an SQS event: it has no Records list")
        # Visibility changes of records handed back, made in one batch call once the batch is done.
        hand_backs: list[tuple[Record, int]] = []
        failures: list[dict[str, str]] = []
        self._pipeline.toggles.begin_batch()
        remaining: Callable[[], int] = context.get_remaining_time_in_millis
        with batched_counts():
            for record in records:
                try:
                    handed_back = self._record(record, remaining, hand_backs)
                except Exception:
                    # The pipeline turns every error of a job into an outcome: this is converge's own failure (or a
                    # record without a body). The record goes back, and the rest of the batch carries on.
                    logger.exception("could not process the record; it goes back to the queue")
                    handed_back = True
                if handed_back:
                    failures.append({"itemIdentifier": str(record.get("messageId", ""))})
        self._change_visibility(hand_backs)
        return {"batchItemFailures": failures}

    def _record(self, record: Record, remaining: Callable[[], int], hand_backs: list[tuple[Record, int]]) -> bool:
        """Run one record; True when it goes back to the queue."""
        accepted = (record.get("messageAttributes") or {}).get("accepted_at") or {}
        delivery = Delivery(
            message_id=record["messageId"],
            attempt=int((record.get("attributes") or {}).get("ApproximateReceiveCount") or 1),
            max_receive_count=self._max_receive_count,
            remaining_ms=remaining,
            accepted_at=accepted.get("stringValue") if isinstance(accepted, dict) else None,
        )
        result = self._pipeline.process(record["body"], delivery)
        if result.outcome.to_dlq_now:
            self._dead_letter(record, result)
        if result.outcome.acknowledged:
            return False
        hand_backs.append((record, self._delay(result, delivery.attempt)))
        return True

    def _delay(self, result: Result, attempt: int) -> int:
        if result.outcome is Outcome.RETRY:
            return full_jitter(attempt, self._rng)
        if result.outcome is Outcome.EARLY:
            # Back when it is due (rounded up, never early); a longer wait comes back and is handed back again.
            return min(MAX_HAND_BACK, math.ceil(result.retry_after or 0.0))
        if result.outcome is Outcome.BUSY:
            # Come back when the other holder's lease is over (it has finished, or died and can be taken
            # over), spread a little so that duplicates do not return together.
            wait = result.retry_after if result.retry_after is not None else 30.0
            return min(MAX_HAND_BACK, int(wait) + 1 + int(self._rng.uniform(0, 5)))
        return 0  # REQUEUE and FAILED_FINAL: straight back (to a new worker, or to SQS's redrive)

    def _dead_letter(self, record: Record, result: Result) -> None:
        """Copy the message to the DLQ with its reason; only then may the caller acknowledge it."""
        attributes = _sdk_attributes(record.get("messageAttributes"))
        attributes.update(
            {
                "error_class": {"DataType": "String", "StringValue": result.error_class or result.outcome.value},
                "error_reason": {"DataType": "String", "StringValue": (result.reason or "-")[:1000]},
                "outcome": {"DataType": "String", "StringValue": result.outcome.value},
                "failed_at": {"DataType": "String", "StringValue": iso(self._clock.now())},
                "source_queue": {"DataType": "String", "StringValue": self._queue_url},
            }
        )
        self._sqs().send_message(QueueUrl=self._dlq_url, MessageBody=record["body"], MessageAttributes=attributes)
        logger.info("message moved to the DLQ", outcome=result.outcome.value, reason=result.reason)

    def _change_visibility(self, hand_backs: list[tuple[Record, int]]) -> None:
        for start in range(0, len(hand_backs), 10):
            chunk = hand_backs[start : start + 10]
            entries = [
                {"Id": str(index), "ReceiptHandle": record["receiptHandle"], "VisibilityTimeout": delay}
                for index, (record, delay) in enumerate(chunk)
            ]
            try:
                answer = self._sqs().change_message_visibility_batch(QueueUrl=self._queue_url, Entries=entries)
            except Exception:
                # Not fatal: each message still comes back when its current visibility timeout ends.
                logger.exception("could not change message visibility")
                continue
            for failed in answer.get("Failed") or []:  # SQS refuses entries one by one, in the answer
                logger.warning(
                    "could not change a message's visibility; it comes back after the queue's timeout",
                    code=failed.get("Code"),
                    reason=failed.get("Message"),
                    delay=chunk[int(failed.get("Id", 0))][1],
                )


def _sdk_attributes(raw: Any) -> dict[str, dict[str, str]]:
    """SQS event attributes (stringValue/dataType) in the shape SendMessage takes."""
    converted: dict[str, dict[str, str]] = {}
    for name, attribute in (raw or {}).items():
        if not isinstance(attribute, dict):
            continue
        data_type = attribute.get("dataType") or attribute.get("DataType")
        value = attribute.get("stringValue") or attribute.get("StringValue")
        if data_type and value is not None:
            converted[name] = {"DataType": data_type, "StringValue": value}
    return converted
