"""Operation states and the one table of moves between them.

Every writer of an operation's state (the pipeline, the relay, the resumer, redrive, an operator's
resolve, the reconciler) goes through the state table (`converge.store.state`), which asks this table before
it writes; the write itself is conditional on the state it moves from, so a move the table does not
list can neither be requested nor slip in through a race. An operation with no state record yet
(admitted, not yet started) is ACCEPTED.

Adding a state is an edit here: its member, its row, the rows that lead to it, and whether it is
final or needs attention.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum

from converge.model.errors import InvalidTransition


class OperationState(StrEnum):
    """Where an operation stands; the moves between states are one table, `TRANSITIONS`."""

    ACCEPTED = "ACCEPTED"
    """Admitted and sent to its queue (again after a retry, a redrive or a resume), not yet taken by a worker."""
    SCHEDULED = "SCHEDULED"
    """Waiting for its `run_at`, behind a message delay or a one-time schedule."""
    PAUSED = "PAUSED"
    """Its job's kill switch was off: nothing lost, the resumer sends it again when the switch is turned on."""
    IN_PROGRESS = "IN_PROGRESS"
    """A worker holds its lease."""
    SUCCEEDED = "SUCCEEDED"
    """Its effect happened (final)."""
    NOOP = "NOOP"
    """Already done or no longer needed: the runner's `load` found nothing to do (final, a success)."""
    FAILED = "FAILED"
    """A permanent error or the last attempt failed; its message is in a DLQ, and an operator may retry it."""
    UNKNOWN = "UNKNOWN"
    """The effect may or may not have happened and the provider cannot tell: retries stop, an operator resolves
    it."""
    REJECTED = "REJECTED"
    """Invalid input (an unknown job type, a payload that breaks its contract), with the reason; never run."""
    CANCELLED = "CANCELLED"
    """Cancelled before it started (final)."""
    EXPIRED = "EXPIRED"
    """Not started by its `expires_at`; never run (final)."""


TRANSITIONS: Mapping[OperationState, frozenset[OperationState]] = {
    # admitted: a worker starts it, its kill switch pauses it, or its input is refused; the relay holds a
    # delayed one until its run_at; never started (no attempt recorded), it can be cancelled, or expire, or end NOOP
    # (a debounced request whose burst runs a newer one)
    OperationState.ACCEPTED: frozenset(
        {
            OperationState.IN_PROGRESS,
            OperationState.NOOP,
            OperationState.PAUSED,
            OperationState.REJECTED,
            OperationState.SCHEDULED,
            OperationState.CANCELLED,
            OperationState.EXPIRED,
        }
    ),
    # waiting for its run_at (a message delay or a one-time schedule); then like ACCEPTED; a rate limit holds it
    # again when it comes back too late for its slot
    OperationState.SCHEDULED: frozenset(
        {
            OperationState.SCHEDULED,
            OperationState.NOOP,
            OperationState.IN_PROGRESS,
            OperationState.PAUSED,
            OperationState.REJECTED,
            OperationState.CANCELLED,
            OperationState.EXPIRED,
        }
    ),
    # the resumer re-dispatches it; a copy still in a queue may start it directly; cancelled or expired
    # only if it never started (a paused retry of started work carries on when its toggle is on)
    OperationState.PAUSED: frozenset(
        {OperationState.ACCEPTED, OperationState.IN_PROGRESS, OperationState.CANCELLED, OperationState.EXPIRED}
    ),
    # IN_PROGRESS -> IN_PROGRESS: a retry after a failed attempt, or a takeover of an expired lease;
    # -> SCHEDULED: a runner waits between two steps (`ctx.wait`), its lease given back
    OperationState.IN_PROGRESS: frozenset(
        {
            OperationState.IN_PROGRESS,
            OperationState.PAUSED,
            OperationState.SCHEDULED,
            OperationState.SUCCEEDED,
            OperationState.NOOP,
            OperationState.FAILED,
            OperationState.UNKNOWN,
            OperationState.REJECTED,
        }
    ),
    OperationState.SUCCEEDED: frozenset(),
    OperationState.NOOP: frozenset(),
    OperationState.REJECTED: frozenset(),
    OperationState.CANCELLED: frozenset(),
    OperationState.EXPIRED: frozenset(),
    # an operator's redrive
    OperationState.FAILED: frozenset({OperationState.ACCEPTED}),
    # an operator's resolve: succeeded, failed, or retry (re-dispatched with the same identity)
    OperationState.UNKNOWN: frozenset({OperationState.SUCCEEDED, OperationState.FAILED, OperationState.ACCEPTED}),
}

FINAL_STATES = frozenset(
    {
        OperationState.SUCCEEDED,
        OperationState.NOOP,
        OperationState.FAILED,
        OperationState.UNKNOWN,
        OperationState.REJECTED,
        OperationState.CANCELLED,
        OperationState.EXPIRED,
    }
)
"""States no delivery moves on from; only an operator (resolve, redrive) reopens FAILED and UNKNOWN."""

ATTENTION_STATES = frozenset(
    {OperationState.FAILED, OperationState.UNKNOWN, OperationState.PAUSED, OperationState.REJECTED}
)
"""States that need an operator."""

LISTED_STATES = ATTENTION_STATES | {OperationState.SCHEDULED, OperationState.CANCELLED, OperationState.EXPIRED}
"""States an operator lists (a sparse index holds them, so listing costs the result, never a scan): those that
need attention, delayed operations with their time, and the final outcomes no worker reached."""

NOT_STARTED = frozenset({OperationState.ACCEPTED, OperationState.SCHEDULED, OperationState.PAUSED})
"""States a cancel or an expiry may end, if the record shows the work never began: these states say only
that no delivery holds the operation now. A started operation comes back to them (paused by its kill
switch after a crash or a failed attempt, resumed, redriven), so whether it started is read from what
happened (`StateRecord.started`: a lease was ever taken), never from the state alone."""

NOTHING_RAN = frozenset({OperationState.CANCELLED, OperationState.EXPIRED})
"""Final states that say nothing (more) ran: every write to one is conditional on no attempt ever recorded, so a
race with a worker cannot slip through and no receipt claims nothing ran when something may have. The one
exception is a cancel of an operation waiting between two steps (`ctx.wait`): conditional on it still waiting
with no lease, so no step is in flight; its receipt says the steps before the wait ran, and none after does."""

OPEN_STATES = frozenset(OperationState) - FINAL_STATES


class Flag(StrEnum):
    """Attention keys that are not states: the operation stays in its state and is listed besides."""

    STUCK = "STUCK"  # open, and nothing will move it on by itself (the reason says why)
    CONFLICT = "CONFLICT"  # a producer wrote other content under its id; the original is what runs


class StuckKind(StrEnum):
    """Why an operation is listed under STUCK."""

    REOPENED = "reopened"  # an operator sent it back to its queue; cleared when a worker takes it
    DEAD_LETTERED = "dead_lettered"  # its message is in a DLQ while it is still open; redrive it
    UNDISPATCHED = "undispatched"  # the relay could not dispatch it (nor a replay yet), or a wait's resumption unsent
    UNRUNNABLE = "unrunnable"  # its stored request is gone or overwritten: nothing safe to send
    OVERDUE = "overdue"  # SCHEDULED, its run_at long past, and not started: sent again; cleared when a worker takes it


ATTENTION_KEYS: tuple[str, ...] = (*sorted(LISTED_STATES), *Flag)
"""Everything `converge ops list --state` accepts."""


def allowed(source: OperationState, target: OperationState) -> bool:
    return target in TRANSITIONS[source]


def check(source: OperationState, target: OperationState) -> None:
    """Raise InvalidTransition unless the table lists source -> target."""
    if not allowed(source, target):
        moves = ", ".join(sorted(TRANSITIONS[source])) or "none (it is final)"
        raise InvalidTransition(f"an operation cannot move from {source} to {target}; from {source}: {moves}")


def sources(target: OperationState) -> frozenset[OperationState]:
    """The states the table allows to move to `target` (what a conditional write may move from)."""
    return frozenset(source for source, targets in TRANSITIONS.items() if target in targets)
