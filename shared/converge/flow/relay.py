"""The outbox relay: the jobs table's stream (new and old images of each request) to the SQS queues.

Each record is first decided, with no I/O, then acted on, in stream order:

* INSERT of a usable request: dispatched to its job's queue (the happy path writes nothing);
* INSERT of a request with a future `run_at`: SCHEDULED on the state record (listed, with its time),
  then sent with a message delay or through a one-time schedule (`converge.flow.delays`);
* INSERT of an item converge cannot use (unknown job type, invalid payload, a binary value, a type
  it cannot read, an oversized payload): REJECTED on the state record, with the reason;
* MODIFY with the same content (a producer's retried PutItem): nothing, the operation is untouched;
* MODIFY with other content: an identity conflict, recorded on the operation's receipt and listed
  under CONFLICT; nothing is dispatched, and the original request is what runs;
* REMOVE: nothing (a deleted request does not touch its operation; the stream's filter passes only INSERT and
  MODIFY, so neither a producer's delete nor a time-to-live deletion reaches here);
* INSERT under a batch child's or a batch callback's id: as above if its batch wrote it, else REJECTED with the
  reason and counted on no batch (`converge.flow.reserved_ids`: ids with "::" are the batches' own);
* INSERT or MODIFY of a signal item ("<operation id>::signal:<name>:<signal id>", `converge.store.signal_items`),
  whatever else it holds: never a request. Sent as every signal is (`converge.flow.signals`), and its answer
  recorded on the record under the item's key (SUCCEEDED when kept, else REJECTED with why, listed); one converge
  cannot read is answered `invalid` there. A rewrite with the same content is nothing; with another, it is sent
  again (the same signal id: `duplicate`, its first payload stands) and that answer is appended to the record.

A record never fails for what is in it; only an AWS error (SQS, DynamoDB) makes the relay report a
batch item failure, and it reports the first record it could not handle and sends nothing after it,
so that the stream's retry, which resumes at that record, sends nothing twice.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from converge.flow.admission import normalized_payload
from converge.flow.delays import DelayedDispatch, Route
from converge.flow.dispatch import Dispatcher, Outgoing
from converge.flow.registry import Registry
from converge.flow.reserved_ids import ReservedIds
from converge.flow.settlement import Settlement
from converge.flow.signals import Signals
from converge.model.batches import batch_form
from converge.model.clock import Clock, SystemClock, iso
from converge.model.errors import ConfigurationError, InvalidMessage, UnusableRequest
from converge.model.outcomes import describe
from converge.model.records import ConflictEntry, Refused, StateRecord, Subject
from converge.model.request import JobRequest
from converge.model.settling import Settling
from converge.model.signals import INVALID_ITEM, signal_form
from converge.model.states import OperationState
from converge.model.submission import SignalSubmission
from converge.model.timing import Timing
from converge.observability import count, logger
from converge.screening.limits import check_request_item
from converge.screening.message import check_identifier
from converge.store.codecs import (
    content_fingerprint,
    image_job_type,
    image_operation_id,
    request_from_image,
    same_content,
)
from converge.store.signal_items import same_signal, signal_from_image
from converge.store.state import StateTable

IGNORED_SHOWN = 10
UNREADABLE = "(unreadable)"
"""The job type a conflict or a refusal records for an item whose job type is not a string."""


@dataclass(frozen=True)
class Dispatch:
    sequence: str
    outgoing: Outgoing


@dataclass(frozen=True)
class Defer:
    """A request due later: recorded SCHEDULED, then sent to wait for its run_at."""

    sequence: str
    subject: Subject
    outgoing: Outgoing
    run_at: float


@dataclass(frozen=True)
class Reject:
    sequence: str
    subject: Subject
    reason: str


@dataclass(frozen=True)
class Conflict:
    sequence: str
    operation_id: str
    entry: ConflictEntry
    original_fingerprint: str
    original: JobRequest | None


@dataclass(frozen=True)
class Skip:
    sequence: str
    why: str


@dataclass(frozen=True)
class Reserved:
    """A request under a batch child's or a batch callback's id: carried out (`then`) only if its batch wrote it
    (`converge.flow.reserved_ids`), else REJECTED with the reason and counted on no batch."""

    sequence: str
    subject: Subject
    then: Dispatch | Defer


@dataclass(frozen=True)
class SignalItem:
    """A signal a producer wrote into the jobs table: sent (`signal`, from `jobs-table`), or answered `invalid` with
    why (`invalid`); its answer recorded on the record under the item's key."""

    sequence: str
    item_id: str
    at: str
    signal: SignalSubmission | None
    invalid: str = ""
    rewrite: bool = False


RelayDecision = Dispatch | Defer | Reject | Conflict | Skip | Reserved | SignalItem


class Relay:
    """The jobs table's stream to the queues: each record decided (no I/O), then carried out in stream order."""

    def __init__(
        self,
        *,
        registry: Registry,
        state: StateTable,
        dispatcher: Dispatcher,
        settlement: Settlement,
        reserved: ReservedIds | None = None,
        delays: DelayedDispatch | None = None,
        signals: Signals | None = None,
        clock: Clock | None = None,
    ) -> None:
        self._signals = signals
        """Sends the signals producers write as items (None: no markers table, and such an item fails the batch)."""
        self._settlement = settlement
        """Writes a rejection with its extensions' items (a batch's count of its child)."""
        self._reserved = reserved
        """Whether a request under a batch's id is one its batch wrote (None: no batches)."""
        self._registry = registry
        self._state = state
        self._dispatcher = dispatcher
        self._clock = clock or SystemClock()
        self._delays = delays
        self.last_failure: str | None = None
        """Why the last `act` stopped short (None when it carried everything out)."""

    def handle(self, event: dict[str, Any], context: Any = None) -> dict[str, Any]:
        """The relay function's handler: a stream batch in, its partial batch response out."""
        failed = self.act([self.decide(record) for record in event.get("Records") or []])
        return {"batchItemFailures": [{"itemIdentifier": failed}] if failed is not None else []}

    # -- deciding (no I/O) -----------------------------------------------------------------------------------

    def decide(self, record: dict[str, Any]) -> RelayDecision:
        """What to do with one stream record; never raises for what the record holds."""
        dynamodb = record.get("dynamodb") or {}
        sequence = str(dynamodb.get("SequenceNumber", ""))
        event_name = record.get("eventName")
        if event_name not in ("INSERT", "MODIFY"):
            return Skip(sequence, f"{event_name}: a deleted request does not touch its operation")
        new, old = dynamodb.get("NewImage"), dynamodb.get("OldImage")
        if not isinstance(new, dict) or "operation_id" not in new:
            return Skip(sequence, "the record carries no new image")
        # A rewrite is compared by fingerprint (one linear pass); an admission is validated size first.
        at = _seconds(dynamodb.get("ApproximateCreationDateTime")) or self._clock.now()
        if signal_form(image_operation_id(new)):  # a signal item is never a request, whatever it holds
            return self._signal_item(sequence, new, old if event_name == "MODIFY" else None, at)
        if event_name == "MODIFY" and isinstance(old, dict):
            if same_content(old, new):
                count("producer_rewrite_same")
                return Skip(sequence, "the same request written again: a no-op")
            return self._conflict(sequence, old, new, at)
        return self._admission(sequence, new, at)

    def _signal_item(self, sequence: str, new: dict[str, Any], old: dict[str, Any] | None, at: float) -> RelayDecision:
        rewrite = isinstance(old, dict)
        if isinstance(old, dict) and same_signal(old, new):
            count("signal_item_rewrite_same")
            return Skip(sequence, "the same signal item written again: a no-op")
        item_id = image_operation_id(new)
        try:
            key, payload = signal_from_image(new)
        except InvalidMessage as exc:
            return SignalItem(sequence, item_id, iso(at), None, str(exc), rewrite)
        signal = SignalSubmission(key.operation_id, key.name, payload, key.signal_id, sent_by="jobs-table")
        return SignalItem(sequence, item_id, iso(at), signal, "", rewrite)

    def _admission(self, sequence: str, image: dict[str, Any], at: float) -> RelayDecision:
        try:
            request, outgoing = self._validated(image, at)
            timing = Timing.parse(request.run_at, request.expires_at)
            timing.check(self._clock.now(), admitting=False)
        except ConfigurationError:
            raise  # the deployment, not the item: fail the batch so it is retried once it is fixed
        except Exception as exc:
            # Anything a producer wrote that converge cannot use ends REJECTED with the reason.
            return Reject(sequence, _subject(image, at), describe(exc))
        self._note_ignored(request)
        then: Dispatch | Defer = Dispatch(sequence, outgoing)
        if timing.run_at is not None and timing.delay(self._clock.now()) > 0:
            then = Defer(sequence, _subject(image, at), outgoing, timing.run_at)
        if self._reserved is not None and batch_form(request.operation_id):
            return Reserved(sequence, _subject(image, at), then)
        return then

    def _validated(self, image: dict[str, Any], at: float) -> tuple[JobRequest, Outgoing]:
        """The boundary's checks, size first: the request, and where it goes; raises for an unusable item."""
        check_request_item(image)  # size first: a raw item sized to make a validator slow is refused here
        request = request_from_image(image)
        check_identifier("operation_id", request.operation_id)
        if request.correlation_id is not None:
            check_identifier("correlation_id", request.correlation_id)
        normalized_payload(self._registry, request.job_type, request.payload)
        return request, self._dispatcher.outgoing(request.envelope(), accepted_at=at)

    def _conflict(self, sequence: str, old: dict[str, Any], new: dict[str, Any], at: float) -> RelayDecision:
        entry = ConflictEntry(
            at=iso(at),
            fingerprint=content_fingerprint(new),
            job_type=image_job_type(new, UNREADABLE),
            source="jobs table: a producer wrote other content under this operation id",
        )
        return Conflict(sequence, image_operation_id(new), entry, content_fingerprint(old), self._runnable(old, at))

    def restore_first_content(
        self, record: dict[str, Any], read: Callable[[str], StateRecord] | None = None
    ) -> str | None:
        """An INSERT replayed after newer records (its batch given up, then replayed by the reconciler): its new
        image is the operation's first content, whatever a rewrite read before it pinned, taking its old image
        for the first (`StateTable.restore_first_content`). The operation's id when it was restored. `read` gives
        the operation's record as the caller already read it (default: read here)."""
        dynamodb = record.get("dynamodb") or {}
        new = dynamodb.get("NewImage")
        if record.get("eventName") != "INSERT" or not isinstance(new, dict) or "operation_id" not in new:
            return None
        operation_id = image_operation_id(new)
        if signal_form(operation_id):
            return None  # a signal item: its record is its answer, never a request's content
        pinned = (read or self._state.record)(operation_id).fingerprint
        if pinned is None or pinned in _fingerprints(new):
            return None
        source = "jobs table: a later write, read before the request's first (its stream batch was replayed late)"
        later = ConflictEntry(iso(self._clock.now()), pinned, image_job_type(new, UNREADABLE), source)
        at = _seconds(dynamodb.get("ApproximateCreationDateTime")) or self._clock.now()
        if not self._state.restore_first_content(
            operation_id, content_fingerprint(new), self._runnable(new, at), later
        ):
            return None
        count("first_content_restored")
        logger.warning(
            "a later write's content was pinned before the first; the first restored", operation_id=operation_id
        )
        return operation_id

    def _runnable(self, image: dict[str, Any], at: float) -> JobRequest | None:
        """The request an image holds, if it is one the relay would have dispatched."""
        try:
            return self._validated(image, at)[0]
        except ConfigurationError:
            raise
        except Exception:
            return None

    @staticmethod
    def _note_ignored(request: JobRequest) -> None:
        if request.ignored:
            count("ignored_attributes")
            logger.warning(
                "undocumented attributes on a producer's item are ignored",
                operation_id=request.operation_id,
                attributes=list(request.ignored[:IGNORED_SHOWN]),
            )

    # -- acting, in stream order -----------------------------------------------------------------------------

    def act(self, decisions: list[RelayDecision]) -> str | None:
        """Carry the decisions out in order; the sequence number of the first that could not be, or None.

        Consecutive dispatches go out together (ten a call per queue); a write (REJECTED, a conflict)
        waits for the dispatches before it, so nothing after a failure has been done.
        """
        self.last_failure = None
        pending: list[Dispatch] = []
        for decision in decisions:
            if isinstance(decision, Dispatch):
                pending.append(decision)
                continue
            failed = self._flush(pending)
            pending = []
            if failed is not None:
                return failed
            try:
                if isinstance(decision, Reserved):
                    vouched = self._vouched(decision)
                    if isinstance(vouched, Dispatch):
                        pending.append(vouched)
                        continue
                    decision = vouched  # what the request under a batch's id turned out to be
                self._record(decision)
            except Exception as exc:
                logger.exception("could not record a relay decision; the stream will retry from it")
                self.last_failure = describe(exc)
                return decision.sequence
        return self._flush(pending)

    def _flush(self, pending: list[Dispatch]) -> str | None:
        if not pending:
            return None
        index = self._dispatcher.send([decision.outgoing for decision in pending])
        if index is None:
            count("relayed", value=len(pending))
            return None
        logger.warning("dispatch failed; the stream will retry from the first record not sent", unsent=len(pending))
        self.last_failure = "SQS did not take the message (SendMessageBatch failed after its inline retries)"
        return pending[index].sequence

    def _vouched(self, decision: Reserved) -> Dispatch | Defer | Reject:
        """What to do with a request under a batch's id: as any request if its batch wrote it, else REJECTED."""
        assert self._reserved is not None  # a Reserved decision is made only with batches configured
        why = self._reserved.refusal(decision.subject.operation_id)
        if why is None:
            return decision.then
        count("reserved_id_refused")
        logger.error("a request under a batch's id that its batch did not write", reason=why)
        return Reject(decision.sequence, decision.subject, f"refused: {why}")

    def _reject(self, decision: Reject) -> None:
        """REJECTED through the settlement (a batch's child is counted by the batch counter, from the state table's
        stream; one its batch never wrote, nowhere)."""
        subject = decision.subject
        settling = Settling(subject.operation_id, subject.job_type, OperationState.REJECTED, {})
        with contextlib.suppress(Refused):  # settled or moved on meanwhile: nothing to reject
            self._settlement.settle(
                settling, decision.reason, lambda noted, items: self._state.reject(subject, noted, items)
            )

    def _record(self, decision: RelayDecision) -> None:
        if isinstance(decision, Defer):
            self._defer(decision)
        elif isinstance(decision, Reject):
            logger.warning("operation rejected at relay", operation_id=decision.subject.operation_id)
            count("rejected")
            self._reject(decision)
        elif isinstance(decision, Conflict):
            logger.error(
                "identity conflict: other content written under a taken id", operation_id=decision.operation_id
            )
            count("identity_conflict")
            self._state.record_conflict(
                decision.operation_id, decision.entry, decision.original_fingerprint, decision.original
            )
        elif isinstance(decision, SignalItem):
            self._send_signal(decision)

    def _send_signal(self, decision: SignalItem) -> None:
        """Send a signal item's signal as every signal is sent, and record its answer (the first stands)."""
        if self._signals is None:
            raise ConfigurationError("the relay cannot send a signal item: signals need the markers table")
        answer, detail, kept = INVALID_ITEM, decision.invalid, False
        if decision.signal is not None:
            try:
                receipt = self._signals.send(decision.signal)
            except InvalidMessage as exc:
                detail = str(exc)
            else:
                answer, detail, kept = receipt.answer.value, receipt.detail, receipt.kept
        count(f"signal_item_{answer}")
        if answer == INVALID_ITEM:
            logger.warning("a signal item converge cannot read: answered invalid", reason=detail)
        answered = self._state.answer_signal_item(decision.item_id, answer, detail, kept, decision.at)
        if not answered and decision.rewrite:
            self._state.answer_signal_item_again(decision.item_id, answer, detail)

    def _defer(self, decision: Defer) -> None:
        """SCHEDULED first, then the send: a retry after a crash between the two finds it SCHEDULED and sends
        (the schedule's name makes a second creation a no-op); one cancelled meanwhile is not sent at all."""
        if self._delays is None:
            raise ConfigurationError("the relay has no delayed dispatch configured")
        how = self._delays.route(decision.run_at)
        reason = f"waiting for its run_at {iso(decision.run_at)} ({how.value})"
        try:
            self._state.schedule(decision.subject, decision.run_at, reason)
        except Refused as refused:
            if refused.current.state is not OperationState.SCHEDULED:
                logger.info("not sent: the operation moved on", state=refused.current.state.value)
                return
        sent = self._delays.send(decision.outgoing, decision.run_at)
        if sent is Route.NOW:  # it came due meanwhile: the worker takes it SCHEDULED -> IN_PROGRESS
            count("relayed")
        logger.info("operation scheduled", run_at=iso(decision.run_at), via=sent.value)


def _subject(image: dict[str, Any], at: float) -> Subject:
    try:
        request = request_from_image(image)
    except UnusableRequest:
        job_type = image_job_type(image, UNREADABLE)
        return Subject(image_operation_id(image), job_type, content_fingerprint(image), iso(at))
    return Subject.of(image_operation_id(image), request.job_type, request.accepted_fingerprints, iso(at))


def _seconds(value: Any) -> float | None:
    """A record's creation time: epoch seconds in a Lambda event, a datetime from GetRecords."""
    if hasattr(value, "timestamp"):
        return float(value.timestamp())
    try:
        return float(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def _fingerprints(image: dict[str, Any]) -> tuple[str, ...]:
    """What an image's content may be recorded as (its fingerprint first), usable or not."""
    try:
        return request_from_image(image).accepted_fingerprints
    except UnusableRequest:
        return (content_fingerprint(image),)
