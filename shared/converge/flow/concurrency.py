"""Per-key concurrency: a job over its cap is not started and not failed; it waits SCHEDULED and tries again.

`ConcurrencyCaps` joins the pipeline as an extension (`converge.flow.extensions`). Before a job of a capped type
takes its lease (`hold`), it takes a slot of its key (`converge.store.concurrency`: one write, no read), held until
its lease would end; when the key's slots are all held, the job waits SCHEDULED (listed with the reason, no attempt
counted, its message sent again) until the earliest holder's slot lapses or the cap's `recheck`, whichever comes
first, and tries again then. The delivery gives its slot back when it ends, however it ends (`released`: settled,
waiting between steps, retried, or refused its lease); a holder that crashed keeps it until its lease would have
ended, and the next job to find the key full removes it then.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from converge.flow.extensions import Extension, Hold
from converge.model.clock import Clock, SystemClock, iso
from converge.model.concurrency import Concurrency
from converge.model.limits import SHARED_KEY
from converge.observability import count, logger
from converge.store.concurrency import ConcurrencyTable

if TYPE_CHECKING:
    from converge.flow.registry import JobBinding, Registry
    from converge.model.envelope import Envelope


@dataclass(frozen=True)
class RunningKey:
    """One cap's key with operations running under it now: which, and when the earliest slot lapses."""

    cap: Concurrency
    key: str
    running: tuple[str, ...]
    full: bool
    next_free: float


class ConcurrencyCaps(Extension):
    """The catalogue's concurrency caps, applied to a job before its lease; its slot given back when it ends."""

    def __init__(self, registry: Registry, table: ConcurrencyTable, clock: Clock | None = None) -> None:
        self._registry = registry
        self._table = table
        self._clock = clock or SystemClock()
        self._taken: dict[str, list[tuple[str, str] | None]] = {}
        """What each delivery of an operation running in this process took, innermost last (a copy delivered while
        it runs is inside it): its slot (cap, key), or None; each given back when its delivery ends."""

    def hold(self, envelope: Envelope, binding: JobBinding, lease_until: float) -> Hold | None:
        cap = binding.concurrency
        if cap is None:
            return None
        now = self._clock.now()
        key = cap.key_of(envelope.payload)
        calls = self._taken.setdefault(envelope.operation_id, [])
        calls.append(None)  # this delivery's entry, before the write: `released` pops it however `hold` ends
        taken = self._table.take(cap.name, key, envelope.operation_id, lease_until, cap.limit, now)
        if taken.taken:
            calls[-1] = (cap.name, key)
            return None
        if taken.already:
            return None  # another delivery of this operation holds its slot: the lease refuses this one
        earliest = min(taken.holders.values(), default=now)
        until = max(now + 1.0, min(earliest, now + cap.recheck))
        count("concurrency_held", binding.job_type)
        reason = (
            f"concurrency {cap.name} ({_shown(key)}: {len(taken.holders)} of {cap.limit} running); "
            f"tries again at {iso(until)}"
        )
        return Hold(until, reason)

    def released(self, envelope: Envelope, binding: JobBinding) -> None:
        taken = self._taken.get(envelope.operation_id)
        if binding.concurrency is None or not taken:
            return
        slot = taken.pop()
        if not taken:
            del self._taken[envelope.operation_id]
        if slot is None:
            return
        try:
            self._table.give_back(*slot, envelope.operation_id)
        except Exception:
            # Its slot lapses when the lease would have ended: the next job to find the key full takes it back.
            logger.exception("could not give a concurrency slot back; it lapses with the lease", cap=slot[0])

    # -- what an operator sees -----------------------------------------------------------------------------------

    def running(self) -> list[RunningKey]:
        """Every cap's keys with operations running now: one Query per cap."""
        now = self._clock.now()
        found: list[RunningKey] = []
        for cap in self._registry.concurrency.values():
            for state in self._table.keys(cap.name):
                live = state.live(now)
                if live:
                    found.append(
                        RunningKey(cap, state.key, tuple(sorted(live)), len(live) >= cap.limit, min(live.values()))
                    )
        return sorted(found, key=lambda running: (running.cap.name, running.key))

    @property
    def caps(self) -> Mapping[str, Concurrency]:
        return self._registry.concurrency


def _shown(key: str) -> str:
    return "shared" if key == SHARED_KEY else f"key {key}"
