"""Per-key concurrency: at most so many operations of the job types naming a cap run at once per key.

A cap (`Concurrency`) counts the deliveries running now, per value of a payload field (a partner, an account);
`limit=1` is a singleton. What a job over it does is the cap's `mode`: in "queue" it is not started and not
failed, it waits SCHEDULED and tries again when the earliest running one's slot lapses, or after `recheck` seconds,
whichever comes first; in "skip" it ends NOOP, naming the operations that hold the key; in "replace" the newest
request waits (one per key) and each older one ends NOOP "replaced by" the newer (docs/flow-control.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from converge.model.errors import RegistryError
from converge.model.limits import LIMITER_NAME, key_from

MAX_RUNNING = 100
"""A cap allows at most this many at once per key: its holders share one item, whose size each write pays for."""
MAX_RECHECK_SECONDS = 900.0
"""A held job tries again within this long at the latest (SQS's longest message delay)."""
MODES = ("queue", "skip", "replace")
"""What a request does while its key's slots are all held: wait its turn, end NOOP, or wait as the key's newest."""


@dataclass(frozen=True)
class Concurrency:
    """At most `limit` operations running at once per value of the payload field `key` (one count for all
    without one); a held job tries again after `recheck` seconds at the latest. Job types that name the same cap
    share its count. `mode` says what a request does while the key is full: "queue" (wait), "skip" (end NOOP) or
    "replace" (only the newest waits)."""

    name: str
    limit: int = 1
    key: str | None = None
    recheck: float = 10.0
    description: str = ""
    mode: str = "queue"

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not LIMITER_NAME.match(self.name):
            raise RegistryError(
                f"concurrency name {self.name!r} must be lowercase letters, digits and '-' (at most 32)"
            )
        if isinstance(self.limit, bool) or not isinstance(self.limit, int) or not 1 <= self.limit <= MAX_RUNNING:
            raise RegistryError(f"concurrency {self.name}: limit must be a whole number from 1 to {MAX_RUNNING}")
        if self.key is not None and (not isinstance(self.key, str) or not self.key.isidentifier()):
            raise RegistryError(f"concurrency {self.name}: key must name a payload field, not {self.key!r}")
        if (
            isinstance(self.recheck, bool)
            or not isinstance(self.recheck, int | float)
            or not 1 <= self.recheck <= MAX_RECHECK_SECONDS
        ):
            raise RegistryError(f"concurrency {self.name}: recheck must be from 1 to {MAX_RECHECK_SECONDS:g} seconds")
        if self.mode not in MODES:
            raise RegistryError(f"concurrency {self.name}: mode must be one of {', '.join(MODES)}, not {self.mode!r}")

    def key_of(self, payload: Any) -> str:
        """The key a payload is counted under: its key field's value, or the shared key."""
        return key_from(payload, self.key)

    def describe(self) -> str:
        keyed = f" per {self.key}" if self.key else ""
        mode = "" if self.mode == "queue" else f", {self.mode} when full"
        return f"{self.limit} at once{keyed}{mode}"


@dataclass(frozen=True)
class Running:
    """One key of a cap as stored: the operations holding its slots, each with when its slot lapses."""

    cap: str
    key: str
    holders: dict[str, float]
    newest: str | None = None
    """In replace mode, the newest request the key has seen (running, or the one waiting)."""
    paused_by: str | None = None
    """The operator who paused the key (none of its jobs starts until released), or None."""
    waiting: dict[str, float] = field(default_factory=dict)
    """The operations noted waiting on the key, each with when it tries again (stale ones too: see `waiters`)."""

    def waiters(self, now: float, grace: float) -> dict[str, float]:
        """The operations waiting now: noted, not running, their next try not more than `grace` seconds past."""
        return {op: at for op, at in self.waiting.items() if at >= now - grace and op not in self.live(now)}

    def live(self, now: float) -> dict[str, float]:
        return {operation: until for operation, until in self.holders.items() if until > now}
