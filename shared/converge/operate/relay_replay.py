"""The reconciler's first pass: stream batches the relay gave up on, replayed.

The relay's on-failure destination. Lambda sends it the shard and sequence range of a stream batch the
relay gave up on (after its retries, or too old). Those records are read again from the stream and decided
as the relay would; requests whose operation is still absent or open (ACCEPTED, SCHEDULED, IN_PROGRESS) are
sent again, now if due, else deferred again through the same delayed-dispatch route (safe: a schedule's name
derived from the operation id makes a second creation a no-op, and the lease absorbs a duplicate message);
refusals and conflicts are recorded, and the message is deleted. A replay that fails part-way keeps the
message for the next run, and lists every not-yet-handled operation of the batch that is absent, ACCEPTED or
SCHEDULED under STUCK ("undispatched") with the reason; the summary counts only what was done. Records the
stream no longer holds (older than its 24 hours) cannot be recovered; the message stays, and the
relay-failures alarm keeps ringing.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from converge.flow.relay import Defer, Dispatch, Reject, Relay, RelayDecision, Skip
from converge.model.clock import iso
from converge.model.errors import StreamRecordsGone
from converge.model.records import StateRecord, Subject
from converge.model.request import envelope_fingerprints
from converge.model.states import OperationState, StuckKind
from converge.observability import count, logger
from converge.operate.reconcile_run import STUCK_STATES, ReconcileRun, fresh_messages
from converge.store.operations import OperationStore
from converge.store.streams import JobsStream


class RelayFailureReplay:
    """Reads the relay's failure queue (none configured: nothing to do) and replays each batch it names."""

    def __init__(
        self,
        relay: Relay,
        operations: OperationStore,
        sqs_client: Any,
        stream: JobsStream,
        failure_queue_url: str | None,
        wait_seconds: int,
    ) -> None:
        self._relay = relay
        self._operations = operations
        self._sqs = sqs_client
        self._stream = stream
        self._failure_url = failure_queue_url
        self._wait_seconds = wait_seconds

    def sweep(self, run: ReconcileRun) -> None:
        if not self._failure_url:
            return
        for message in fresh_messages(self._sqs, self._failure_url, run, self._wait_seconds):
            if self._replay(message, run):
                self._sqs.delete_message(QueueUrl=self._failure_url, ReceiptHandle=message["ReceiptHandle"])
                run.summary.relay_failures += 1
            else:
                run.release.append((self._failure_url, message["ReceiptHandle"]))
                run.summary.relay_failures_left += 1

    def _replay(self, message: dict[str, Any], run: ReconcileRun) -> bool:
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
        read: dict[str, StateRecord] = {}  # each operation's record read once for the batch (before it acts)

        def record_of(operation_id: str) -> StateRecord:
            if operation_id not in read:
                read[operation_id] = self._operations.state.record(operation_id)
            return read[operation_id]

        for record in records:  # first contents first: a replayed INSERT may come after a rewrite was read
            restored = self._relay.restore_first_content(record, record_of)
            if restored is not None:
                run.summary.details.append(
                    {"source": "relay_failure", "operation_id": restored, "action": "first content restored"}
                )
        decisions: list[RelayDecision] = []
        moved: set[str] = set()
        for record in records:
            decision = self._relay.decide(record)
            if isinstance(decision, Dispatch | Defer):
                decision = self._still_open(decision, moved, record_of)
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

    def _still_open(
        self, decision: Dispatch | Defer, moved: set[str], record_of: Callable[[str], StateRecord]
    ) -> RelayDecision:
        """The decision again if its operation is absent or open, else a skip (it moved on meanwhile). A restored
        first content changes an operation's fingerprint, never its state, so the batch's one read serves."""
        current = record_of(_operation_of(decision))
        if current.state not in STUCK_STATES:
            moved.add(decision.sequence)
            return Skip(decision.sequence, f"already {current.state.value}")
        return decision

    def _repaired(self, operation_id: str) -> None:
        """A replayed request sent or scheduled now: an earlier run's "undispatched" mark is no longer true."""
        current = self._operations.state.record(operation_id)
        if current.state in STUCK_STATES and current.stuck_kind == StuckKind.UNDISPATCHED:
            self._operations.state.clear_stuck(current)

    def _undispatched(self, decision: RelayDecision, why: str, run: ReconcileRun) -> None:
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
