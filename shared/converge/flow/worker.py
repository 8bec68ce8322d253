"""The SQS worker: Powertools BatchProcessor around the pipeline, one SQS action per outcome.

Acknowledged outcomes are deleted by the partial batch response. Permanent failures are copied
to the DLQ with their reason *before* being acknowledged. Retries come back after an exponential
backoff with full jitter (a per-message visibility change); out-of-time records come straight
back; a last attempt's message is left to SQS's own redrive once FAILED is recorded.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from typing import Any

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from converge.flow.pipeline import Delivery, Pipeline
from converge.model.clock import Clock, SystemClock, iso
from converge.model.outcomes import Outcome, Result
from converge.observability import batched_counts, logger

BACKOFF_BASE_SECONDS = 2
BACKOFF_CAP_SECONDS = 900
SQS_MAX_VISIBILITY = 43_200


class HandBack(Exception):
    """Raised for a record that goes back to the queue (it becomes a batch item failure)."""

    def __init__(self, result: Result) -> None:
        super().__init__(f"{result.outcome.value}: {result.reason}")
        self.result = result


def full_jitter(
    attempt: int, rng: random.Random, base: float = BACKOFF_BASE_SECONDS, cap: float = BACKOFF_CAP_SECONDS
) -> int:
    """Exponential backoff with full jitter: uniform in [0, min(cap, base * 2^attempt)]."""
    return int(rng.uniform(0, min(cap, base * (2 ** max(attempt, 0)))))


class Worker:
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
        # Visibility changes of records handed back, made in one batch call once the batch is done.
        hand_backs: list[tuple[SQSRecord, int]] = []
        self._pipeline.toggles.begin_batch()
        remaining: Callable[[], int] = context.get_remaining_time_in_millis
        processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
        with batched_counts():
            response = process_partial_response(
                event=event,
                record_handler=lambda record: self._record(record, remaining, hand_backs),
                processor=processor,
                context=context,
            )
        self._change_visibility(hand_backs)
        return dict(response)

    def _record(self, record: SQSRecord, remaining: Callable[[], int], hand_backs: list[tuple[SQSRecord, int]]) -> None:
        accepted = (record.raw_event.get("messageAttributes") or {}).get("accepted_at") or {}
        delivery = Delivery(
            message_id=record.message_id,
            attempt=int(record.attributes.approximate_receive_count or 1),
            max_receive_count=self._max_receive_count,
            remaining_ms=remaining,
            accepted_at=accepted.get("stringValue") if isinstance(accepted, dict) else None,
        )
        result = self._pipeline.process(record.body, delivery)
        if result.outcome.to_dlq_now:
            self._dead_letter(record, result)
        if result.outcome.acknowledged:
            return
        hand_backs.append((record, self._delay(result, delivery.attempt)))
        raise HandBack(result)

    def _delay(self, result: Result, attempt: int) -> int:
        if result.outcome is Outcome.RETRY:
            return full_jitter(attempt, self._rng)
        if result.outcome is Outcome.EARLY:
            # Back when it is due (rounded up, never early); a longer wait comes back and is handed back again.
            return min(SQS_MAX_VISIBILITY, math.ceil(result.retry_after or 0.0))
        if result.outcome is Outcome.BUSY:
            # Come back when the other holder's lease is over (it has finished, or died and can be taken
            # over), spread a little so that duplicates do not return together.
            wait = result.retry_after if result.retry_after is not None else 30.0
            return min(SQS_MAX_VISIBILITY, int(wait) + 1 + int(self._rng.uniform(0, 5)))
        return 0  # REQUEUE and FAILED_FINAL: straight back (to a new worker, or to SQS's redrive)

    def _dead_letter(self, record: SQSRecord, result: Result) -> None:
        """Copy the message to the DLQ with its reason; only then may the caller acknowledge it."""
        attributes = _sdk_attributes(record.raw_event.get("messageAttributes"))
        attributes.update(
            {
                "error_class": {"DataType": "String", "StringValue": result.error_class or result.outcome.value},
                "error_reason": {"DataType": "String", "StringValue": (result.reason or "-")[:1000]},
                "outcome": {"DataType": "String", "StringValue": result.outcome.value},
                "failed_at": {"DataType": "String", "StringValue": iso(self._clock.now())},
                "source_queue": {"DataType": "String", "StringValue": self._queue_url},
            }
        )
        self._sqs().send_message(QueueUrl=self._dlq_url, MessageBody=record.body, MessageAttributes=attributes)
        logger.info("message moved to the DLQ", outcome=result.outcome.value, reason=result.reason)

    def _change_visibility(self, hand_backs: list[tuple[SQSRecord, int]]) -> None:
        for start in range(0, len(hand_backs), 10):
            chunk = hand_backs[start : start + 10]
            entries = [
                {"Id": str(index), "ReceiptHandle": record.receipt_handle, "VisibilityTimeout": delay}
                for index, (record, delay) in enumerate(chunk)
            ]
            try:
                self._sqs().change_message_visibility_batch(QueueUrl=self._queue_url, Entries=entries)
            except Exception:
                # Not fatal: each message still comes back when its current visibility timeout ends.
                logger.exception("could not change message visibility")


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
