"""A request's times: `run_at` (not before) and `expires_at` (not started by then, it ends EXPIRED).

Both are ISO-8601 instants in UTC (`2027-01-31T09:00:00Z`, or with `+00:00`), at most a year ahead and
not before the Unix epoch (`EARLIEST`). They are stored in one form, `converge.model.clock.iso` (zero-padded).
They are checked where a request enters: `enqueue` refuses a bad one with the reason; the relay
REJECTS an item written raw with one. Checks are on short, bounded strings (the length cap first).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime

from converge.model.clock import iso
from converge.model.errors import InvalidTiming

MAX_AHEAD_SECONDS = 365 * 24 * 3600
"""How far ahead a request may be timed: a year (EventBridge Scheduler keeps one-time schedules that long)."""
MAX_INSTANT_CHARS = 40
EARLIEST = 0.0
"""The earliest time a request may carry: the Unix epoch. Every stored and computed form of a time (epoch
seconds in the state record, SQS's delay, Scheduler's `at()`) counts from it, and nothing before it is a
time a producer meant (a zero date, a two-digit year): refused with the reason, never stored."""
SQS_MAX_DELAY_SECONDS = 900
"""SQS's own message delay limit: a shorter wait rides DelaySeconds, a longer one a one-time schedule."""


def parse_instant(name: str, text: object) -> float:
    """Epoch seconds of an ISO-8601 UTC instant, or InvalidTiming naming the field."""
    if not isinstance(text, str):
        raise InvalidTiming(f"{name} must be an ISO-8601 UTC time as a string, e.g. 2027-01-31T09:00:00Z")
    if len(text) > MAX_INSTANT_CHARS:
        raise InvalidTiming(f"{name} is longer than {MAX_INSTANT_CHARS} characters")
    if not (text.endswith("Z") or text.endswith("+00:00")):
        raise InvalidTiming(f"{name} must be in UTC (end in Z or +00:00): {text!r}")
    try:
        moment = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith("Z") else text)
    except ValueError:
        raise InvalidTiming(f"{name} is not an ISO-8601 time: {text!r}") from None
    seconds = moment.astimezone(UTC).timestamp()
    if seconds < EARLIEST:
        raise InvalidTiming(f"{name} {text!r} is before 1970-01-01T00:00:00Z (the Unix epoch), the earliest time taken")
    return seconds


@dataclass(frozen=True)
class Timing:
    """When a request may run and until when it is worth starting (epoch seconds; None: no constraint)."""

    run_at: float | None = None
    expires_at: float | None = None

    @classmethod
    def parse(cls, run_at: object | None, expires_at: object | None) -> Timing:
        return cls(
            parse_instant("run_at", run_at) if run_at is not None else None,
            parse_instant("expires_at", expires_at) if expires_at is not None else None,
        )

    def check(self, now: float, *, admitting: bool) -> None:
        """Refuse a time more than a year ahead, an expiry not after run_at, and (when admitting a new
        request) an expiry already past. A run_at already past just means "now"."""
        limit = now + MAX_AHEAD_SECONDS
        for name, value in (("run_at", self.run_at), ("expires_at", self.expires_at)):
            if value is not None and value > limit:
                raise InvalidTiming(f"{name} {iso(value)} is more than a year ahead (at most {iso(limit)})")
        if self.run_at is not None and self.expires_at is not None and self.expires_at <= self.run_at:
            raise InvalidTiming(f"expires_at {iso(self.expires_at)} is not after run_at {iso(self.run_at)}")
        if admitting and self.expires_at is not None and self.expires_at <= now:
            raise InvalidTiming(f"expires_at {iso(self.expires_at)} has already passed")

    def delay(self, now: float) -> int:
        """Whole seconds to wait before the request may run (rounded up: never early)."""
        return max(0, math.ceil(self.run_at - now)) if self.run_at is not None else 0

    def due(self, now: float) -> bool:
        return self.run_at is None or self.run_at <= now

    def expired(self, now: float) -> bool:
        return self.expires_at is not None and self.expires_at <= now


def instant(value: float | None) -> str | None:
    """The stored form of a time: compact ISO-8601 UTC."""
    return iso(value) if value is not None else None
