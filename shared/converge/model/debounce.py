"""Debounce: requests for one key within `period` of each other become one run, with the newest request's payload.

A binding's `Debounce` names the payload field a burst is keyed by (a profile, an account) and the field that says
which request is the newest (`newest_by`: a version, an edit's time, a sequence the producer sets): the relay and a
redelivery may meet the requests in any order, so only the producer can say which came last. A burst's run starts
once `period` passes without a request, and never later than `max_wait` after the burst's first request; every other
request of the burst ends NOOP, "debounced into <the run's operation id>" (docs/flow-control.md).

`Burst` is a key's state as stored, and `Burst.decide` what one request does with it: a pure function, so that every
order of arrivals, copies and crashes is one table of cases (`converge.flow.debounce` makes the writes).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from converge.model.errors import RegistryError
from converge.model.limits import key_from

MAX_PERIOD_SECONDS = 3600.0
"""A burst's quiet period is at most an hour."""
MAX_WAIT_SECONDS = 12 * 3600.0
"""A burst's run starts at most this long after its first request (a key's item lives a day)."""
OLDEST = -1.0e100
"""The order of a request whose `newest_by` field is missing or unreadable: older than any request that has one."""


@dataclass(frozen=True)
class Debounce:
    """Requests of one key (the payload field `key`; one key for all without it) within `period` seconds of each
    other become one run with the newest request's payload (the largest `newest_by`: a number, or an ISO-8601
    time), started `period` after the burst's last request and never later than `max_wait` after its first."""

    newest_by: str
    period: float
    max_wait: float
    key: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.newest_by, str) or not self.newest_by.isidentifier():
            raise RegistryError(f"debounce: newest_by must name a payload field, not {self.newest_by!r}")
        if self.key is not None and (not isinstance(self.key, str) or not self.key.isidentifier()):
            raise RegistryError(f"debounce: key must name a payload field, not {self.key!r}")
        if not _seconds(self.period) or not 1 <= self.period <= MAX_PERIOD_SECONDS:
            raise RegistryError(f"debounce: period must be from 1 to {MAX_PERIOD_SECONDS:g} seconds")
        if not _seconds(self.max_wait) or not self.period <= self.max_wait <= MAX_WAIT_SECONDS:
            raise RegistryError(f"debounce: max_wait must be from its period to {MAX_WAIT_SECONDS:g} seconds")

    def key_of(self, payload: Any) -> str:
        """The key a payload's burst is kept under: its key field's value (cut to 200 characters), or the shared key."""
        return key_from(payload, self.key)

    def order_of(self, payload: Any) -> float:
        """How new a request is, from its `newest_by` field: a number as it is, an ISO-8601 time in epoch
        milliseconds; anything else (missing, a flag, text) is `OLDEST`, so it never replaces a request that has one."""
        value = payload.get(self.newest_by) if isinstance(payload, dict) else None
        if isinstance(value, bool) or value is None:
            return OLDEST
        if isinstance(value, int | float):
            return float(value) if math.isfinite(value) and abs(value) < -OLDEST else OLDEST
        if isinstance(value, str) and len(value) <= 40:
            try:
                # As written: Python reads a trailing Z itself, and a Z anywhere else makes the text no time
                moment = datetime.fromisoformat(value)
            except ValueError:
                return OLDEST
            if moment.tzinfo is None:
                return OLDEST  # a time without its zone says no moment: it cannot be ordered against others
            return moment.timestamp() * 1000
        return OLDEST

    def describe(self) -> str:
        keyed = f" per {self.key}" if self.key else ""
        return f"{self.period:g} s quiet, at most {self.max_wait:g} s{keyed}, newest by {self.newest_by}"


def newer(order: float, operation_id: str, than_order: float, than_operation: str) -> bool:
    """Whether a request is newer than another: the larger order, and between equal orders the larger operation id
    (an arbitrary but fixed choice, the same for every worker)."""
    return (order, operation_id) > (than_order, than_operation)


class Action(StrEnum):
    """What one request does next, decided from its key's state."""

    START = "start"
    """It is its burst's run: it starts (as any job: its limits, its lease)."""
    HOLD = "hold"
    """It waits SCHEDULED until its burst's start, with no write to the key."""
    OPEN = "open"
    """Open a new burst with it as the newest (one conditional write), then hold."""
    JOIN = "join"
    """Make it its open burst's newest, its quiet period from now (one conditional write), then hold."""
    EXTEND = "extend"
    """An older request of the open burst: its quiet period from now (one write), then hold."""
    CLOSE = "close"
    """The open burst is due: record its newest as its run (one conditional write), then decide again."""
    SKIP = "skip"
    """A newer request ran or runs: it ends NOOP, debounced into that run."""


@dataclass(frozen=True)
class Burst:
    """A key's state as stored (whole milliseconds): the open burst, if any, and the last burst's run."""

    opened: str | None = None
    """The operation id that opened the burst now open (None: none open)."""
    first: int = 0
    quiet: int = 0
    """When the burst is quiet: its latest request's arrival plus the period."""
    deadline: int = 0
    """Its first request's arrival plus `max_wait`."""
    newest: str = ""
    order: float = OLDEST
    ran: str | None = None
    """The run of the last closed burst: every request of that burst, or older, is debounced into it."""
    ran_order: float = OLDEST

    @property
    def open(self) -> bool:
        return self.opened is not None

    @property
    def due(self) -> int:
        """When the open burst's run starts: quiet, or its deadline if that comes first."""
        return min(self.quiet, self.deadline)

    def decide(self, operation_id: str, order: float, now_ms: int, returning: bool = False) -> Action:
        """What a request does with the key as it stands: an arrival (or a copy of one), or, `returning`, its own
        message sent back for its burst's start (which is no new request: it moves no quiet period)."""
        if self.ran == operation_id:
            return Action.START
        if self.ran is not None and not newer(order, operation_id, self.ran_order, self.ran):
            return Action.SKIP  # a newer request ran (or was chosen to): this one's payload is behind it
        if not self.open:
            return Action.OPEN
        if self.due <= now_ms:
            return Action.CLOSE
        if self.newest == operation_id:
            return Action.HOLD
        if newer(order, operation_id, self.order, self.newest):
            return Action.JOIN
        return Action.HOLD if returning else Action.EXTEND


def _seconds(value: object) -> bool:
    return not isinstance(value, bool) and isinstance(value, int | float) and math.isfinite(value)
