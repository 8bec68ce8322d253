"""Sending a signal to a waiting step (`ctx.wait_for`): kept exactly once, in any order, and the wait woken.

Every way in (`converge.signal`, the CLI, the HTTP API, and a signal item in the jobs table, which the relay
sends: `signal_put` builds a producer's) comes here:

1. the signal is screened like a message (identifiers only: `converge.screening.signals`);
2. the operation is read: none is answered `not_found`, a final one `ended` (nothing is kept for it);
3. the signal is kept by a conditional put of the one signal item of (operation, wait name): the first signal
   (or the wait's timeout) written there is the wait's outcome for good. The same signal id again is a
   `duplicate` (one signal); another id is `refused`, and listed on the item with why;
4. a kept signal wakes the wait: one conditional write brings the operation's time forward to now, only if it is
   SCHEDULED waiting for this signal with no lease, and then its timeout's schedule is deleted and its message
   sent now from its stored request (`converge.flow.wakes`). Not there yet, the operation finds the signal when it
   gets to its wait.

A duplicate wakes too: a sender that died between its put and its wake, and retries, is how the wake is made
sure. docs/signals.md says why each race ends in exactly one outcome.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from converge.flow.wakes import Wakes
from converge.model.clock import Clock, SystemClock, iso
from converge.model.errors import ConfigurationError, InvalidMessage
from converge.model.records import Operation
from converge.model.signals import (
    RefusedSignal,
    SignalAnswer,
    SignalItemKey,
    SignalKind,
    SignalReceipt,
    SignalRecord,
    signal_form,
)
from converge.model.states import FINAL_STATES
from converge.model.submission import SignalSubmission
from converge.observability import count, logger
from converge.screening.signals import check_signal
from converge.store.jobs import JobsTable
from converge.store.operations import OperationStore


def default_signal_id(name: str, payload: dict[str, Any]) -> str:
    """A signal's id when its sender gives none: derived from its name and payload, so the same signal sent again
    (a retried call) is one signal, and another payload for the same wait is refused, never taken for it."""
    digest = hashlib.sha256(json.dumps([name, payload], sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    return f"sig-{digest[:32]}"


def _screened(signal: SignalSubmission) -> tuple[dict[str, Any], str]:
    """The signal's payload as screened (InvalidMessage naming what converge cannot keep), and its id (given, or
    derived from its content)."""
    checked = check_signal(signal.operation_id, signal.name, signal.signal_id or "sig", signal.payload)
    return checked, signal.signal_id or default_signal_id(signal.name, checked)


def signal_put(jobs: JobsTable, signal: SignalSubmission) -> dict[str, Any]:
    """The `Put` of a signal item, for the producer's own TransactWriteItems: screened as `Signals.send` screens a
    signal (InvalidMessage, before anything is built), then sent by the relay from the jobs table's stream (its
    sender recorded as `jobs-table`, whatever `signal.sent_by` says)."""
    operation_id, name = signal.operation_id, signal.name
    checked, signal_id = _screened(signal)
    if signal_form(operation_id):
        raise InvalidMessage(f"operation_id {operation_id[:60]!r} is a signal item's key, not an operation's")
    if "::" in signal_id:
        raise InvalidMessage(f"signal_id {signal_id[:60]!r} is invalid in a signal item: it holds no '::'")
    return jobs.signal_put(SignalItemKey(operation_id, name, signal_id), checked)


class Signals:
    """Keeps signals for waits and wakes the waiting operations (the runtime builds one: `Converge.signals`)."""

    def __init__(
        self,
        operations: OperationStore,
        wakes: Wakes,
        clock: Clock | None = None,
    ) -> None:
        if operations.signals is None:
            raise ConfigurationError("signals need the markers table (MARKERS_TABLE)")
        self._operations = operations
        self._signals = operations.signals
        self._wakes = wakes
        self._clock = clock or SystemClock()

    def send(self, signal: SignalSubmission) -> SignalReceipt:
        """Send a signal to its operation: InvalidMessage (before anything is read) for one converge cannot keep;
        else the receipt saying what became of it."""
        operation_id, name, sent_by = signal.operation_id, signal.name, signal.sent_by
        checked, signal_id = _screened(signal)

        def answer(what: SignalAnswer, detail: str, woke: bool = False) -> SignalReceipt:
            count(f"signal_{what.value}")
            return SignalReceipt(what, operation_id, name, signal_id, detail, woke)

        operation = None if signal_form(operation_id) else self._operations.get(operation_id)
        if operation is None:
            return answer(SignalAnswer.NOT_FOUND, f"no operation {operation_id!r}")
        if operation.state in FINAL_STATES:
            return answer(SignalAnswer.ENDED, f"the operation has ended: it is {operation.state.value}; nothing kept")
        held = self._signals.receive(operation_id, name, signal_id, checked, sent_by)
        if held is not None and not (held.kind is SignalKind.SIGNAL and held.signal_id == signal_id):
            why = _taken(held)
            self._signals.refuse(operation_id, name, RefusedSignal(signal_id, iso(self._clock.now()), sent_by, why))
            logger.warning("signal refused: its wait has its outcome", signal=name, reason=why)
            return answer(SignalAnswer.REFUSED, f"refused: {why}; listed on the operation")
        woke = self._wake(operation, name)
        if held is not None:
            return answer(SignalAnswer.DUPLICATE, f"received already at {held.at}: one signal", woke is True)
        return answer(SignalAnswer.ACCEPTED, _kept(woke), woke is True)

    def _wake(self, operation: Operation, name: str) -> bool | None:
        """Bring a wait for this signal forward to now and send its message: True when it went out, False when it
        could not be sent (the operation is listed under STUCK instead), None when it is not waiting for it now."""
        if not self._operations.state.wake(operation.operation_id, name):
            return None
        return self._wakes.send_now(operation, f"woken by signal {name!r}")


def _kept(woke: bool | None) -> str:
    """A kept signal's detail: what its wake did (`Signals._wake`), never more than happened."""
    if woke is None:
        return "kept; delivered when the operation waits for it"
    if woke:
        return "kept; the operation resumes now"
    return "kept; its wake's message could not be sent now: the operation is listed under STUCK, with why"


def _taken(held: SignalRecord) -> str:
    if held.timed_out:
        return f"the wait {held.name!r} timed out at {held.at}"
    return f"the wait {held.name!r} has signal {held.signal_id!r} already (received {held.at})"
