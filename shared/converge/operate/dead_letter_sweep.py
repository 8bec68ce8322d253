"""The reconciler's second and third passes: what the worker DLQs and the schedules' DLQ hold.

2. The worker DLQs. A message there whose operation is still open (a crashed batch's neighbours burn
   their receives, a last attempt whose FAILED write failed, a delayed message that burned its receives
   at its run_at) means nothing will deliver it: the operation is listed under STUCK ("dead_lettered")
   with the reason, and the message is left for an operator's redrive (it may be a poison message;
   sending it again by itself could loop). One whose operation is SCHEDULED for a time still ahead (a
   request's run_at, a wait between two steps) is an early copy, superseded by the operation's own
   delivery still to come (`converge.operate.redrive_decision.superseded`): it is deleted, logged and
   counted (`dead_letters_superseded`), and the operation stays listed as it was (a copy of other content
   than the operation's is no copy of it: listed, as redrive refuses it).
3. The schedules' DLQ. A one-time schedule's firing that Scheduler could not deliver after its retries is
   a delivery failure, not a poison message: an operation still open is sent again from its stored
   request (the lease absorbs a duplicate), and the message is deleted; a settled one's is just deleted.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from converge.flow.dispatch import Dispatcher
from converge.flow.registry import Queue
from converge.model.clock import Clock
from converge.model.errors import InvalidMessage, NotRunnable, SendFailed
from converge.model.records import Subject
from converge.model.request import envelope_fingerprints
from converge.model.states import StuckKind
from converge.observability import count, logger
from converge.operate.deadletters import DlqRoute
from converge.operate.reconcile_run import STUCK_STATES, ReconcileRun, fresh_messages
from converge.operate.redrive_decision import superseded
from converge.screening.message import read_envelope
from converge.store.operations import OperationStore

MAX_DEAD_LETTERS = 1000
"""Dead letters examined per queue and run (the listing is cumulative: the next run goes on)."""


class WorkerDeadLetters:
    """Reads each worker queue's DLQ in turn: open operations listed, early copies deleted, the rest left."""

    def __init__(
        self,
        operations: OperationStore,
        sqs_client: Any,
        dead_letter_routes: Mapping[Queue, DlqRoute],
        clock: Clock,
        wait_seconds: int,
    ) -> None:
        self._operations = operations
        self._sqs = sqs_client
        self._routes = dict(dead_letter_routes)
        self._clock = clock
        self._wait_seconds = wait_seconds

    def sweep(self, run: ReconcileRun) -> None:
        for route in self._routes.values():
            self._dead_letters(route, run)

    def _dead_letters(self, route: DlqRoute, run: ReconcileRun) -> None:
        for message in fresh_messages(self._sqs, route.dlq_url, run, self._wait_seconds, MAX_DEAD_LETTERS):
            run.release.append((route.dlq_url, message["ReceiptHandle"]))  # left for the redrive, unless superseded
            run.summary.dead_letters_examined += 1
            self._dead_letter(route, message, run)

    def _dead_letter(self, route: DlqRoute, message: dict[str, Any], run: ReconcileRun) -> None:
        try:
            envelope = read_envelope(message.get("Body", ""))
        except InvalidMessage:
            return  # redrive reports malformed messages; there is no operation to list
        current = self._operations.state.record(envelope.operation_id)
        early = superseded(current, self._clock.now())
        if early is not None and current.fingerprint in (None, *envelope_fingerprints(envelope)):
            self._sqs.delete_message(QueueUrl=route.dlq_url, ReceiptHandle=message["ReceiptHandle"])
            run.release.remove((route.dlq_url, message["ReceiptHandle"]))
            logger.info("a superseded dead letter deleted", operation_id=envelope.operation_id, reason=early)
            if current.stuck_kind == StuckKind.DEAD_LETTERED:  # listed for such a copy: listed as it waits again
                self._operations.state.clear_stuck(current)
            run.summary.dead_letters_superseded += 1
            run.summary.details.append(
                {"source": "dlq", "operation_id": envelope.operation_id, "action": "deleted", "reason": early}
            )
            return
        if current.state not in STUCK_STATES or current.stuck_kind == StuckKind.DEAD_LETTERED:
            return
        error = message.get("MessageAttributes", {}).get("error_class", {}).get("StringValue") or "receives exhausted"
        reason = (
            f"its message is in the {route.queue.value} DLQ ({error}) while the operation is {current.state.value}; "
            f"redrive it: converge dlq redrive --queue {route.queue.value} --operation-id {envelope.operation_id}"
        )
        subject = Subject.of(envelope.operation_id, envelope.job_type, envelope_fingerprints(envelope))
        if self._operations.state.mark_stuck(current, StuckKind.DEAD_LETTERED, reason, subject=subject):
            run.summary.stuck_listed += 1
            # Per job type for the dashboard (SCHEMA(Converge, job_type, service)); the total below is the alarm's.
            count("stuck", job_type=envelope.job_type)
            run.summary.details.append(
                {"source": "dlq", "operation_id": envelope.operation_id, "action": "listed", "reason": reason}
            )


class UndeliveredFirings:
    """Reads the schedules' DLQ (none configured: nothing to do): each firing's open operation sent again."""

    def __init__(
        self,
        operations: OperationStore,
        dispatcher: Dispatcher,
        sqs_client: Any,
        schedule_dlq_url: str | None,
        wait_seconds: int,
    ) -> None:
        self._operations = operations
        self._dispatcher = dispatcher
        self._sqs = sqs_client
        self._schedule_dlq_url = schedule_dlq_url
        self._wait_seconds = wait_seconds

    def sweep(self, run: ReconcileRun) -> None:
        url = self._schedule_dlq_url
        if not url:
            return
        for message in fresh_messages(self._sqs, url, run, self._wait_seconds, MAX_DEAD_LETTERS):
            run.summary.failed_firings += 1
            if self._failed_firing(message, run):
                self._sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
            else:
                run.release.append((url, message["ReceiptHandle"]))

    def _failed_firing(self, message: dict[str, Any], run: ReconcileRun) -> bool:
        """Send the operation of an undelivered firing again if it is still open; True when the message is done."""
        try:
            envelope = read_envelope(message.get("Body", ""))
        except InvalidMessage:
            logger.error("unreadable schedule dead letter; deleted (it carries no operation)")
            return True
        operation = self._operations.get(envelope.operation_id)
        if operation is None or operation.state not in STUCK_STATES:
            return True  # settled, paused (the resumer's) or gone: the firing's copy would be a no-op
        attributes = message.get("MessageAttributes", {})
        error = attributes.get("ERROR_CODE", {}).get("StringValue") or "delivery failed"
        try:
            self._dispatcher.send_one(self._dispatcher.outgoing(self._dispatcher.envelope_for(operation)))
        except NotRunnable as exc:
            if self._operations.state.mark_stuck(operation.state_record, StuckKind.UNRUNNABLE, str(exc)):
                count("stuck", job_type=operation.job_type)
            run.summary.unrunnable += 1
            return True
        except SendFailed:
            logger.warning("could not send an undelivered firing's operation; the next run tries again")
            return False
        detail = {"source": "schedule_dlq", "operation_id": operation.operation_id, "action": "redispatched"}
        run.summary.details.append({**detail, "reason": error})
        return True
