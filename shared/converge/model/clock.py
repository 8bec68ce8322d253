"""Time and identity sources, injected so leases, backoff and ids are testable without sleeping."""

from __future__ import annotations

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
    # To the microsecond first, as datetime reads a timestamp, then cut to the millisecond, the second from the
    # same cut. A time read back from its text is the nearest float, which past 2038 (2**31 seconds) may fall a
    # fraction of a microsecond below it: cut at once, "…45.740Z" read back would be written "…45.739Z", other
    # content under the same request.
    millis = round(at * 1_000_000) // 1000
    moment = datetime.fromtimestamp(millis // 1000, tz=UTC)
    return f"{moment.year:04d}" + moment.strftime("-%m-%dT%H:%M:%S.") + f"{millis % 1000:03d}Z"
