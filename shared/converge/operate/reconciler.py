"""The reconciler: open operations that nothing will move on, found at the cost of what it finds.

No operation is ever invisible: one that is not final is in flight within a deadline, or listed
under STUCK with the reason. The reconciler runs on a schedule and reads five small sources,
never the tables:

1. The relay's on-failure destination. Lambda sends it the shard and sequence range of a stream
   batch the relay gave up on (after its retries, or too old). Those records are read again from
   the stream and decided as the relay would; requests whose operation is still absent or open
   (ACCEPTED, SCHEDULED, IN_PROGRESS) are sent again, now if due, else deferred again through the
   same delayed-dispatch route (safe: a schedule's name derived from the operation id makes a second
   creation a no-op, and the lease absorbs a duplicate message); refusals and conflicts are recorded,
   and the message is deleted. A replay that fails part-way keeps the message for the next run, and
   lists every not-yet-handled operation of the batch that is absent, ACCEPTED or SCHEDULED under STUCK
   ("undispatched") with the reason; the summary counts only what was done. Records the stream no
   longer holds (older than its 24 hours) cannot be recovered; the message stays, and the
   relay-failures alarm keeps ringing.
2. The worker DLQs. A message there whose operation is still open (a crashed batch's neighbours
   burn their receives, a last attempt whose FAILED write failed, a delayed message that burned its
   receives at its run_at) means nothing will deliver it: the operation is listed under STUCK
   ("dead_lettered") with the reason, and the message is left for an operator's redrive (it may be a
   poison message; sending it again by itself could loop). One whose operation is SCHEDULED for a time
   still ahead (a request's run_at, a wait between two steps) is an early copy, superseded by the
   operation's own delivery still to come (`converge.operate.redrive_decision.superseded`): it is
   deleted, logged and counted (`dead_letters_superseded`), and the operation stays listed as it was
   (a copy of other content than the operation's is no copy of it: listed, as redrive refuses it).
3. The schedules' DLQ. A one-time schedule's firing that Scheduler could not deliver after its
   retries is a delivery failure, not a poison message: an operation still open is sent again from
   its stored request (the lease absorbs a duplicate), and the message is deleted; a settled one's
   is just deleted.
4. The schedule index. A SCHEDULED operation whose run_at passed more than `OVERDUE_GRACE_SECONDS`
   ago has lost its message or its schedule (receives burned, a firing dropped, a schedule deleted):
   it is sent again from its stored request and listed under STUCK ("overdue") until a worker takes
   it. The index holds listed operations by run_at, so this is one key range: what it finds.
5. The STUCK listing. An operation an operator sent back to its queue (redrive, resolve retry), or
   an overdue one sent again, is listed under STUCK ("reopened", "overdue") until a worker takes it;
   one still there after `redispatch_after` seconds is dispatched again from its stored request. An
   operation waiting between two steps whose resumption could not be sent ("undispatched", listed by
   the worker) is sent again on each run, from its stored request for its time, and listed under
   SCHEDULED again once it is out.
6. Batches not complete (`converge.flow.batches`, a Scan of the batches table's records filtered on the
   server). One whose children are all final and whose callback is missing (the look after its last child
   was lost) gets its callback, through the same conditional transaction as any look: exactly once. One
   that cannot finish by itself is listed with the reason on its record (`converge batches list
   --attention`): an admission stopped halfway (the manifest's children are not stored, so only the
   producer can finish it), children UNKNOWN, or children listed under STUCK or PAUSED (found in those
   listings).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from converge.flow.batches import Batches
from converge.flow.delays import DelayedDispatch
from converge.flow.dispatch import Dispatcher
from converge.flow.registry import Queue
from converge.flow.relay import Defer, Dispatch, Reject, Relay, RelayDecision, Skip
from converge.model.batches import parse_child
from converge.model.clock import Clock, SystemClock, iso
from converge.model.errors import ConfigurationError, InvalidMessage, NotRunnable, SendFailed, StreamRecordsGone
from converge.model.outcomes import describe
from converge.model.records import StateRecord, Subject
from converge.model.request import envelope_fingerprints
from converge.model.states import Flag, OperationState, StuckKind
from converge.observability import count, logger
from converge.operate.deadletters import DlqRoute, receive, release
from converge.operate.redrive_decision import superseded
from converge.screening.message import read_envelope
from converge.store.operations import OperationStore
from converge.store.streams import JobsStream

REDISPATCH_AFTER_SECONDS = 1800
"""How long a reopened operation may wait for a worker before it is sent again (a lease lasts at most ~15 min)."""
MAX_DEAD_LETTERS = 1000
"""Dead letters examined per queue and run (the listing is cumulative: the next run goes on)."""
TIME_MARGIN_MS = 10_000
HIDE_SECONDS = 60
STUCK_STATES = frozenset({OperationState.ACCEPTED, OperationState.SCHEDULED, OperationState.IN_PROGRESS})
"""Open states nothing moves on by itself once the message is gone (PAUSED is the resumer's, and listed).
SCHEDULED is one of them: its message or schedule is all that will start it."""
OVERDUE_GRACE_SECONDS = 3600
"""How long past its run_at a SCHEDULED operation may be in flight: SQS's delay is exact and a schedule
fires at its time (no flexible window), but Scheduler retries a failed delivery for up to 15 minutes
(`converge.flow.delays.RETRY_POLICY`), the reconciler reads the schedules' DLQ only every 5 minutes, and a busy
queue's backlog delays the start; an hour covers all of it with room. A false alarm costs one duplicate
message, which the lease absorbs."""
MAX_OVERDUE = 200
"""Overdue operations sent again per run (earliest first); the next run goes on with the rest."""


@dataclass
class ReconcileSummary:
    relay_failures: int = 0
    redispatched: int = 0
    already_moved: int = 0
    relay_failures_left: int = 0
    dead_letters_examined: int = 0
    dead_letters_superseded: int = 0
    stuck_listed: int = 0
    reopened_redispatched: int = 0
    undispatched_listed: int = 0
    failed_firings: int = 0
    overdue_redispatched: int = 0
    resumptions_sent: int = 0
    unrunnable: int = 0
    batches_examined: int = 0
    batch_callbacks_written: int = 0
    batch_admissions_stopped: int = 0
    batches_listed: int = 0
    incomplete: bool = False
    details: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {name: value for name, value in vars(self).items()}


@dataclass
class _Run:
    summary: ReconcileSummary
    remaining_ms: Callable[[], int] | None
    release: list[tuple[str, str]] = field(default_factory=list)

    def out_of_time(self) -> bool:
        late = self.remaining_ms is not None and self.remaining_ms() < TIME_MARGIN_MS
        self.summary.incomplete = self.summary.incomplete or late
        return late


class Reconciler:
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
        self._relay = relay
        self._operations = operations
        self._dispatcher = dispatcher
        self._sqs = sqs_client
        self._stream = stream
        self._failure_url = failure_queue_url
        self._routes = dict(dead_letter_routes)
        self._clock = clock or SystemClock()
        self._redispatch_after = redispatch_after
        self._wait_seconds = wait_seconds
        self._schedule_dlq_url = schedule_dlq_url
        self._delays = delays
        self._batches = batches

    def handle(self, event: Any, context: Any = None) -> dict[str, Any]:
        """The reconciler function's handler: one run, within the invocation's time (`context`: the Lambda
        context; None: no deadline)."""
        summary = self.run(context.get_remaining_time_in_millis if context is not None else None)
        logger.info("reconciler finished", **{k: v for k, v in summary.to_json().items() if k != "details"})
        return summary.to_json()

    def run(self, remaining_ms: Callable[[], int] | None = None) -> ReconcileSummary:
        run = _Run(ReconcileSummary(), remaining_ms)
        try:
            self._relay_failures(run)
            for route in self._routes.values():
                self._dead_letters(route, run)
            self._failed_firings(run)
            self._overdue(run)
            self._reopened(run)
            self._unfinished_batches(run)
        finally:
            release(self._sqs, run.release)
        if run.summary.stuck_listed:
            count("stuck", value=run.summary.stuck_listed)
        return run.summary

    # -- 1. stream batches the relay gave up on ---------------------------------------------------------------

    def _relay_failures(self, run: _Run) -> None:
        if not self._failure_url:
            return
        seen: set[str] = set()
        while not run.out_of_time():
            messages = receive(self._sqs, self._failure_url, 10, HIDE_SECONDS, self._wait_seconds)
            fresh = [message for message in messages if message["MessageId"] not in seen]
            run.release += [(self._failure_url, m["ReceiptHandle"]) for m in messages if m not in fresh]
            if not fresh:
                return
            for message in fresh:
                seen.add(message["MessageId"])
                if self._replay(message, run):
                    self._sqs.delete_message(QueueUrl=self._failure_url, ReceiptHandle=message["ReceiptHandle"])
                    run.summary.relay_failures += 1
                else:
                    run.release.append((self._failure_url, message["ReceiptHandle"]))
                    run.summary.relay_failures_left += 1

    def _replay(self, message: dict[str, Any], run: _Run) -> bool:
        """Decide the batch's records again and act on them; True when every one is handled."""
        try:
            info = json.loads(message.get("Body", ""))["DDBStreamBatchInfo"]
            records = self._stream.records(info)
        except (ValueError, KeyError, TypeError) as exc:
            logger.error("unreadable relay failure record; left in its queue", reason=str(exc))
            return False
        except StreamRecordsGone as exc:
            logger.error("a relay failure's records are gone from the stream; left in its queue", reason=str(exc))
            run.summary.details.append({"source": "relay_failure", "action": "left", "reason": str(exc)})
            return False
        decisions: list[RelayDecision] = []
        moved: set[str] = set()
        for record in records:
            decision = self._relay.decide(record)
            if isinstance(decision, Dispatch | Defer):
                decision = self._still_open(decision, moved)
            decisions.append(decision)
        failed = self._relay.act(decisions)
        done = len(decisions) if failed is None else _position(decisions, failed)
        # Only what was carried out counts: the decisions before the first that could not be.
        for decision in decisions[:done]:
            if isinstance(decision, Dispatch | Defer):
                operation_id = _operation_of(decision)
                self._repaired(operation_id)
                run.summary.redispatched += 1
                run.summary.details.append(
                    {"source": "relay_failure", "operation_id": operation_id, "action": "redispatched"}
                )
            elif decision.sequence in moved:
                run.summary.already_moved += 1
        if failed is None:
            return True
        why = self._relay.last_failure or "an AWS error"
        for decision in decisions[done:]:
            self._undispatched(decision, why, run)
        return False

    def _still_open(self, decision: Dispatch | Defer, moved: set[str]) -> RelayDecision:
        """The decision again if its operation is absent or open, else a skip (it moved on meanwhile)."""
        current = self._operations.state.record(_operation_of(decision))
        if current.state not in STUCK_STATES:
            moved.add(decision.sequence)
            return Skip(decision.sequence, f"already {current.state.value}")
        return decision

    def _repaired(self, operation_id: str) -> None:
        """A replayed request sent or scheduled now: an earlier run's "undispatched" mark is no longer true."""
        current = self._operations.state.record(operation_id)
        if current.state in STUCK_STATES and current.stuck_kind == StuckKind.UNDISPATCHED:
            self._operations.state.clear_stuck(current)

    def _undispatched(self, decision: RelayDecision, why: str, run: _Run) -> None:
        """A request of a failed replay that nothing may have sent: listed under STUCK if absent, ACCEPTED or
        SCHEDULED (the replay may have recorded SCHEDULED and then failed to create its schedule: nothing would
        list it before its run_at and the overdue grace). Any other state is on its way or settled."""
        subject = _subject_of(decision)
        if subject is None:
            return
        current = self._operations.state.record(subject.operation_id)
        if current.state not in (OperationState.ACCEPTED, OperationState.SCHEDULED):
            return
        reason = (
            f"the relay could not dispatch it, and replaying its stream batch failed too ({why}); "
            "the reconciler tries again on each run (the relay failure is kept): if it stays, see the "
            "reconciler's log and the relay-failures alarm"
        )
        if self._operations.state.mark_stuck(current, StuckKind.UNDISPATCHED, reason, subject=subject):
            run.summary.stuck_listed += 1
            run.summary.undispatched_listed += 1
            count("stuck", job_type=subject.job_type)
            run.summary.details.append(
                {"source": "relay_failure", "operation_id": subject.operation_id, "action": "listed", "reason": reason}
            )

    # -- 2. dead letters of open operations -------------------------------------------------------------------

    def _dead_letters(self, route: DlqRoute, run: _Run) -> None:
        seen: set[str] = set()
        while len(seen) < MAX_DEAD_LETTERS and not run.out_of_time():
            messages = receive(self._sqs, route.dlq_url, 10, HIDE_SECONDS, self._wait_seconds)
            run.release += [(route.dlq_url, message["ReceiptHandle"]) for message in messages]
            fresh = [message for message in messages if message["MessageId"] not in seen]
            if not fresh:
                return
            for message in fresh:
                seen.add(message["MessageId"])
                run.summary.dead_letters_examined += 1
                self._dead_letter(route, message, run)

    def _dead_letter(self, route: DlqRoute, message: dict[str, Any], run: _Run) -> None:
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

    # -- 3. reopened operations no worker took ----------------------------------------------------------------

    def _unfinished_batches(self, run: _Run) -> None:
        """6. Batches that cannot finish by themselves: a missing callback written, the rest listed with why."""
        if self._batches is None or run.out_of_time():
            return
        held: dict[str, dict[str, list[str]]] = {}
        for key in (Flag.STUCK.value, OperationState.PAUSED.value):
            for row in self._operations.listings.iter_attention(key):
                child = parse_child(str(row.get("operation_id", "")))
                if child is not None:
                    held.setdefault(child.batch_id, {}).setdefault(key, []).append(str(row["operation_id"]))
        found = self._batches.reconcile(held, run.out_of_time)
        run.summary.batches_examined += found.examined
        run.summary.batch_callbacks_written += found.callbacks_written
        run.summary.batch_admissions_stopped += found.admissions_stopped
        run.summary.batches_listed += found.listed
        run.summary.details.extend(found.details)

    def _reopened(self, run: _Run) -> None:
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
            self._redispatch(operation.state_record, operation, run, StuckKind(str(kind)))

    def _resend_wait(self, operation_id: str, run: _Run) -> None:
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

    # -- 3. schedule firings Scheduler could not deliver --------------------------------------------------------

    def _failed_firings(self, run: _Run) -> None:
        url = self._schedule_dlq_url
        seen: set[str] = set()
        while url and len(seen) < MAX_DEAD_LETTERS and not run.out_of_time():
            messages = receive(self._sqs, url, 10, HIDE_SECONDS, self._wait_seconds)
            fresh = [message for message in messages if message["MessageId"] not in seen]
            run.release += [(url, m["ReceiptHandle"]) for m in messages if m not in fresh]
            if not fresh:
                return
            for message in fresh:
                seen.add(message["MessageId"])
                run.summary.failed_firings += 1
                if self._failed_firing(message, run):
                    self._sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
                else:
                    run.release.append((url, message["ReceiptHandle"]))

    def _failed_firing(self, message: dict[str, Any], run: _Run) -> bool:
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

    # -- 4. SCHEDULED operations long past their run_at ---------------------------------------------------------

    def _overdue(self, run: _Run) -> None:
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
            self._redispatch(operation.state_record, operation, run, StuckKind.OVERDUE, why)

    def _redispatch(
        self, record: StateRecord, operation: Any, run: _Run, kind: StuckKind = StuckKind.REOPENED, why: str = ""
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


def _listed_at(row: dict[str, Any]) -> float:
    """When an operation was listed (the time in its attention sort key)."""
    text = str(row.get("listed_at") or "")
    try:
        return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC).timestamp()
    except ValueError:
        return 0.0


def _position(decisions: list[RelayDecision], sequence: str) -> int:
    """Where the first decision not carried out stands (`Relay.act` names it by its sequence number)."""
    return next((index for index, decision in enumerate(decisions) if decision.sequence == sequence), len(decisions))


def _operation_of(decision: Dispatch | Defer) -> str:
    return decision.outgoing.envelope.operation_id if isinstance(decision, Dispatch) else decision.subject.operation_id


def _subject_of(decision: RelayDecision) -> Subject | None:
    """What a not-yet-handled decision knows of its operation (None: it concerns none to list)."""
    if isinstance(decision, Defer | Reject):
        return decision.subject
    if isinstance(decision, Dispatch):
        outgoing = decision.outgoing
        accepted = iso(outgoing.accepted_at) if outgoing.accepted_at is not None else None
        envelope = outgoing.envelope
        return Subject.of(envelope.operation_id, envelope.job_type, envelope_fingerprints(envelope), accepted)
    return None
