"""Dead letters as the console shows them: each message's operation, error class and reason.

Reading a DLQ is a receive, so every message read is made visible again at once (examining is
never consuming); a page reads at most `limit` messages per DLQ.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from converge.flow.registry import Queue
from converge.model.errors import InvalidMessage
from converge.operate.deadletters import receive, release
from converge.operate.redrive_decision import error_class
from converge.screening.message import read_envelope
from converge_cli.support.target import Target

HIDE_SECONDS = 30


@dataclass(frozen=True)
class DeadLetter:
    queue: str
    message_id: str
    operation_id: str | None
    job_type: str
    error_class: str
    reason: str | None
    failed_at: str | None
    receives: int
    redrives: int


def dlq_url(deployment: Target, queue: Queue) -> str | None:
    return deployment.converge.settings.dlq_urls.by_queue()[queue]


def peek(deployment: Target, queue: Queue, limit: int = 50) -> list[DeadLetter]:
    """Up to `limit` messages of the queue's DLQ, each put back (visible again) before returning."""
    url = dlq_url(deployment, queue)
    if not url:
        return []
    sqs = deployment.converge.clients.sqs
    found: dict[str, DeadLetter] = {}
    handles: list[tuple[str, str]] = []
    try:
        while len(found) < limit:
            messages = receive(sqs, url, min(10, limit - len(found)), HIDE_SECONDS, wait_seconds=0)
            handles += [(url, message["ReceiptHandle"]) for message in messages]
            fresh = [message for message in messages if message["MessageId"] not in found]
            if not fresh:
                break
            for message in fresh:
                found[message["MessageId"]] = describe(queue, message)
    finally:
        release(sqs, handles)
    return list(found.values())


def copies_of(deployment: Target, operation_id: str, limit: int = 100) -> list[DeadLetter]:
    """The operation's messages in any DLQ (among the first `limit` of each)."""
    return [
        letter for queue in Queue for letter in peek(deployment, queue, limit) if letter.operation_id == operation_id
    ]


def describe(queue: Queue, message: dict[str, Any]) -> DeadLetter:
    attributes = message.get("MessageAttributes", {})

    def text(name: str) -> str | None:
        value = attributes.get(name, {}).get("StringValue")
        return str(value) if value is not None else None

    try:
        envelope = read_envelope(message.get("Body", ""))
        job_type, operation_id = envelope.job_type, envelope.operation_id
    except InvalidMessage:
        job_type, operation_id = "(malformed)", text("operation_id")
    redrives = text("redrive_count") or "0"
    return DeadLetter(
        queue=queue.value,
        message_id=message["MessageId"],
        operation_id=operation_id,
        job_type=job_type,
        error_class=error_class(message),
        reason=text("error_reason"),
        failed_at=text("failed_at"),
        receives=int(message.get("Attributes", {}).get("ApproximateReceiveCount", 0) or 0),
        redrives=int(redrives) if redrives.isdigit() else 0,
    )
