"""Cancel: end an operation that has not started (CANCELLED, final, with the reason), or say it is too late.

"Not started" is judged by what happened, never by the state alone: an operation whose record shows a
lease ever taken (`StateRecord.started`) may have had its effect, even when it stands PAUSED, ACCEPTED
or SCHEDULED again (paused by its kill switch after a crash or a failed attempt, resumed, redriven),
so the cancel is refused as too late and says so. Deciding is a pure function of the record as read;
acting is one conditional write through the transition table, conditional as well on no attempt ever
recorded, so a worker that takes the operation meanwhile wins and the cancel reports that it came too
late. A started effect is never interrupted. Copies of a cancelled operation still in a
queue, a schedule or a DLQ are no-ops when they arrive: CANCELLED is final, so no lease is granted.
A delayed operation's schedule is deleted as well (a courtesy: if it fires anyway, its copy is a no-op).
A cancel settles through the settlement (`converge.flow.settlement`), as a worker's outcome does: a batch's
child is counted CANCELLED on its batch in the cancel's own write (one transaction), moved from what an operator's
reopening left it counted as, and its batch completes if it was the last child to be final.
Cancelling a batch marks it cancelled, then cancels each child by this same rule (a waiting child can be
cancelled, a started one cannot, a delayed one's schedule is deleted), and looks for completion once.

Bulk cancel works on the listed states that have not started (SCHEDULED, PAUSED) from the sparse
index, so it costs the size of what it finds; `dry_run` counts without writing.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from converge.model.batches import BatchCancel
from converge.model.errors import InvalidAction
from converge.model.records import Operation, Refused, StateRecord
from converge.model.settling import Settling
from converge.model.states import NOT_STARTED, OperationState
from converge.observability import logger
from converge.operate.results import ActionResult
from converge.store.operations import OperationStore

if TYPE_CHECKING:
    from converge.flow.batches import Batches
    from converge.flow.settlement import Settlement
    from converge.store.transact import TransactItem

BULK_STATES = frozenset({OperationState.SCHEDULED, OperationState.PAUSED})
"""The not-started states a listing can find (an ACCEPTED operation is in flight, not listed)."""


class Schedules(Protocol):
    def forget(self, operation_id: str) -> bool: ...


CancelResult = ActionResult
"""What a cancel did: an `ActionResult` whose action is "cancel"."""


def too_late(record: StateRecord) -> str | None:
    """None when the operation this record describes can be cancelled, else why not (a pure decision)."""
    state = record.state
    if state is OperationState.SCHEDULED and record.waiting and not record.leased:
        return None  # waiting between two steps: every earlier step is claimed, none is in flight
    if state is OperationState.IN_PROGRESS:
        return "too late: it is IN_PROGRESS (started; a started effect is never interrupted)"
    if state not in NOT_STARTED:
        return f"too late: it is {state.value}"
    if record.started:
        return (
            f"too late: it started (attempt {max(record.attempts, 1)}) and its effect may have happened; "
            f"it is {state.value} now and carries on as a retry of started work"
        )
    return None


def cancel(
    operations: OperationStore,
    schedules: Schedules,
    operation_id: str,
    reason: str,
    actor: str = "operator",
    *,
    settlement: Settlement,
) -> CancelResult:
    """Cancel one operation; raises OperationNotFound for an unknown id and InvalidAction for an empty reason.
    `settlement` writes the cancel with its extensions' items (a batch's count of its child)."""
    if not reason or not reason.strip():
        raise InvalidAction("a cancel needs a reason (it is recorded in the operation's history)")
    return _cancel(operations, schedules, operations.require(operation_id), reason.strip(), actor, settlement)


def cancel_batch(
    operations: OperationStore,
    schedules: Schedules,
    batches: Batches,
    batch_id: str,
    reason: str,
    actor: str = "operator",
    *,
    settlement: Settlement,
) -> BatchCancel:
    """Cancel a batch: each child not started is CANCELLED and counted (as one cancel would), those running or
    final carry on; the callback still comes once every child is final, with the counts. OperationNotFound for
    an unknown batch, InvalidAction for one still admitting or an empty reason."""
    batch = batches.begin_cancel(batch_id, reason, actor)
    why = f"{reason.strip()} (with its batch {batch_id})"
    cancelled = too_late_count = 0
    for operation_id in batches.child_ids(batch):
        child = operations.get(operation_id)
        if child is None or too_late(child.state_record) is not None:
            too_late_count += 1  # started or final: counted when it settles (a missing one: the reconciler's)
            continue
        done = _cancel(operations, schedules, child, why, actor, settlement, look_for_completion=False)
        cancelled += int(done.applied)
        too_late_count += int(not done.applied)  # it started meanwhile: counted when it settles
    return BatchCancel(batch_id, cancelled, too_late_count, batches.observe(batch_id))


def _cancel(
    operations: OperationStore,
    schedules: Schedules,
    operation: Operation,
    reason: str,
    actor: str,
    settlement: Settlement,
    *,
    look_for_completion: bool = True,
) -> CancelResult:
    before = operation.state
    refusal = too_late(operation.state_record)
    if refusal is not None:
        return CancelResult("cancel", operation.operation_id, before.value, before.value, False, refusal)
    note = f"cancelled by {actor}: {reason}"
    waiting = operation.state_record.waiting
    if waiting:  # the steps before the wait ran; the receipt lists them (`converge ops show`)
        note = f"cancelled by {actor} while waiting at {waiting!r}; the steps before it ran: {reason}"
    settling = Settling(operation.operation_id, operation.job_type, OperationState.CANCELLED, operation.payload)

    def write(noted: str, items: Sequence[TransactItem]) -> None:
        operations.state.transition_with(operation, OperationState.CANCELLED, noted, items, forget_lease=True)

    try:
        # A batch's child completes its batch if it was the last to be final (a batch's cancel looks once, after all).
        settlement.settle(settling, note, write, follow=look_for_completion)
    except Refused:
        now = operations.state.record(operation.operation_id)
        message = too_late(now) or f"it moved to {now.state.value} meanwhile; try again"
        return CancelResult("cancel", operation.operation_id, before.value, now.state.value, False, message)
    if before is OperationState.SCHEDULED:
        try:
            schedules.forget(operation.operation_id)
        except Exception:  # its copy would be a no-op anyway; a leftover schedule only costs one firing
            logger.exception("could not delete a cancelled operation's schedule")
    return CancelResult(
        "cancel", operation.operation_id, before.value, OperationState.CANCELLED.value, True, "cancelled"
    )


@dataclass
class BulkCancel:
    """What a bulk cancel found and did (`dry_run`: found only)."""

    state: str
    job_type: str | None
    older_than_seconds: float | None
    dry_run: bool
    matched: int = 0
    cancelled: int = 0
    too_late: int = 0
    operation_ids: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "job_type": self.job_type,
            "older_than_seconds": self.older_than_seconds,
            "dry_run": self.dry_run,
            "matched": self.matched,
            "cancelled": self.cancelled,
            "too_late": self.too_late,
            "operation_ids": self.operation_ids,
        }


def bulk_cancel(
    operations: OperationStore,
    schedules: Schedules,
    state: OperationState,
    reason: str,
    *,
    job_type: str | None = None,
    older_than_seconds: float | None = None,
    dry_run: bool = True,
    limit: int | None = None,
    actor: str = "operator",
    settlement: Settlement,
) -> BulkCancel:
    """Cancel the listed operations in `state` (of one job type, listed more than `older_than_seconds` ago);
    `settlement` (the runtime's, with its extensions) writes each cancel, as for one cancel."""
    if state not in BULK_STATES:
        raise InvalidAction(f"bulk cancel lists {', '.join(sorted(BULK_STATES))} operations, not {state.value}")
    if not dry_run and (not reason or not reason.strip()):
        raise InvalidAction("a cancel needs a reason (it is recorded in the operation's history)")
    report = BulkCancel(state.value, job_type, older_than_seconds, dry_run)
    cutoff = operations.now() - older_than_seconds if older_than_seconds is not None else None
    for row in _matching(operations, state, job_type, cutoff):
        if limit is not None and report.matched >= limit:
            break
        report.matched += 1
        report.operation_ids.append(str(row["operation_id"]))
        if dry_run:
            continue
        operation = operations.get(str(row["operation_id"]))
        if operation is None:
            continue
        result = _cancel(operations, schedules, operation, reason.strip(), actor, settlement)
        report.cancelled += int(result.applied)
        report.too_late += int(not result.applied)
    return report


def _matching(
    operations: OperationStore, state: OperationState, job_type: str | None, cutoff: float | None
) -> Iterator[dict[str, Any]]:
    for row in operations.listings.iter_attention(state.value, job_type):
        listed = row.get("listed_at")
        if cutoff is not None and (not listed or _epoch(str(listed)) > cutoff):
            continue
        yield row


def _epoch(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()  # (Python 3.11 and later read the trailing Z)


__all__ = ["BULK_STATES", "BulkCancel", "CancelResult", "bulk_cancel", "cancel", "cancel_batch", "too_late"]
