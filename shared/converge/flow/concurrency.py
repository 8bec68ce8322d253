"""Per-key concurrency: a job over its cap is not started and not failed; it waits SCHEDULED and tries again.

`ConcurrencyCaps` joins the pipeline as an extension (`converge.flow.extensions`). Before a job of a capped type
takes its lease (`hold`), it takes a slot of its key (`converge.store.concurrency`: one write, no read), held until
its lease would end; when the key's slots are all held, the job waits SCHEDULED (listed with the reason, no attempt
counted, its message sent again) until the earliest holder's slot lapses or the cap's `recheck`, whichever comes
first, and tries again then. The delivery gives its slot back when it ends, however it ends (`released`: settled,
waiting between steps, retried, or refused its lease); a holder that crashed keeps it until its lease would have
ended, and the next job to find the key full removes it then. A slot is the delivery's, not the operation's: a
delivery whose lease lapsed while it worked, and was taken over by another delivery of the operation (which took
the slot back), gives nothing back when it ends, so the one that runs on keeps its key's place.

A cap's mode says what a job finding the key full does: "queue" waits as above; "skip" ends NOOP, naming the
operations that hold the key; "replace" waits as the key's newest request, and a request older than the key's
newest (one it displaced while waiting, or one accepted before a newer that started) ends NOOP "replaced by" it.
An operator may pause a key and release it, or free a slot left behind. A paused key's jobs wait, none starts: each
tries again after as long as the key has been paused so far (five minutes at first, a day at most), so a pause of
days costs a few tries a job, not hundreds. The release wakes the jobs noted as waiting on the key at once (their
time brought forward, their messages sent now: `converge.flow.wakes`); the tries are only the net under a job the
release did not reach (its note on the key failed, or its hold was written just after the release read the key).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from converge.flow.extensions import Extension, Hold
from converge.flow.held_waiters import HeldWaiters, KeyReleased
from converge.model.clock import Clock, SystemClock, iso
from converge.model.concurrency import Concurrency
from converge.model.errors import ConfigurationError
from converge.model.limits import key_named, shown_key
from converge.model.timing import Timing
from converge.observability import count, logger
from converge.store.concurrency import ConcurrencyTable
from converge.store.concurrency_order import Newest

if TYPE_CHECKING:
    from converge.flow.registry import JobBinding, Registry
    from converge.model.envelope import Envelope


PAUSED_RECHECK_SECONDS = 300.0
"""A job held by a paused key tries again after at least this long (or its cap's recheck, when longer)..."""
PAUSED_RECHECK_MAX_SECONDS = 24 * 3600.0
"""...and at most this long: in between, after as long as the key has been paused so far."""
WAITER_GRACE_SECONDS = 60.0
"""A waiter noted on a key counts this long past its next try (its queue behind); later it ran, ended or moved on."""


@dataclass(frozen=True)
class RunningKey:
    """One cap's key with operations running under it now: which, and when the earliest slot lapses."""

    cap: Concurrency
    key: str
    running: tuple[str, ...]
    full: bool
    next_free: float
    newest: str | None = None
    """In replace mode, the request waiting as the key's newest (not running yet), or None."""
    waiting: int = 0
    """How many operations wait on the key (held, their next try not long past)."""
    next_start: float | None = None
    """When the first of them tries again, or None."""
    paused_by: str | None = None
    """The operator who paused the key, or None."""


class ConcurrencyCaps(Extension):
    """The catalogue's concurrency caps, applied to a job before its lease; its slot given back when it ends."""

    def __init__(
        self,
        registry: Registry,
        table: ConcurrencyTable,
        clock: Clock | None = None,
        *,
        waiters: Callable[[], HeldWaiters] | None = None,
        accepted: Callable[[str], float | None] | None = None,
        ended_unrun: Callable[[str], bool] | None = None,
    ) -> None:
        self._registry, self._table = registry, table
        self._clock = clock or SystemClock()
        self._waiters = waiters
        """Builds what a release wakes the held jobs with (None: a release wakes nothing; they come back as they
        try)."""
        self._accepted = accepted  # when an operation was accepted, as its record keeps it (None: not asked)
        self._ended_unrun = ended_unrun  # whether an operation ended before it ran (None: not asked)
        self._taken: dict[str, list[tuple[str, str, float] | None]] = {}
        """What each delivery of an operation running in this process took, innermost last (a copy delivered while
        it runs is inside it): its slot (cap, key, until as taken), or None; each given back when its delivery ends,
        only while it is still that delivery's."""

    def hold(
        self, envelope: Envelope, binding: JobBinding, lease_until: float, accepted_at: float | None = None
    ) -> Hold | None:
        cap = binding.concurrency
        if cap is None:
            return None
        now = self._clock.now()
        key = cap.key_of(envelope.payload)
        calls = self._taken.setdefault(envelope.operation_id, [])
        calls.append(None)  # this delivery's entry, before the write: `released` pops it however `hold` ends
        me = self._place(envelope.operation_id, accepted_at) if cap.mode == "replace" else None
        taken = self._table.take(cap.name, key, envelope.operation_id, lease_until, cap.limit, now, me)
        if taken.replaced_by is not None and self._replaces_nothing(cap.name, key, taken.replaced_by):
            taken = self._table.take(cap.name, key, envelope.operation_id, lease_until, cap.limit, now, me)
        if taken.taken:
            calls[-1] = (cap.name, key, lease_until)
            return None
        if taken.already:
            return None  # another delivery of this operation holds its slot: the lease refuses this one
        if taken.replaced_by is not None:
            count("concurrency_replaced", binding.job_type)
            return Hold(now, f"replaced by {taken.replaced_by} (concurrency {cap.name}, {shown_key(key)})", ends=True)
        running = f"{len(taken.holders)} of {cap.limit} running"
        if taken.paused_by is None and cap.mode == "skip":
            count("concurrency_skipped", binding.job_type)
            holders = ", ".join(sorted(taken.holders)) or "another operation"
            reason = f"skipped: concurrency {cap.name} ({shown_key(key)}: {running}) is held by {holders}"
            return Hold(now, reason, ends=True)
        earliest = min(taken.holders.values(), default=now)
        until = max(now + 1.0, min(earliest, now + cap.recheck))
        if taken.paused_by is not None:
            # Released by an operator, not by a holder's end, and the release wakes the jobs noted here: a paused key's
            # jobs try again less often the longer it is paused (a pause may last days), none past its expiry
            until = _paused_until(cap, taken.paused_at, now, Timing.parse(None, envelope.expires_at).expires_at)
            running = f"paused by {taken.paused_by}"
        count("concurrency_held", binding.job_type)
        stale = sorted(op for op, at in taken.waiting.items() if at < now - WAITER_GRACE_SECONDS)
        try:
            self._table.note_waiting(cap.name, key, envelope.operation_id, until, stale)
        except Exception:
            # Only the operator's count of waiters misses it: the job is held and listed all the same
            logger.exception("could not note a held job on its concurrency key", cap=cap.name)
        return Hold(until, f"concurrency {cap.name} ({shown_key(key)}: {running}); tries again at {iso(until)}")

    def _replaces_nothing(self, cap: str, key: str, newer: str) -> bool:
        """Whether the newer request that would replace this one ended before it ran (cancelled, expired or rejected:
        it never will); if so it is forgotten as the key's newest, and this one takes its turn."""
        if self._ended_unrun is None:
            return False
        try:
            ended = self._ended_unrun(newer)
        except Exception:
            logger.exception("could not read whether the key's newest request ended; it replaces this one")
            return False
        if ended:
            self._table.forget_newest(cap, key, newer)
        return ended

    def _place(self, operation_id: str, accepted_at: float | None) -> Newest:
        """Its place in a replace-mode key's order: when accepted (the message's, else its record's; 0: unknown)."""
        try:
            at = accepted_at if accepted_at is not None or self._accepted is None else self._accepted(operation_id)
        except Exception:
            logger.exception("could not read when a request sent again was accepted; its place is unknown")
            return Newest(operation_id, 0)  # unknown: it passes only as the key's newest
        return Newest(operation_id, round((at or 0) * 1000))

    def released(self, envelope: Envelope, binding: JobBinding) -> None:
        slot = self._forget(envelope, binding)
        if slot is None:
            return
        cap, key, until = slot
        try:
            self._table.give_back(cap, key, envelope.operation_id, until)
        except Exception:
            # Its slot lapses when the lease would have ended: the next job to find the key full takes it back.
            logger.exception("could not give a concurrency slot back; it lapses with the lease", cap=cap)

    def abandoned(self, envelope: Envelope, binding: JobBinding) -> None:
        # Its slot lapses with its lease, as a dead process's does; forgotten here so that a delivery it ran inside
        # (the local cloud's takeover, in one process) gives back its own slot, not this one's
        self._forget(envelope, binding)

    def _forget(self, envelope: Envelope, binding: JobBinding) -> tuple[str, str, float] | None:
        """The innermost open delivery's entry, taken off its operation's stack: the slot it took, or None."""
        taken = self._taken.get(envelope.operation_id)
        if binding.concurrency is None or not taken:
            return None
        slot = taken.pop()
        if not taken:
            del self._taken[envelope.operation_id]
        return slot

    # -- what an operator sees -----------------------------------------------------------------------------------

    def running(self) -> list[RunningKey]:
        """Every cap's keys with operations running now: one Query per cap."""
        now = self._clock.now()
        found: list[RunningKey] = []
        for cap in self._registry.concurrency.values():
            for state in self._table.keys(cap.name):
                live = state.live(now)
                waiters = state.waiters(now, WAITER_GRACE_SECONDS)
                if live or state.paused_by or waiters:
                    found.append(
                        RunningKey(
                            cap,
                            state.key,
                            tuple(sorted(live)),
                            len(live) >= cap.limit or state.paused_by is not None,
                            min(live.values(), default=now),
                            newest=state.newest if state.newest not in live else None,
                            paused_by=state.paused_by,
                            waiting=len(waiters),
                            next_start=min(waiters.values(), default=None),
                        )
                    )
        return sorted(found, key=lambda running: (running.cap.name, running.key))

    def pause(self, name: str, key: str | None, operator: str) -> bool:
        """An operator pauses a cap's key: none of its jobs starts (they wait SCHEDULED, listed, trying again every five
        minutes); those running run on. False when it was paused already."""
        cap = self.cap(name)
        key = key_named(key)
        paused = self._table.pause(cap.name, key, operator, self._clock.now())
        logger.warning("concurrency key paused by an operator", cap=cap.name, key=key, operator=operator)
        return paused

    def resume(self, name: str, key: str | None, operator: str) -> KeyReleased:
        """An operator releases a paused key, and the jobs noted as waiting on it are woken now (those the release
        does not reach start as they try again). `released` False when it was not paused."""
        cap = self.cap(name)
        key = key_named(key)
        resumed = self._table.resume(cap.name, key, operator, self._clock.now())
        logger.warning("concurrency key released by an operator", cap=cap.name, key=key, operator=operator)
        if self._waiters is None:
            return KeyReleased(resumed)
        waiting = self._table.waiting_on(cap.name, key)
        # The earliest to try first: the key's queue in the order its jobs would have come back
        order = sorted(waiting, key=lambda operation_id: (waiting[operation_id], operation_id))
        why = f"woken by {operator}'s release of concurrency {cap.name}"
        return self._waiters().wake(order, why, released=resumed)

    def release_slot(self, name: str, key: str | None, operation_id: str, operator: str) -> bool:
        """An operator frees a slot its holder left behind: False when the operation holds none on the key."""
        cap = self.cap(name)
        key = key_named(key)
        freed = self._table.release_slot(cap.name, key, operation_id)
        logger.warning(
            "concurrency slot freed by an operator", cap=cap.name, key=key, operation=operation_id, operator=operator
        )
        return freed

    def cap(self, name: str) -> Concurrency:
        found = self._registry.concurrency.get(name)
        if found is None:
            raise ConfigurationError(f"no concurrency cap named {name!r} is declared in the catalogue")
        return found

    @property
    def caps(self) -> Mapping[str, Concurrency]:
        return self._registry.concurrency


def _paused_until(cap: Concurrency, paused_at: float | None, now: float, expires_at: float | None) -> float:
    """When a job held by a paused key tries again: after as long as the key has been paused so far, from the
    cap's recheck or five minutes up to a day; at its expiry, when that is sooner (it expires then; a retry of
    started work, past its expiry, carries on, and tries as any other)."""
    paused_for = now - paused_at if paused_at is not None else 0.0
    until = now + min(PAUSED_RECHECK_MAX_SECONDS, max(cap.recheck, PAUSED_RECHECK_SECONDS, paused_for))
    if expires_at is not None and now < expires_at < until:
        return max(now + 1.0, expires_at)
    return until
