"""Age moto's in-memory SQS messages, so visibility timeouts pass without sleeping.

moto keeps, per message, `visible_at` and `delayed_until` (epoch milliseconds, compared with the real
clock on every receive) plus `sent_timestamp` and `approximate_first_receive_timestamp`. Shifting all
four back by N seconds is indistinguishable, for any client, from N seconds having passed: the
message becomes visible, and the 12-hour visibility limit and retention period age consistently.
moto's server mode runs in this process too, so this works for both modes of the local cloud.
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


def age_messages(seconds: float, region: str) -> None:
    """Make every message in every queue `seconds` older."""
    delta_ms = seconds * 1000
    for queue in _queues(region):
        with queue._messages_lock:
            for message in queue._messages:
                message.visible_at -= delta_ms
                message.delayed_until -= delta_ms
                if message.sent_timestamp is not None:
                    message.sent_timestamp = int(message.sent_timestamp - delta_ms)
                if message.approximate_first_receive_timestamp:
                    message.approximate_first_receive_timestamp = int(
                        message.approximate_first_receive_timestamp - delta_ms
                    )


def has_visible(region: str, queue_name: str) -> bool | None:
    """Whether a receive on this queue could return a message now: moto's own test, the one its receive applies
    first (visible, not delayed). False: a receive would return nothing and change nothing, so a poller may skip
    the round trip; None: moto holds no such queue here (the caller asks the API, which answers as AWS would)."""
    queue = sqs_backends[ACCOUNT_ID][region].queues.get(queue_name)
    if queue is None:
        return None
    with queue._messages_lock:
        return bool(queue.messages)


def seconds_until_next_visible(region: str, queue_names: Iterable[str]) -> float | None:
    """Seconds until the earliest hidden (in flight or delayed) message of these queues reappears."""
    now_ms = unix_time_millis()  # moto's own notion of now, which its timestamps are relative to
    waits = [
        max(message.visible_at, message.delayed_until) - now_ms
        for queue in _queues(region, queue_names)
        for message in list(queue._messages)
        if max(message.visible_at, message.delayed_until) > now_ms
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
