"""The reconciler's fourth and fifth passes: open work no worker took, sent again from its stored request.

4. The schedule index. A SCHEDULED operation whose run_at passed more than `OVERDUE_GRACE_SECONDS` ago
   has lost its message or its schedule (receives burned, a firing dropped, a schedule deleted): it is
   sent again from its stored request and listed under STUCK ("overdue") until a worker takes it. The
   index holds listed operations by run_at, so this is one key range: what it finds.
5. The STUCK listing. An operation an operator sent back to its queue (redrive, resolve retry), or an
   overdue one sent again, is listed under STUCK ("reopened", "overdue") until a worker takes it; one
   still there after `redispatch_after` seconds is dispatched again from its stored request. An operation
   waiting between two steps whose resumption could not be sent ("undispatched", listed by the worker)
   is sent again on each run, from its stored request for its time, and listed under SCHEDULED again
   once it is out.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from converge.flow.delays import DelayedDispatch
from converge.flow.dispatch import Dispatcher
from converge.model.clock import Clock, iso
from converge.model.errors import ConfigurationError, NotRunnable, SendFailed
from converge.model.outcomes import describe
from converge.model.records import StateRecord
from converge.model.states import Flag, OperationState, StuckKind
from converge.observability import count, logger
from converge.operate.reconcile_run import STUCK_STATES, ReconcileRun
from converge.store.operations import OperationStore

REDISPATCH_AFTER_SECONDS = 1800
"""How long a reopened operation may wait for a worker before it is sent again (a lease lasts at most ~15 min)."""
OVERDUE_GRACE_SECONDS = 3600
"""How long past its run_at a SCHEDULED operation may be in flight: SQS's delay is exact and a schedule
fires at its time (no flexible window), but Scheduler retries a failed delivery for up to 15 minutes
(`converge.flow.delays.RETRY_POLICY`), the reconciler reads the schedules' DLQ only every 5 minutes, and a busy
queue's backlog delays the start; an hour covers all of it with room. A false alarm costs one duplicate
message, which the lease absorbs."""
MAX_OVERDUE = 200
"""Overdue operations sent again per run (earliest first); the next run goes on with the rest."""


class Redispatch:
    """Sends an open operation again from its stored request, and lists it under STUCK until a worker takes it
    (the overdue and the reopened pass's one way to send)."""

    def __init__(self, operations: OperationStore, dispatcher: Dispatcher, clock: Clock) -> None:
        self._operations = operations
        self._dispatcher = dispatcher
        self._clock = clock

    def send(
        self,
        record: StateRecord,
        operation: Any,
        run: ReconcileRun,
        kind: StuckKind = StuckKind.REOPENED,
        why: str = "",
    ) -> None:
        try:
            envelope = self._dispatcher.envelope_for(operation)
        except NotRunnable as exc:
            if self._operations.state.mark_stuck(record, StuckKind.UNRUNNABLE, str(exc)):
                count("stuck", job_type=operation.job_type)
            run.summary.unrunnable += 1
            return
        try:
            self._dispatcher.send_one(self._dispatcher.outgoing(envelope))
        except SendFailed:
            logger.warning("could not re-dispatch an operation; the next run tries again", kind=kind.value)
            return
        sent = f"re-dispatched by the reconciler at {iso(self._clock.now())}; listed here until a worker takes it"
        if kind is StuckKind.OVERDUE and why:
            listed = self._operations.state.mark_stuck(record, kind, f"{why}; {sent}")
            run.summary.overdue_redispatched += 1
            if listed:
                run.summary.stuck_listed += 1
                count("stuck", job_type=operation.job_type)
        else:
            self._operations.state.mark_stuck(record, kind, sent)
            run.summary.reopened_redispatched += 1
        source = "overdue" if kind is StuckKind.OVERDUE else "stuck"
        run.summary.details.append({"source": source, "operation_id": operation.operation_id, "action": "redispatched"})


class OverdueWork:
    """4. SCHEDULED operations long past their run_at, earliest first: sent again and listed as overdue."""

    def __init__(self, operations: OperationStore, redispatch: Redispatch, clock: Clock) -> None:
        self._operations = operations
        self._redispatch = redispatch
        self._clock = clock

    def sweep(self, run: ReconcileRun) -> None:
        now = self._clock.now()
        for operation_id, run_at in self._operations.listings.overdue(now - OVERDUE_GRACE_SECONDS, MAX_OVERDUE):
            if run.out_of_time():
                return
            operation = self._operations.get(operation_id)
            if operation is None or operation.state is not OperationState.SCHEDULED:
                continue
            late = f"{(now - run_at) / 60:.0f} min"
            why = (
                f"SCHEDULED for {iso(run_at)} ({late} ago) and not started: its message or schedule is lost "
                "(receives burned at its run_at, a firing dropped, or its schedule deleted)"
            )
            if operation.state_record.waiting:  # a runner's wait between two steps that nothing resumed
                why = (
                    f"waiting at {operation.state_record.waiting!r} until {iso(run_at)} ({late} ago) and not "
                    "resumed: its resumption message or schedule is lost"
                )
            self._redispatch.send(operation.state_record, operation, run, StuckKind.OVERDUE, why)


class ReopenedWork:
    """5. The STUCK listing: reopened and overdue operations no worker took sent again, and waits whose
    resumption could not be sent given it."""

    def __init__(
        self,
        operations: OperationStore,
        dispatcher: Dispatcher,
        redispatch: Redispatch,
        clock: Clock,
        redispatch_after: float,
        delays: DelayedDispatch | None,
    ) -> None:
        self._operations = operations
        self._dispatcher = dispatcher
        self._redispatch = redispatch
        self._clock = clock
        self._redispatch_after = redispatch_after
        self._delays = delays

    def sweep(self, run: ReconcileRun) -> None:
        now = self._clock.now()
        for row in self._operations.listings.iter_attention(Flag.STUCK):
            if run.out_of_time():
                return
            kind = row.get("stuck_kind")
            if kind == StuckKind.UNDISPATCHED:
                self._resend_wait(str(row["operation_id"]), run)
                continue
            if kind not in (StuckKind.REOPENED, StuckKind.OVERDUE) or now - _listed_at(row) < self._redispatch_after:
                continue
            operation = self._operations.get(str(row["operation_id"]))
            if operation is None or operation.state not in STUCK_STATES or operation.state_record.lease_live(now):
                continue  # moved on, or a live lease's holder records its outcome (which clears the listing)
            self._redispatch.send(operation.state_record, operation, run, StuckKind(str(kind)))

    def _resend_wait(self, operation_id: str, run: ReconcileRun) -> None:
        """A wait whose resumption the worker could not send: sent for its time now, and listed under SCHEDULED
        again (the undispatched mark cleared). A relay's undispatched request is left to its kept failure."""
        operation = self._operations.get(operation_id)
        if operation is None or operation.state is not OperationState.SCHEDULED or not operation.state_record.waiting:
            return
        record = operation.state_record
        try:
            if self._delays is None:
                raise ConfigurationError("the reconciler has no delayed dispatch configured")
            envelope = self._dispatcher.envelope_for(operation)
            self._delays.send(self._dispatcher.outgoing(envelope), record.run_at or self._clock.now())
        except NotRunnable as exc:
            if self._operations.state.mark_stuck(record, StuckKind.UNRUNNABLE, str(exc)):
                count("stuck", job_type=operation.job_type)
            run.summary.unrunnable += 1
            return
        except Exception as exc:
            logger.warning("could not send a wait's resumption; the next run tries again", reason=describe(exc))
            return
        self._operations.state.clear_stuck(record)
        run.summary.resumptions_sent += 1
        run.summary.details.append({"source": "stuck", "operation_id": operation_id, "action": "resumption sent"})


def _listed_at(row: dict[str, Any]) -> float:
    """When an operation was listed (the time in its attention sort key)."""
    text = str(row.get("listed_at") or "")
    try:
        return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC).timestamp()
    except ValueError:
        return 0.0
