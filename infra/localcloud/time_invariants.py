"""The time and flow invariants of a run: nothing ran before its run_at, nothing ran after (or despite) its
cancel, and every expired or cancelled operation is final and in its listing.

An operation cancelled while it waited between two steps (`ctx.wait`) ran the steps before its wait: it may
have started and had those effects, and its receipt says so; no delivery started it after the cancel."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from converge.model.records import Operation
from converge.model.states import OperationState
from converge.model.timing import parse_instant

from . import effects as effects_ledger
from .checks import Check

_S = OperationState


def _started(operation: Operation) -> list[float]:
    return [parse_instant("at", entry.at) for entry in operation.history if entry.state == _S.IN_PROGRESS.value]


def _cancelled_while_waiting(operation: Operation) -> bool:
    last = operation.history[-1] if operation.history else None
    return (
        operation.state is _S.CANCELLED
        and last is not None
        and last.state == _S.CANCELLED.value
        and "while waiting at" in last.reason
    )


def time_and_flow(
    operations: dict[str, tuple[Operation, dict[str, Any]]],
    counted: effects_ledger.Effects,
    lister: Callable[[str], set[str]],
) -> Check:
    early, after_cancel, unlisted = [], [], []
    ended: dict[OperationState, set[str]] = {_S.CANCELLED: set(), _S.EXPIRED: set()}
    for operation_id, (operation, _) in operations.items():
        request = operation.request
        if request is not None and request.run_at and _started(operation):
            first = min(_started(operation))
            if first < parse_instant("run_at", request.run_at):
                early.append(f"{operation_id} started at {first:.3f}, before its run_at {request.run_at}")
        if operation.state in ended:
            ended[operation.state].add(operation_id)
            effects, starts = sum(counted.for_operation(operation_id).values()), len(_started(operation))
            if _cancelled_while_waiting(operation):
                last_start = max(_started(operation), default=0.0)
                if last_start > parse_instant("at", operation.history[-1].at):
                    after_cancel.append(f"{operation_id} started again after it was cancelled while waiting")
            elif starts or effects:
                after_cancel.append(f"{operation_id} {operation.state.value} yet started {starts}x, {effects} effects")
    for state, operation_ids in ended.items():
        if operation_ids:
            unlisted += [f"{op} is {state.value} but not listed" for op in sorted(operation_ids - lister(state))]
    violations = early + after_cancel + unlisted
    return Check(
        "time_and_flow",
        not violations,
        "nothing started before its run_at; no CANCELLED or EXPIRED operation ever started or had an effect "
        "(but the steps before the wait of one cancelled while waiting, none after); "
        f"every one of them ({len(ended[_S.CANCELLED])} cancelled, {len(ended[_S.EXPIRED])} expired) is listed "
        "under its state",
        violations,
    )
