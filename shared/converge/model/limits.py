"""Rate limits: a named limiter (so many starts per period, a burst, an optional key), and the arithmetic of its slots.

A limiter paces the starts of the jobs that name it: one unit every `interval` (`period / limit`), and up to
`burst` more at once after a quiet spell. Its state is one number per key, the time its next unit is free (`free`,
the theoretical arrival time of the generic cell rate algorithm): a job of `units` units arriving at `now` takes
`units * interval` from `max(free, now)` and may start at `max(now, free - burst * interval)`. Starts kept to that
never put more than `limit + burst` in any window of one period (docs/flow-control.md).
"""

from __future__ import annotations

import math
import re
import zlib
from dataclasses import dataclass
from typing import Any

from converge.model.errors import RegistryError

LIMITER_NAME = re.compile(r"^[a-z][a-z0-9-]{0,31}$")
"""A limiter's name: lowercase letters, digits and '-', at most 32 characters (part of a table key and of a wait's
name in `ctx.limit`)."""
MAX_KEY_CHARS = 200
"""A key's value is cut to this many characters (a payload identifier is far shorter)."""
SHARED_KEY = "*"
"""The key of a limiter without a key field (one pace for every job naming it), or of a payload without the field."""
LATE_GRACE_SECONDS = 2.0
"""How late a held job's message may come back and still start on the slot it holds: SQS's message delay counts
whole seconds and a queue's poller takes a moment. Later than `max(interval, this)`, it takes a new slot."""
MAX_UNITS = 1_000
MAX_SHARDS = 100
SHARD_MARK = "~"
"""A sharded key's items are `<key>~<shard>`."""


def key_from(payload: Any, field: str | None) -> str:
    """The key a flow control counts a payload under (a limiter's, a cap's, a debounce's): the value of its `field`
    (cut to `MAX_KEY_CHARS` characters), or the shared key when it names none or the payload has no value there."""
    if field is None or not isinstance(payload, dict):
        return SHARED_KEY
    value = payload.get(field)
    if value is None or value == "":
        return SHARED_KEY
    return str(value)[:MAX_KEY_CHARS]


def key_named(key: Any) -> str:
    """The key an operator or a runner names (`converge limits`, `ctx.limit`), as a payload's would be kept: the shared
    key when none is named, else the value cut to `MAX_KEY_CHARS` characters."""
    return SHARED_KEY if key in (None, "") else str(key)[:MAX_KEY_CHARS]


def shown_key(key: str) -> str:
    """A key as a held job's reason names it: "shared" for the shared key, else "key <key>"."""
    return "shared" if key == SHARED_KEY else f"key {key}"


@dataclass(frozen=True)
class Limiter:
    """At most `limit` units a `period` (seconds), paced evenly; `burst` more may start at once after a quiet spell.

    `key` names a payload field (an identifier: a tenant, a partner): each of its values is paced apart. Job types
    name the limiters they use (`JobBinding.limits`), and share a limiter's pace when they name the same one.

    `shards` spreads each key's pace over that many items, each paced at `limit / shards` with `burst // shards`
    (a job's item chosen by its operation id): for a key hotter than one item takes (about 1,000 writes a second)."""

    name: str
    limit: int
    period: float
    burst: int = 0
    key: str | None = None
    description: str = ""
    shards: int = 1

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not LIMITER_NAME.match(self.name):
            raise RegistryError(f"limiter name {self.name!r} must be lowercase letters, digits and '-' (at most 32)")
        if isinstance(self.limit, bool) or not isinstance(self.limit, int) or self.limit < 1:
            raise RegistryError(f"limiter {self.name}: limit must be a whole number of at least 1, not {self.limit!r}")
        if isinstance(self.period, bool) or not isinstance(self.period, int | float) or not self.period >= 0.001:
            raise RegistryError(f"limiter {self.name}: period must be a number of seconds (at least 0.001)")
        if self.period > 366 * 24 * 3600:
            raise RegistryError(f"limiter {self.name}: period must be at most a year")
        if isinstance(self.burst, bool) or not isinstance(self.burst, int) or self.burst < 0:
            raise RegistryError(f"limiter {self.name}: burst must be a whole number of at least 0")
        if self.key is not None and (not isinstance(self.key, str) or not self.key.isidentifier()):
            raise RegistryError(f"limiter {self.name}: key must name a payload field, not {self.key!r}")
        if isinstance(self.shards, bool) or not isinstance(self.shards, int) or not 1 <= self.shards <= MAX_SHARDS:
            raise RegistryError(f"limiter {self.name}: shards must be a whole number from 1 to {MAX_SHARDS}")
        if self.shards > self.limit:
            raise RegistryError(f"limiter {self.name}: shards ({self.shards}) must not exceed the limit ({self.limit})")

    @property
    def interval(self) -> float:
        """Seconds between two units of one item at the steady pace: whole milliseconds (rounded up, so never faster
        than the limit), as the key's item counts them; each of `shards` items paces `limit / shards`."""
        return math.ceil(round(self.period * 1000 * self.shards / self.limit, 6)) / 1000

    @property
    def tolerance(self) -> float:
        """How far ahead of its free time a unit may start: the burst (an item's share of it), in seconds."""
        return (self.burst // self.shards) * self.interval

    @property
    def grace(self) -> float:
        """How late a held job may come back and still start on its slot."""
        return max(self.interval, LATE_GRACE_SECONDS)

    def key_of(self, payload: Any) -> str:
        """The key a payload is paced under: its key field's value, or the shared key."""
        return key_from(payload, self.key)

    def item_of(self, key: str, operation_id: str) -> str:
        """The item a job's units are taken from: the key's own, or (sharded) one of its shards, by operation id (a
        retry of the operation takes the same)."""
        if self.shards == 1:
            return key
        return f"{key}{SHARD_MARK}{zlib.crc32(operation_id.encode()) % self.shards}"

    def items_of(self, key: str) -> list[str]:
        """Every item of a key (its shards), to pause or release it whole."""
        if self.shards == 1:
            return [key]
        return [f"{key}{SHARD_MARK}{shard}" for shard in range(self.shards)]

    def key_of_item(self, item: str) -> str:
        """The key an item paces (a shard's item without its shard)."""
        if self.shards == 1:
            return item
        key, mark, shard = item.rpartition(SHARD_MARK)
        return key if mark and shard.isdigit() else item

    def cost(self, units: int = 1) -> float:
        """Seconds of the pace that `units` units take."""
        return units * self.interval

    def start(self, free_before: float, now: float) -> float:
        """When a job that reserved from `free_before` (the key's free time before its reservation) may start."""
        return max(now, free_before - self.tolerance)

    def describe(self) -> str:
        burst = f", burst {self.burst}" if self.burst else ""
        keyed = f" per {self.key}" if self.key else ""
        sharded = f", over {self.shards} items" if self.shards > 1 else ""
        return f"{self.limit} per {self.period:g} s{burst}{keyed}{sharded}"


@dataclass(frozen=True)
class Uses:
    """A job type's use of a limiter (its declaration, or its name when the catalogue's `LIMITERS` or another
    binding declares it) and how many units one job takes (a weighted call)."""

    limiter: Limiter | str
    units: int = 1

    def __post_init__(self) -> None:
        if not isinstance(self.limiter, Limiter) and not (
            isinstance(self.limiter, str) and LIMITER_NAME.match(self.limiter)
        ):
            raise RegistryError(f"a limit names a Limiter or its name, not {self.limiter!r}")
        if isinstance(self.units, bool) or not isinstance(self.units, int) or not 1 <= self.units <= MAX_UNITS:
            raise RegistryError(f"limiter {self.name}: units must be a whole number from 1 to {MAX_UNITS}")

    @property
    def name(self) -> str:
        return self.limiter.name if isinstance(self.limiter, Limiter) else self.limiter


@dataclass(frozen=True)
class KeyState:
    """One key of a limiter as stored: when its next unit is free (epoch seconds)."""

    limiter: str
    key: str
    free: float

    def waiting(self, limiter: Limiter, now: float) -> bool:
        """Whether a job arriving now would wait (its next start is later than now)."""
        return limiter.start(self.free, now) > now

    def queued(self, limiter: Limiter, now: float) -> int:
        """How many units reserved on the key start later than now (held jobs, and units of ones held elsewhere):
        its queue depth. The next unit free starts at `free - tolerance`; those before it, one interval apart."""
        ahead = (self.free - limiter.tolerance - now) / limiter.interval
        return max(0, math.ceil(round(ahead, 6)) - 1)
