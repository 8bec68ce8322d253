"""Age moto's in-memory SQS messages, so visibility timeouts pass without sleeping.

moto keeps, per message, `visible_at` and `delayed_until` (epoch milliseconds, compared with the real
clock on every receive) plus `sent_timestamp` and `approximate_first_receive_timestamp`. Shifting all
four back by N seconds is indistinguishable, for any client, from N seconds having passed: the
message becomes visible, and the 12-hour visibility limit and retention period age consistently.
moto's server mode runs in this process too, so this works for both modes of the local cloud.

One rule of moto's is put right here, as AWS applies it: a message's visibility may be extended to 12 hours from
its latest receive (moto counted them from when it was sent, so a message handed back more than once in its life
could never be hidden for long again, and came back after the queue's timeout, spending a receive).
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterable, Iterator
from typing import Any

from moto.core.utils import unix_time_millis
from moto.sqs import models as sqs_models
from moto.sqs.models import sqs_backends

from .clients import ACCOUNT_ID


def _queues(region: str, names: Iterable[str] | None = None) -> Iterator[Any]:
    queues = sqs_backends[ACCOUNT_ID][region].queues
    wanted = None if names is None else set(names)
    for name, queue in list(queues.items()):
        if wanted is None or name in wanted:
            yield queue


MAX_VISIBILITY_MS = 43_200 * 1000


def _received(saved: Any) -> Any:
    def mark_received(self: Any, visibility_timeout: int | None = None) -> None:
        saved(self, visibility_timeout)
        self.received_at = sqs_models.unix_time_millis()  # moto's clock (the frozen one, in the explorer)

    mark_received.counts_from_receive = True  # type: ignore[attr-defined]
    return mark_received


def _change_visibility(backend: Any, queue_name: str, receipt_handle: str, visibility_timeout: int) -> None:
    """moto's ChangeMessageVisibility, its 12-hour limit counted from the message's latest receive."""
    queue = backend.get_queue(queue_name)
    for message in queue._messages:
        if message.had_receipt_handle(receipt_handle):
            since = getattr(message, "received_at", None) or message.sent_timestamp or 0
            if sqs_models.unix_time_millis() + int(visibility_timeout) * 1000 - since > MAX_VISIBILITY_MS:
                raise sqs_models.InvalidParameterValue(
                    f"Value {visibility_timeout} for parameter VisibilityTimeout is invalid. Reason: Total "
                    "VisibilityTimeout for the message is beyond the limit [43200 seconds]"
                )
            message.change_visibility(visibility_timeout)
            if message.visible and message in queue.pending_messages:
                queue.pending_messages.remove(message)
            return
    raise sqs_models.ReceiptHandleIsInvalid


def _change_visibility_batch(
    backend: Any, queue_name: str, entries: list[dict[str, Any]]
) -> tuple[list[str], list[dict[str, Any]]]:
    """moto's ChangeMessageVisibilityBatch, each entry refused on its own in the answer, as AWS does (moto failed the
    whole call when one entry's visibility went past the limit)."""
    succeeded: list[str] = []
    failed: list[dict[str, Any]] = []
    for entry in entries:
        try:
            timeout = int(entry["VisibilityTimeout"])
            if timeout > MAX_VISIBILITY_MS // 1000:
                raise sqs_models.InvalidParameterValue("Visibility timeout invalid")
            _change_visibility(backend, queue_name, entry["ReceiptHandle"], timeout)
            succeeded.append(entry["Id"])
        except (sqs_models.InvalidParameterValue, sqs_models.ReceiptHandleIsInvalid, KeyError, ValueError) as exc:
            code = (
                "ReceiptHandleIsInvalid"
                if isinstance(exc, sqs_models.ReceiptHandleIsInvalid)
                else "InvalidParameterValue"
            )
            failed.append(
                {"Id": entry.get("Id"), "SenderFault": True, "Code": code, "Message": getattr(exc, "message", str(exc))}
            )
    return succeeded, failed


if not getattr(sqs_models.Message.mark_received, "counts_from_receive", False):
    sqs_models.Message.mark_received = _received(sqs_models.Message.mark_received)  # type: ignore[method-assign]
    sqs_models.SQSBackend.change_message_visibility = _change_visibility  # type: ignore[method-assign,assignment]
    sqs_models.SQSBackend.change_message_visibility_batch = _change_visibility_batch  # type: ignore[method-assign]


def now_ms() -> float:
    """moto's SQS clock, in epoch milliseconds: the one its messages' times are relative to (frozen in the explorer)."""
    return float(unix_time_millis())


def age_messages(seconds: float, region: str) -> None:
    """Make every message in every queue `seconds` older, and delete those it takes past their queue's retention
    period, as SQS does (moto keeps them: an expired message stays counted as visible, ends any receive that meets it
    empty-handed, and each such receive then long-polls in vain)."""
    delta_ms = seconds * 1000
    now = now_ms()
    for queue in _queues(region):
        with queue._messages_lock:
            _age(queue, delta_ms)
            kept_from = now - int(queue.message_retention_period) * 1000
            kept = [m for m in queue._messages if m.sent_timestamp is None or m.sent_timestamp > kept_from]
            if len(kept) < len(queue._messages):
                queue._messages = kept
                queue.pending_messages.intersection_update(kept)


def _age(queue: Any, delta_ms: float) -> None:
    for message in queue._messages:
        message.visible_at -= delta_ms
        message.delayed_until -= delta_ms
        if message.sent_timestamp is not None:
            message.sent_timestamp = int(message.sent_timestamp - delta_ms)
        if getattr(message, "received_at", None) is not None:
            message.received_at -= delta_ms
        if message.approximate_first_receive_timestamp:
            message.approximate_first_receive_timestamp = int(message.approximate_first_receive_timestamp - delta_ms)


def has_visible(region: str, queue_name: str) -> bool | None:
    """Whether a receive on this queue could return a message now: moto's own test, the one its receive applies
    first (visible, not delayed). False: a receive would return nothing and change nothing, so a poller may skip
    the round trip; None: moto holds no such queue here (the caller asks the API, which answers as AWS would)."""
    queue = sqs_backends[ACCOUNT_ID][region].queues.get(queue_name)
    if queue is None:
        return None
    with queue._messages_lock:
        return bool(queue.messages)


def seconds_until_next_visible(
    region: str, queue_names: Iterable[str], hidden_at_ms: float | None = None
) -> float | None:
    """Seconds until the earliest message of these queues that was hidden (in flight or delayed) at `hidden_at_ms`
    (now, by default) reappears: 0 for one that has reappeared since. On the real clock a message can reappear
    between a poll that found the queue empty and this question; asked about the poll's time, it is not missed."""
    now = now_ms()
    since = now if hidden_at_ms is None else hidden_at_ms
    waits = [
        max(message.visible_at, message.delayed_until) - now
        for queue in _queues(region, queue_names)
        for message in list(queue._messages)
        if max(message.visible_at, message.delayed_until) > since
    ]
    return max(min(waits), 0) / 1000 if waits else None


@contextlib.contextmanager
def frozen() -> Iterator[None]:
    """moto's SQS clock stands still while the block runs: time passes for messages only through
    `age_messages` (the emulated clock's advances), never with the real seconds a slow step takes, so the
    same calls make the same messages visible on every run (a property test's shrinker replays runs).

    Each reading moves it on by a microsecond (so a long poll still ends), and a long poll does not wait."""
    base = sqs_models.unix_time()
    ticks = itertools.count()

    def seconds() -> float:
        return float(base + next(ticks) * 1e-6)

    def millis() -> float:
        return seconds() * 1000

    global unix_time_millis
    saved = (sqs_models.unix_time, sqs_models.unix_time_millis, sqs_models.Queue.wait_for_messages, unix_time_millis)
    sqs_models.unix_time, sqs_models.unix_time_millis, unix_time_millis = seconds, millis, millis
    sqs_models.Queue.wait_for_messages = lambda self, timeout: None  # type: ignore[method-assign,assignment]
    try:
        yield
    finally:
        sqs_models.unix_time, sqs_models.unix_time_millis, sqs_models.Queue.wait_for_messages, unix_time_millis = saved
