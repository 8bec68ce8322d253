"""Waking a waiting operation: its time brought forward to now (by the caller's conditional write), then its message
sent now from its stored request.

Two things wake an operation before its time: a signal its step waits for (`converge.flow.signals`), and an
operator's release of a concurrency cap's key its job was held on (`converge.flow.concurrency`). Both first make the
one conditional write that says the operation still waits there with no lease (`StateTable.wake`, `wake_held`);
only the caller whose write passed sends. Then, here:

1. its one-time schedule (the wait's timeout, or the hold's return) is deleted first: never needed now, and deleted
   before the send, so that a schedule the woken run makes for its next wait is never the one deleted;
2. its message is sent from the request it was admitted with. A send that fails lists it under STUCK for the
   reconciler, which sends it on its next run (its time is now); a request that is no longer safe to send (deleted,
   or other content) lists it as unrunnable. Nothing is lost either way: a copy that arrives later finds the
   operation started or ended and does nothing.
"""

from __future__ import annotations

from converge.flow.delays import DelayedDispatch
from converge.flow.dispatch import Dispatcher
from converge.model.errors import NotRunnable
from converge.model.outcomes import describe
from converge.model.records import Operation, StateRecord
from converge.model.states import OperationState, StuckKind
from converge.observability import logger
from converge.store.operations import OperationStore


class Wakes:
    """Sends a woken operation's message now (the runtime builds one: `Converge.wakes`)."""

    def __init__(self, operations: OperationStore, dispatcher: Dispatcher, delays: DelayedDispatch | None) -> None:
        self._operations = operations
        self._dispatcher = dispatcher
        self._delays = delays

    def send_now(self, operation: Operation, why: str) -> bool:
        """Send the message of an operation whose time was just brought forward (`why`: what woke it, for the
        receipt should the send fail). True when it went out; False when it is listed under STUCK instead."""
        if self._delays is not None:
            try:
                self._delays.forget(operation.operation_id)
            except Exception:
                logger.warning("could not delete a woken operation's schedule; its firing is a no-op")
        waiting = StateRecord(operation.operation_id, OperationState.SCHEDULED, job_type=operation.job_type)
        try:
            self._dispatcher.send_one(self._dispatcher.outgoing(self._dispatcher.envelope_for(operation)))
        except NotRunnable as exc:
            self._operations.state.mark_stuck(waiting, StuckKind.UNRUNNABLE, str(exc))
            return False
        except Exception as exc:
            logger.exception("could not send a woken operation's message; listed under STUCK for the reconciler")
            self._operations.state.mark_stuck(
                waiting, StuckKind.UNDISPATCHED, f"{why}, and its message could not be sent ({describe(exc)})"
            )
            return False
        return True
