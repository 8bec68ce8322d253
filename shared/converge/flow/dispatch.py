"""Dispatch: envelopes to their queue. The one way anything reaches the work queues.

The relay sends what the jobs table's stream carries; the resumer, redrive, an operator's resolve
and the reconciler send again what an operation's stored request holds (`envelope_for`, checked
against the fingerprint in the state record, so a request overwritten with other content is never
what runs).

`send` keeps order: items go out in windows of at most ten per queue, window after window; entries
SQS reports as failed are retried a little, inline, and on a failure that remains nothing after the
window is sent. It returns the position of the first item that did not go out, so a stream batch can
be resumed from exactly there without sending again what was sent (only entries of the failed window
that follow the failed one may go out twice, and the lease absorbs them).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from converge.flow.registry import Queue, Queues, Registry
from converge.model.clock import iso
from converge.model.envelope import Envelope
from converge.model.errors import InvalidMessage, NotRunnable, SendFailed
from converge.model.records import Operation
from converge.observability import count, logger

SQS_BATCH = 10
INLINE_RETRIES = 2
RETRY_PAUSE_SECONDS = 0.05


@dataclass(frozen=True)
class Outgoing:
    queue_url: str
    envelope: Envelope
    accepted_at: float | None = None
    attributes: dict[str, dict[str, str]] = field(default_factory=dict)
    queue: Queue | None = None
    delay_seconds: int = 0
    """SQS's message delay (at most 900 s): how a short run_at waits."""
    group: str | None = None
    """The tenant's message group (SQS fair queues on a standard queue), from the binding's tenant field."""

    def entry(self, entry_id: str) -> dict[str, Any]:
        attributes = {
            **self.attributes,
            "job_type": {"DataType": "String", "StringValue": self.envelope.job_type},
            "operation_id": {"DataType": "String", "StringValue": self.envelope.operation_id},
        }
        if self.accepted_at is not None:
            attributes["accepted_at"] = {"DataType": "String", "StringValue": iso(self.accepted_at)}
        body = self.envelope.to_body()
        entry: dict[str, Any] = {"Id": entry_id, "MessageBody": body, "MessageAttributes": attributes}
        if self.delay_seconds:
            entry["DelaySeconds"] = self.delay_seconds
        if self.group:
            entry["MessageGroupId"] = self.group
        return entry


class Dispatcher:
    """The one way to the work queues: a request's message, routed to its job's queue, sent in batches of ten."""

    def __init__(
        self,
        queues: Queues,
        registry: Registry,
        sqs_client: Any,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._queues = queues
        self._registry = registry
        self._sqs = sqs_client
        self._sleep = sleep

    def outgoing(
        self, envelope: Envelope, accepted_at: float | None = None, attributes: dict[str, Any] | None = None
    ) -> Outgoing:
        """Route an envelope to its job's queue (raises InvalidMessage for a job that has none)."""
        binding = self._registry.get(envelope.job_type)
        if binding.queue is None:
            raise InvalidMessage(f"{binding.job_type} is a recurring job; it runs on its schedule, not from a queue")
        url = self._queues.url(binding.queue)
        group = envelope.payload.get(binding.tenant_field) if binding.tenant_field else None
        return Outgoing(
            url,
            envelope,
            accepted_at,
            dict(attributes or {}),
            queue=binding.queue,
            group=_group_id(group) if group not in (None, "") else None,
        )

    def envelope_for(self, operation: Operation) -> Envelope:
        """The envelope of the request the operation was admitted with, or NotRunnable."""
        request = operation.runnable()
        if request is None:
            why = operation.request_problem or "the jobs table now holds other content under this id"
            raise NotRunnable(f"nothing safe to dispatch for {operation.operation_id}: {why}")
        return request.envelope()

    def send_one(self, item: Outgoing) -> None:
        """Send one message; raise if it did not go out."""
        if self.send([item]) is not None:
            raise SendFailed(f"could not send {item.envelope.operation_id} to its queue")

    def send(self, items: Sequence[Outgoing]) -> int | None:
        """Send in order; the index of the first item that did not go out, or None when all did."""
        start = 0
        while start < len(items):
            end = _window_end(items, start)
            failed = self._send_window(items, start, end)
            if failed is not None:
                count("dispatch_failed", value=len(items) - failed)
                return failed
            start = end
        if items:
            count("dispatched", value=len(items))
        return None

    def _send_window(self, items: Sequence[Outgoing], start: int, end: int) -> int | None:
        by_queue: dict[str, list[int]] = {}
        for index in range(start, end):
            by_queue.setdefault(items[index].queue_url, []).append(index)
        # Chunks in the order of their first item: after a failure, nothing later is sent.
        for queue_url, indexes in sorted(by_queue.items(), key=lambda pair: pair[1][0]):
            unsent = self._send_chunk(queue_url, items, indexes)
            if unsent:
                return min(unsent)
        return None

    def _send_chunk(self, queue_url: str, items: Sequence[Outgoing], indexes: list[int]) -> list[int]:
        """Send one SendMessageBatch, retrying failed entries inline; the indexes that still did not go out."""
        pending = list(indexes)
        for attempt in range(INLINE_RETRIES + 1):
            if attempt:
                self._sleep(RETRY_PAUSE_SECONDS * 2 ** (attempt - 1))
            try:
                response = self._sqs.send_message_batch(
                    QueueUrl=queue_url, Entries=[items[index].entry(str(index)) for index in pending]
                )
            except Exception:
                logger.exception("SendMessageBatch failed", queue_url=queue_url, entries=len(pending))
                return pending
            failed = {int(entry["Id"]) for entry in response.get("Failed", [])}
            if failed:
                logger.warning("SendMessageBatch reported failed entries", queue_url=queue_url, count=len(failed))
            pending = [index for index in pending if index in failed]
            if not pending:
                return []
        return pending


def _group_id(value: Any) -> str:
    """A tenant's value as a message group id (SQS allows up to 128 characters)."""
    return str(value)[:128]


def _window_end(items: Sequence[Outgoing], start: int) -> int:
    """The end of the longest run from `start` with at most ten items per queue (one call per queue)."""
    per_queue: dict[str, int] = {}
    end = start
    while end < len(items):
        queue = items[end].queue_url
        taken = per_queue.get(queue, 0)
        if taken == SQS_BATCH:
            break
        per_queue[queue] = taken + 1
        end += 1
    return end
