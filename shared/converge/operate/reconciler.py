"""The reconciler: open operations that nothing will move on, found at the cost of what it finds.

No operation is ever invisible: one that is not final is in flight within a deadline, or listed
under STUCK with the reason. The reconciler runs on a schedule and makes six passes, in this order,
each over a small source (never a Scan of the operations' tables), within one run's time budget
and into one summary (`converge.operate.reconcile_run`):

1. the relay's on-failure destination: stream batches the relay gave up on, replayed
   (`converge.operate.relay_replay`);
2. the worker DLQs: open operations listed under STUCK, early copies deleted
   (`converge.operate.dead_letter_sweep`);
3. the schedules' DLQ: undelivered firings' open operations sent again (`converge.operate.dead_letter_sweep`);
4. the schedule index: SCHEDULED operations long past their run_at sent again (`converge.operate.overdue`);
5. the STUCK listing: reopened and overdue operations no worker took sent again, and waits whose
   resumption could not be sent given it (`converge.operate.overdue`);
6. batches not complete: a missing callback written, the rest listed with the reason
   (`converge.operate.unfinished_batches`).

Each pass module says what its source is and what it does with each thing it finds.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from converge.flow.batches import Batches
from converge.flow.delays import DelayedDispatch
from converge.flow.dispatch import Dispatcher
from converge.flow.registry import Queue
from converge.flow.relay import Relay
from converge.model.clock import Clock, SystemClock
from converge.observability import count, logger
from converge.operate.dead_letter_sweep import UndeliveredFirings, WorkerDeadLetters
from converge.operate.deadletters import DlqRoute, release
from converge.operate.overdue import REDISPATCH_AFTER_SECONDS, OverdueWork, Redispatch, ReopenedWork
from converge.operate.reconcile_run import ReconcilePass, ReconcileRun, ReconcileSummary
from converge.operate.relay_replay import RelayFailureReplay
from converge.operate.unfinished_batches import UnfinishedBatches
from converge.store.operations import OperationStore
from converge.store.streams import JobsStream

__all__ = ["ReconcileSummary", "Reconciler"]


class Reconciler:
    """One reconciler run's passes, in order, over one time budget and into one summary (see the module)."""

    def __init__(
        self,
        relay: Relay,
        operations: OperationStore,
        dispatcher: Dispatcher,
        sqs_client: Any,
        stream: JobsStream,
        failure_queue_url: str | None,
        dead_letter_routes: Mapping[Queue, DlqRoute],
        clock: Clock | None = None,
        redispatch_after: float = REDISPATCH_AFTER_SECONDS,
        wait_seconds: int = 1,
        schedule_dlq_url: str | None = None,
        delays: DelayedDispatch | None = None,
        batches: Batches | None = None,
    ) -> None:
        self._sqs = sqs_client
        clock = clock or SystemClock()
        redispatch = Redispatch(operations, dispatcher, clock)
        self._passes: tuple[ReconcilePass, ...] = (
            RelayFailureReplay(relay, operations, sqs_client, stream, failure_queue_url, wait_seconds),
            WorkerDeadLetters(operations, sqs_client, dead_letter_routes, clock, wait_seconds),
            UndeliveredFirings(operations, dispatcher, sqs_client, schedule_dlq_url, wait_seconds),
            OverdueWork(operations, redispatch, clock),
            ReopenedWork(operations, dispatcher, redispatch, clock, redispatch_after, delays),
            UnfinishedBatches(operations, batches),
        )

    def handle(self, event: Any, context: Any = None) -> dict[str, Any]:
        """The reconciler function's handler: one run, within the invocation's time (`context`: the Lambda
        context; None: no deadline)."""
        summary = self.run(context.get_remaining_time_in_millis if context is not None else None)
        logger.info("reconciler finished", **{k: v for k, v in summary.to_json().items() if k != "details"})
        return summary.to_json()

    def run(self, remaining_ms: Callable[[], int] | None = None) -> ReconcileSummary:
        run = ReconcileRun(ReconcileSummary(), remaining_ms)
        try:
            for reconcile_pass in self._passes:  # in the order of the list above
                reconcile_pass.sweep(run)
        finally:
            release(self._sqs, run.release)
        if run.summary.stuck_listed:
            count("stuck", value=run.summary.stuck_listed)
        return run.summary
