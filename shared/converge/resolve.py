"""An operator's decision on an UNKNOWN operation: it succeeded, it failed, or it must run again.

`retry` is for an effect the operator has established did NOT happen. The lease was given back
when the operation became UNKNOWN, so the next attempt is a fresh claim, not a takeover that would
ask the provider again (which is what made it UNKNOWN); it is re-dispatched with the same identity,
so the provider's idempotency key is unchanged. Until a worker takes it, it is listed under STUCK.
"""

from __future__ import annotations

from enum import StrEnum

from converge.dispatch import Dispatcher
from converge.errors import InvalidTransition
from converge.operations import Operation, OperationState, OperationStore
from converge.states import StuckKind


class Resolution(StrEnum):
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    RETRY = "retry"


def resolve(
    operations: OperationStore, dispatcher: Dispatcher, operation_id: str, resolution: Resolution, reason: str
) -> Operation:
    """Record the decision (and for retry, dispatch again); the operation as it now stands."""
    operation = operations.require(operation_id)
    if operation.state is not OperationState.UNKNOWN:
        raise InvalidTransition(
            f"operation {operation_id!r} is {operation.state.value}, not UNKNOWN; only UNKNOWN operations are resolved"
        )
    note = f"resolved by an operator as {resolution.value}: {reason}"
    if resolution is Resolution.SUCCEEDED:
        moved = operations.transition(operation, OperationState.SUCCEEDED, note)
    elif resolution is Resolution.FAILED:
        moved = operations.transition(operation, OperationState.FAILED, note, error=note)
    else:
        envelope = dispatcher.envelope_for(operation)  # before reopening: nothing to send, nothing changed
        moved = operations.transition(
            operation,
            OperationState.ACCEPTED,
            note,
            stuck=(StuckKind.REOPENED, "re-dispatched by an operator; listed here until a worker takes it"),
            forget_lease=True,
        )
        if moved:
            dispatcher.send_one(dispatcher.outgoing(envelope))
    if not moved:
        raise InvalidTransition(f"operation {operation_id!r} changed while resolving it; show it and try again")
    return operations.require(operation_id)
