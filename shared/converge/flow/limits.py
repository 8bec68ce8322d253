"""Rate limits: a job over its limiters' pace is not started and not failed; it waits SCHEDULED for its slot.

`RateLimits` joins the pipeline as an extension (`converge.flow.extensions`). Before a job of a limited type takes
its lease (`hold`), it reserves its units on each limiter its binding names (`converge.store.limits`: one write,
no read); the latest start among them applies. A start now lets the job run; a later one holds it: the pipeline
records it SCHEDULED with its reason and its start (listed, no attempt counted) and sends its message again for
then, carrying the slot (`Envelope.held_until`), so that coming back on time it starts without reserving again.
A message come back later than its limiter's grace (its queue behind, its kill switch off meanwhile) reserves anew.
Held by one limiter, a job gives back the units it just took on the others, so that it is charged once on each
limiter for a run.

Inside a runner, `ctx.limit(name, key)` takes a slot before a call to a limited partner (a held run waits as
`ctx.wait` does, and its resumption passes on the slot it waited for); `RateLimited` raised by a runner (an
upstream's 429 and its retry-after) pushes the limiter's key back by that long and waits, no attempt counted.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from converge.flow.extensions import Extension, Hold
from converge.model.clock import Clock, SystemClock, iso
from converge.model.errors import ConfigurationError, RateLimited
from converge.model.limits import Limiter, key_named, shown_key
from converge.observability import count, logger
from converge.store.limits import LimiterTable, Reservation

if TYPE_CHECKING:
    from converge.flow.registry import JobBinding, Registry
    from converge.model.envelope import Envelope


@dataclass(frozen=True)
class PushedBack:
    """A runner's 429 taken: the job waits until `until`, holding the first slot after the pause on `slot_of` (None
    when the key was busy past it already: it takes one on return). Its receipt names the wait it makes."""

    until: float
    slot_of: str | None = None


@dataclass(frozen=True)
class UnitsTaken:
    """Units a job took on one limiter's key item, to give them back (`LimiterTable.give_back`)."""

    limiter: Limiter
    item: str
    reservation: Reservation


@dataclass(frozen=True)
class WaitingKey:
    """One limiter's key that jobs wait on: how many units are queued and when the next may start."""

    limiter: Limiter
    key: str
    queued: int
    next_start: float


class RateLimits(Extension):
    """The catalogue's limiters, applied to a job before its lease and to a runner's calls (`ctx.limit`)."""

    def __init__(self, registry: Registry, table: LimiterTable, clock: Clock | None = None) -> None:
        self._registry = registry
        self._table = table
        self._clock = clock or SystemClock()

    # -- before the lease ----------------------------------------------------------------------------------------

    def hold(
        self, envelope: Envelope, binding: JobBinding, lease_until: float, accepted_at: float | None = None
    ) -> Hold | None:
        if not binding.uses:
            return None
        now = self._clock.now()
        limiters = [(self.limiter(use.name), use.units) for use in binding.uses]
        held, held_by = envelope.held_until, envelope.held_by
        if held is not None and now < held:
            return None  # an early copy: the lease refuses it, its slot's time being recorded as its run_at
        if held is not None and not any(
            limiter.name == held_by and now <= held + limiter.grace for limiter, _ in limiters
        ):
            held_by = None  # come back too late for its slot (or holding none): it takes a new one
        latest, by, why = now, None, ""
        taken: list[UnitsTaken] = []
        for limiter, units in limiters:
            if limiter.name == held_by:
                continue  # it holds this one's slot, which is now
            key = limiter.key_of(envelope.payload)
            item = limiter.item_of(key, envelope.operation_id)
            start, units_taken = self._take(limiter, item, units, now)
            taken.append(units_taken)
            if start > latest:
                latest, by, why = start, limiter.name, f"{limiter.name} ({shown_key(key)}: {limiter.describe()})"
        if by is None:
            return None
        # Held by one: the units just taken on the others are given back (it takes them when it starts), so that it
        # is charged once on each of its limiters for a run, not again when it comes back. (The slot a message came
        # back on is never given back: a copy of that message may be running on it.)
        for other in taken:
            if other.limiter.name != by:
                self._table.give_back(other.limiter.name, other.item, other.reservation)
        count("rate_limited", binding.job_type)
        return Hold(latest, f"rate limited by {why}; starts at {iso(latest)}", slot_of=by)

    # -- a runner's call to a limited partner, and its 429 -------------------------------------------------------

    def reserve(self, limiter: Limiter, key: str, units: int, now: float | None = None) -> float:
        """Take `units` of the key's pace; when they may start (now, or later)."""
        return self._take(limiter, key, units, self._clock.now() if now is None else now)[0]

    def _take(self, limiter: Limiter, item: str, units: int, now: float) -> tuple[float, UnitsTaken]:
        """`units` of the key item's pace taken: when they may start, and what to give back if the job is held."""
        reservation = self._table.reserve(limiter.name, item, now, limiter.cost(units))
        return limiter.start(reservation.free_before, now), UnitsTaken(limiter, item, reservation)

    def slot(self, name: str, key: str | None, units: int) -> float:
        """`ctx.limit`'s reservation: when a call of `units` on the limiter's key may be made."""
        limiter = self.limiter(name)
        key = key_named(key)
        return self.reserve(limiter, limiter.item_of(key, str(random.random())), units)  # any shard of the key

    def push_back(self, envelope: Envelope, binding: JobBinding, limited: RateLimited) -> PushedBack:
        """An upstream asked to wait: the limiter's key (from the job's payload) pauses until then, and this job
        holds the first slot after the pause (none when the key was already busy past it: it takes one on return)."""
        limiter = self.limiter(limited.limiter)
        until = self._clock.now() + max(0.0, float(limited.retry_after))
        key = limiter.key_of(envelope.payload)
        units = next((use.units for use in binding.uses if use.name == limiter.name), 1)
        # Its burst is spent too: the next job after this one's slot starts a whole interval later, never sooner.
        # Every item of a sharded key pauses; this job's slot is on its own.
        mine = limiter.item_of(key, envelope.operation_id)
        first = False
        for item in limiter.items_of(key):
            cost = limiter.cost(units) if item == mine else 0.0
            taken = self._table.push_back(limiter.name, item, until + limiter.tolerance, cost)
            first = taken if item == mine else first
        count("rate_limit_pushed_back", envelope.job_type)
        logger.info("limiter key pushed back by its upstream", limiter=limiter.name, key=key, until=iso(until))
        return PushedBack(until, slot_of=limiter.name if first else None)

    # -- what an operator sees and does ----------------------------------------------------------------------------

    def pause(self, name: str, key: str | None, seconds: float, operator: str = "unnamed") -> float:
        """An operator pauses a key (its upstream is down, its partner asked by mail): no job of it starts for that
        long (its burst spent too); jobs held already keep their slots. When it may start again."""
        limiter = self.limiter(name)
        until = self._clock.now() + max(0.0, float(seconds))
        key = key_named(key)
        for item in limiter.items_of(key):
            self._table.push_back(limiter.name, item, until + limiter.tolerance, 0.0)
        logger.warning(
            "limiter key paused by an operator", limiter=limiter.name, key=key, until=iso(until), operator=operator
        )
        return until

    def release(self, name: str, key: str | None, operator: str = "unnamed") -> bool:
        """An operator releases a key: its pace is forgotten and the next job starts at once (jobs held already come
        back on their slots). False when the key had no pace to forget."""
        limiter = self.limiter(name)
        key = key_named(key)
        released = any([self._table.release(limiter.name, item) for item in limiter.items_of(key)])
        logger.warning(
            "limiter key released by an operator", limiter=limiter.name, key=key, released=released, operator=operator
        )
        return released

    def waiting(self) -> list[WaitingKey]:
        """Every limiter's keys that jobs wait on now, with their queue and next start: one Query per limiter."""
        now = self._clock.now()
        found: list[WaitingKey] = []
        for limiter in self._registry.limiters.values():
            by_key: dict[str, WaitingKey] = {}
            for state in self._table.keys(limiter.name):
                if state.waiting(limiter, now):
                    # A sharded key's items add up: their queues, and the earliest next start
                    queued, next_start = state.queued(limiter, now), limiter.start(state.free, now)
                    key = limiter.key_of_item(state.key)
                    seen = by_key.get(key)
                    by_key[key] = WaitingKey(
                        limiter,
                        key,
                        queued + (seen.queued if seen else 0),
                        min(next_start, seen.next_start) if seen else next_start,
                    )
            found += by_key.values()
        return sorted(found, key=lambda waiting: (waiting.limiter.name, -waiting.queued, waiting.key))

    def limiter(self, name: str) -> Limiter:
        found = self._registry.limiters.get(name)
        if found is None:
            raise ConfigurationError(f"no limiter named {name!r} is declared in the catalogue's LIMITERS")
        return found

    @property
    def limiters(self) -> Mapping[str, Limiter]:
        return self._registry.limiters
