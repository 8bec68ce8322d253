"""Dead-letter queues: where each queue's DLQ is, and reading them without consuming them.

Redrive and the reconciler both examine dead letters one by one; a receive hides what it returns
for a while, and `release` makes messages visible again, so examining is never consuming.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from converge.flow.registry import Queue, Queues
from converge.observability import logger


class DlqUrls(BaseModel):
    """The DLQ of each queue (CRITICAL_DLQ_URL, DEFAULT_DLQ_URL, BULK_DLQ_URL)."""

    model_config = ConfigDict(frozen=True, populate_by_name=True, extra="ignore")

    critical: str | None = Field(default=None, alias="CRITICAL_DLQ_URL")
    default: str | None = Field(default=None, alias="DEFAULT_DLQ_URL")
    bulk: str | None = Field(default=None, alias="BULK_DLQ_URL")

    def routes(self, queues: Queues) -> dict[Queue, DlqRoute]:
        """DLQ -> source queue for every queue whose DLQ URL is configured."""
        return {queue: DlqRoute(queue, url, queues.url(queue)) for queue, url in self.by_queue().items() if url}

    def by_queue(self) -> dict[Queue, str | None]:
        """Each queue's DLQ URL, by queue (its field is the queue's value)."""
        return {queue: getattr(self, queue.value) for queue in Queue}


@dataclass(frozen=True)
class DlqRoute:
    queue: Queue
    dlq_url: str
    source_url: str


def receive(sqs: Any, queue_url: str, count: int, hide_seconds: int, wait_seconds: int = 1) -> list[dict[str, Any]]:
    """Up to `count` messages, hidden for `hide_seconds`; [] only when the queue shows none visible.

    A short poll first (instant when the queue is empty); SQS's short poll may miss messages of a
    small queue, so when it says some are visible, long-poll briefly before giving up.
    """
    for wait in (0, wait_seconds, wait_seconds):
        messages = sqs.receive_message(
            QueueUrl=queue_url,
            MaxNumberOfMessages=count,
            VisibilityTimeout=hide_seconds,
            WaitTimeSeconds=wait,
            AttributeNames=["All"],
            MessageAttributeNames=["All"],
        ).get("Messages", [])
        if messages:
            return list(messages)
        visible = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["ApproximateNumberOfMessages"])[
            "Attributes"
        ].get("ApproximateNumberOfMessages", "0")
        if int(visible) == 0:
            return []
    return []


def release(sqs: Any, handles: list[tuple[str, str]]) -> None:
    """Make received messages visible again (ten a call per queue)."""
    by_queue: dict[str, list[str]] = {}
    for queue_url, handle in handles:
        by_queue.setdefault(queue_url, []).append(handle)
    for queue_url, receipts in by_queue.items():
        for start in range(0, len(receipts), 10):
            entries = [
                {"Id": str(index), "ReceiptHandle": handle, "VisibilityTimeout": 0}
                for index, handle in enumerate(receipts[start : start + 10])
            ]
            try:
                sqs.change_message_visibility_batch(QueueUrl=queue_url, Entries=entries)
            except Exception:
                # Not fatal: they reappear anyway when the receive's visibility timeout ends.
                logger.exception("could not make dead letters visible again", queue_url=queue_url)
