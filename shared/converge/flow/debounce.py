"""Debounce: a burst of requests for one key becomes one run, with the newest request's payload.

`Debouncing` joins the pipeline as an extension (`converge.flow.extensions`), asked before the rate limits and the
concurrency caps, so that a request that is not its burst's run takes no slot of theirs. Before a request of a
debounced job type takes its lease (`hold`), it looks at its key (`converge.store.debounce`) and does what
`Burst.decide` says: it opens a burst, becomes its newest, or moves its quiet period on (one conditional write each),
and waits SCHEDULED until the burst's start (listed with the reason, no attempt counted, its message sent again for
then); come back then, the burst is closed with its newest as its run (one write, by whichever request comes back
first), the run starts, and every other request of the burst ends NOOP, "debounced into <the run's id>" (`Skip`).
A request older than a run that was chosen already ends NOOP at once, into that run: an older payload never runs
after a newer one, in whatever order the relay or a redelivery meets them.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from converge.flow.extensions import Extension, Hold, Skip
from converge.model.clock import Clock, SystemClock, iso
from converge.model.debounce import Action, Burst, Debounce
from converge.model.limits import SHARED_KEY
from converge.observability import count
from converge.store.debounce import DebounceTable, Moved, Request

if TYPE_CHECKING:
    from converge.flow.registry import JobBinding, Registry
    from converge.model.envelope import Envelope

HELD_BY = "(debounce)"
"""What a request's message carries (`Envelope.held_by`) when it is sent back for its burst's start: coming back, it
is no new request (it moves no quiet period). No limiter's name has brackets."""
MAX_WRITES = 6
"""A request's writes on its key, at most: a refused write returns the key as it stands, and each race lost is a
write another request made (opening, joining or closing), so a handful settles it; past them, it waits a moment."""
RETRY_SECONDS = 1.0


@dataclass(frozen=True)
class WaitingBurst:
    """One debounced key with a burst waiting: its newest request, and when its run starts at the latest."""

    job_type: str
    debounce: Debounce
    key: str
    newest: str
    first: float
    starts: float


class Debouncing(Extension):
    """The catalogue's debounced job types: each request joins its key's burst, and only the burst's newest runs."""

    def __init__(self, registry: Registry, table: DebounceTable, clock: Clock | None = None) -> None:
        self._registry = registry
        self._table = table
        self._clock = clock or SystemClock()
        self._seen: dict[tuple[str, str], Burst] = {}
        """The last state this process saw of each key: which write to try first (a wrong guess costs one refused
        write, whose answer is the key as it stands). Bounded: forgotten whole past `_SEEN_LIMIT` keys."""

    def hold(
        self, envelope: Envelope, binding: JobBinding, lease_until: float, accepted_at: float | None = None
    ) -> Hold | Skip | None:
        debounce = binding.debounce
        if debounce is None:
            return None
        now_ms = math.floor(self._clock.now() * 1000)
        key = debounce.key_of(envelope.payload)
        request = Request(
            envelope.operation_id,
            debounce.order_of(envelope.payload),
            now_ms,
            math.ceil(debounce.period * 1000),
            math.ceil(debounce.max_wait * 1000),
        )
        returning = envelope.held_by == HELD_BY
        place = (binding.job_type, key)
        # A message come back reads its key (its burst may have closed meanwhile); an arrival guesses its write from
        # the last state seen here (none: a key at rest, opened), and a refused guess answers with the key as it
        # stands.
        fresh = returning
        burst = self._table.read(*place) if returning else self._seen.get(place, Burst())
        moves_quiet = not returning
        for _ in range(MAX_WRITES):
            action = burst.decide(request.operation_id, request.order, now_ms, returning=not moves_quiet)
            if action in (Action.START, Action.SKIP) and not fresh:
                # Only the key as it stands starts a run or ends a request: a process's last sight of it may be from
                # before its item went (a day unused, or deleted), and a guess may only cost a write or a wait.
                burst, fresh = self._table.read(*place), True
                continue
            if action in (Action.START, Action.SKIP, Action.HOLD):
                self._remember(place, burst)
                later = returning and burst.newest != request.operation_id
                return self._outcome(action, burst, binding, key, later)
            try:
                burst = self._table.write(*place, action, burst, request)
            except Moved as moved:
                burst, fresh = moved.burst, True
                # A quiet period another request moved as far (or one at its deadline) is not moved again: the
                # request waits with its burst as it stands
                moves_quiet = moves_quiet and action is not Action.EXTEND
                continue
            fresh = True
            if action is not Action.CLOSE:
                self._remember(place, burst)
                return self._outcome(Action.HOLD, burst, binding, key, False)
        self._remember(place, burst)
        count("debounce_contended", binding.job_type)
        return Hold(
            now_ms / 1000 + RETRY_SECONDS, "debounced: its key is busy; tries again in a second", HELD_BY, alone=True
        )

    def _outcome(
        self, action: Action, burst: Burst, binding: JobBinding, key: str, to_deadline: bool
    ) -> Hold | Skip | None:
        """What the pipeline does with the request. `to_deadline`: an older request come back before its burst's start
        (newer requests moved it on) waits for the burst's deadline, when the burst has surely closed, rather than
        for its start as it stands, which a steady stream of requests would move on again and again: it comes back
        at most twice, whatever the burst's length, and ends by `max_wait` after the burst's first request."""
        if action is Action.START:
            return None
        if action is Action.SKIP:
            count("debounced", binding.job_type)
            return Skip(f"debounced into {burst.ran}")
        # Always ahead of now: a HOLD is decided only on an open burst not yet due (else it is closed first), and the
        # writes that hold (open, join, extend) leave one due after now (their conditions and the period's second)
        starts = (burst.deadline if to_deadline else burst.due) / 1000
        reason = (
            f"debounced ({_shown(key)}: a burst since {iso(burst.first / 1000)}, newest {burst.newest}); "
            f"starts by {iso(starts)}"
        )
        return Hold(starts, reason, HELD_BY, alone=True)

    def _remember(self, place: tuple[str, str], burst: Burst) -> None:
        if len(self._seen) >= _SEEN_LIMIT and place not in self._seen:
            self._seen.clear()
        self._seen[place] = burst

    # -- what an operator sees -----------------------------------------------------------------------------------

    def waiting(self) -> Iterator[WaitingBurst]:
        """Every debounced job type's keys with a burst open: one Query per job type."""
        for binding in self._registry:
            if binding.debounce is None:
                continue
            for key, burst in self._table.keys(binding.job_type):
                if burst.open:
                    yield WaitingBurst(
                        binding.job_type, binding.debounce, key, burst.newest, burst.first / 1000, burst.due / 1000
                    )


_SEEN_LIMIT = 10_000


def _shown(key: str) -> str:
    return "shared key" if key == SHARED_KEY else f"key {key}"
