"""The local cloud's emulated clock: real time plus an offset that only ever grows.

Nothing in the local cloud sleeps for a visibility timeout or a backoff. `advance(seconds)` moves the
emulated clock and shifts moto's in-memory SQS timestamps back by the same amount (sqs_time.py), so a
message hidden for 180 s becomes visible after `advance(180)`, exactly as if the time had passed.
Stream record ages, schedules and each invocation's remaining time are measured on this clock.

`ticking()` stops the real-time part for a while: time then passes only through `advance`, and by a millisecond a
reading, so the same calls see the same times on every run however long each takes (the explorer's histories,
which its shrinker replays, run so).
"""

from __future__ import annotations

import bisect
import contextlib
import itertools
import math
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime

TICK = 0.001
"""While `ticking`: how far each reading moves the clock (no two readings are equal, and time order is call order).
A millisecond, as AWS stamps stream records (moto's, read back through its API, are cut to the millisecond): each
reading stands half a millisecond into a millisecond of its own, so a stamp cut to it still falls after the readings
before it, an advance among them."""


class EmulatedClock:
    def __init__(self) -> None:
        self._offset = 0.0
        self._lock = threading.Lock()
        self._listeners: list[Callable[[float], None]] = []
        self._advanced_at: list[float] = []  # real time of each advance
        self._offsets: list[float] = []  # the offset from then on
        self._ticks: Iterator[int] | None = None  # while ticking: the readings so far
        self._stood_at = 0.0  # while ticking: the real time it began at

    def real(self) -> float:
        """The real time the emulated clock runs on: the system's, or while `ticking`, the moment it began plus a
        tick a reading."""
        ticks = self._ticks
        return time.time() if ticks is None else self._stood_at + next(ticks) * TICK

    def now(self) -> float:
        """Emulated epoch seconds."""
        return self.real() + self._offset

    @contextlib.contextmanager
    def ticking(self) -> Iterator[None]:
        """While the block runs, real time stands still for this clock: it moves by `advance`, and by a `TICK` a
        reading. Afterwards it runs on real time again (from further on: never backwards)."""
        self._stood_at, self._ticks = math.floor(time.time() * 1000) / 1000 + TICK / 2, itertools.count(1)
        try:
            yield
        finally:
            self._ticks = None

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
            self._advanced_at.append(self.real())
            self._offsets.append(self._offset)
            for listener in self._listeners:
                listener(seconds)


def iso8601(epoch_seconds: float) -> str:
    """AWS event timestamp format, e.g. 2024-01-01T00:00:00Z."""
    return datetime.fromtimestamp(epoch_seconds, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def iso8601_millis(epoch_seconds: float) -> str:
    """AWS invocation-record timestamp format, e.g. 2024-01-01T00:00:00.123Z."""
    return datetime.fromtimestamp(epoch_seconds, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
