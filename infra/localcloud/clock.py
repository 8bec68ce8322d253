"""The local cloud's emulated clock: real time plus an offset that only ever grows.

Nothing in the local cloud sleeps for a visibility timeout or a backoff. `advance(seconds)` moves the
emulated clock and shifts moto's in-memory SQS timestamps back by the same amount (sqs_time.py), so a
message hidden for 180 s becomes visible after `advance(180)`, exactly as if the time had passed.
Stream record ages, schedules and each invocation's remaining time are measured on this clock.
"""

from __future__ import annotations

import bisect
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime


class EmulatedClock:
    def __init__(self) -> None:
        self._offset = 0.0
        self._lock = threading.Lock()
        self._listeners: list[Callable[[float], None]] = []
        self._advanced_at: list[float] = []  # real time of each advance
        self._offsets: list[float] = []  # the offset from then on

    def now(self) -> float:
        """Emulated epoch seconds."""
        return time.time() + self._offset

    def now_datetime(self) -> datetime:
        return datetime.fromtimestamp(self.now(), tz=UTC)

    @property
    def offset(self) -> float:
        """Seconds the emulated clock is ahead of real time."""
        return self._offset

    def offset_at(self, real_time: float) -> float:
        """The offset in effect at a past real time: turns a timestamp moto took on the real clock
        (e.g. a stream record's creation) into emulated time."""
        index = bisect.bisect_right(self._advanced_at, real_time)
        return self._offsets[index - 1] if index else 0.0

    def on_advance(self, listener: Callable[[float], None]) -> None:
        """Call `listener(seconds)` on every advance (used to age moto's in-memory state)."""
        self._listeners.append(listener)

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("the emulated clock only moves forward")
        with self._lock:
            self._offset += seconds
            self._advanced_at.append(time.time())
            self._offsets.append(self._offset)
            for listener in self._listeners:
                listener(seconds)


def iso8601(epoch_seconds: float) -> str:
    """AWS event timestamp format, e.g. 2024-01-01T00:00:00Z."""
    return datetime.fromtimestamp(epoch_seconds, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def iso8601_millis(epoch_seconds: float) -> str:
    """AWS invocation-record timestamp format, e.g. 2024-01-01T00:00:00.123Z."""
    return datetime.fromtimestamp(epoch_seconds, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
