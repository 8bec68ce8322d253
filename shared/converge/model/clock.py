"""Time and identity sources, injected so leases, backoff and ids are testable without sleeping."""

from __future__ import annotations

import math
import time
import uuid
from datetime import UTC, datetime
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float:
        """Seconds since the epoch."""
        ...


class SystemClock:
    def now(self) -> float:
        return time.time()


class FakeClock:
    """A clock that moves only when told to."""

    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self._now = start

    def now(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        self._now += seconds


class IdSource(Protocol):
    def new_id(self) -> str: ...


class RandomIds:
    def new_id(self) -> str:
        return uuid.uuid4().hex


class SequentialIds:
    """Predictable ids for tests: prefix-1, prefix-2, ..."""

    def __init__(self, prefix: str = "id") -> None:
        self._prefix = prefix
        self._count = 0

    def new_id(self) -> str:
        self._count += 1
        return f"{self._prefix}-{self._count}"


def iso(at: float) -> str:
    """Compact UTC ISO-8601 with milliseconds: sortable, and small in every stored item. The year is always
    four digits (strftime's %Y does not pad years before 1000 on every platform)."""
    millis = math.floor(at * 1000)  # the seconds from the same whole milliseconds: a time a hair before a second
    moment = datetime.fromtimestamp(millis // 1000, tz=UTC)  # is that second's last millisecond, not the next's
    return f"{moment.year:04d}" + moment.strftime("-%m-%dT%H:%M:%S.") + f"{millis % 1000:03d}Z"
