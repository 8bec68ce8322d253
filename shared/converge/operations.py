"""Operations: the producer's request in the jobs table, converge's state in the state table.

Two records, two owners. The request (the documented item shape) is the producer's; converge only
ever puts it when it enqueues on a producer's behalf, conditionally, and never updates it. The
state record is converge's alone: no producer has a grant on the state table, so no write to the
request can wipe a receipt, reopen a settled operation or smuggle in a state.

Every state change is one conditional UpdateItem that goes through the transition table
(`converge.states`), and a failed condition returns the record as it stood
(ReturnValuesOnConditionCheckFailure), so no change needs a read first. A worker's happy path is
two writes and no read: `acquire` (absent, ACCEPTED, PAUSED, or IN_PROGRESS with an expired lease
-> IN_PROGRESS under a new lease, creating the record when it is absent) and `settle` (the terminal
state, conditional on still holding the lease). Neither touches an index: the attention keys are
set only for states that need attention, so the sparse indexes hold those alone.

The history is bounded: writes that know the record (a lease holder, an operator) store the last
HISTORY_LIMIT changes; writes that do not (taking a lease, pausing, rejecting) append one entry,
which the next knowing write trims.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from boto3.dynamodb.types import TypeDeserializer
from botocore.exceptions import ClientError

from converge import states
from converge.clock import Clock, SystemClock, iso
from converge.errors import IdentityConflict, InvalidTransition, OperationNotFound
from converge.message import plain
from converge.receipt import (
    CONFLICTS_LIMIT,
    ERRORS_LIMIT,
    HISTORY_LIMIT,
    ConflictEntry,
    ErrorEntry,
    HistoryEntry,
    Operation,
    StateRecord,
    clip,
    n,
    s,
)
from converge.request import JobRequest, content_fingerprint, fingerprint
from converge.states import ATTENTION_STATES, FINAL_STATES, OPEN_STATES, Flag, OperationState
from converge.updates import Update

__all__ = [
    "ATTENTION_STATES",
    "FINAL_STATES",
    "OPEN_STATES",
    "Admission",
    "HistoryEntry",
    "Lease",
    "Operation",
    "OperationState",
    "OperationStore",
    "Page",
    "Refused",
    "StateRecord",
    "Subject",
    "fingerprint",
]

_S = OperationState
_deserializer = TypeDeserializer()


@dataclass(frozen=True)
class Admission:
    operation: Operation
    created: bool


@dataclass(frozen=True)
class Page:
    operations: list[dict[str, Any]]
    next_token: dict[str, Any] | None


@dataclass(frozen=True)
class Subject:
    """What a write that reads nothing first knows of its operation: the message it carries."""

    operation_id: str
    job_type: str
    fingerprint: str
    accepted_at: str | None = None
    """When the producer's write was accepted (the stream record's time), for a record created now."""


@dataclass(frozen=True)
class Lease:
    """A delivery's hold on an operation, as the one conditional write that took it left the record."""

    operation_id: str
    job_type: str
    owner: str
    until: float
    attempt: int
    history: tuple[HistoryEntry, ...]
    errors: tuple[ErrorEntry, ...]
    previous: StateRecord | None
    """The record before this lease was taken; None when taking it created the record."""

    @property
    def takeover(self) -> bool:
        """An earlier holder never gave its lease back: it may have done the work (claim_then_effect asks)."""
        return self.previous is not None and self.previous.lease_owner is not None


@dataclass(frozen=True)
class Refused:
    """A conditional write that did not apply, and the record that made it fail."""

    current: StateRecord


class OperationStore:
    """Admission into the jobs table; conditional state changes and attention listing on the state table."""

    def __init__(
        self,
        jobs_table: str,
        state_table: str,
        dynamodb_client: Any,
        attention_index: str = "attention-index",
        conflict_index: str = "conflict-index",
        clock: Clock | None = None,
    ) -> None:
        self._jobs = jobs_table
        self._state = state_table
        self._client = dynamodb_client
        self._attention_index = attention_index
        self._conflict_index = conflict_index
        self._clock = clock or SystemClock()

    # -- admission (the jobs table: the request only) ---------------------------------------------------------

    def put_request(
        self, job_type: str, operation_id: str, payload: dict[str, Any], correlation_id: str | None = None
    ) -> dict[str, Any]:
        """The `Put` entry for a producer's own TransactWriteItems (business write and job, atomically)."""
        return {
            "Put": {
                "TableName": self._jobs,
                "Item": JobRequest(operation_id, job_type, payload, correlation_id).to_item(),
                "ConditionExpression": "attribute_not_exists(operation_id)",
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        }

    def admit(
        self, job_type: str, operation_id: str, payload: dict[str, Any], correlation_id: str | None = None
    ) -> Admission:
        """Create the request unless its id exists; the same content again returns the existing operation."""
        request = self.put_request(job_type, operation_id, payload, correlation_id)["Put"]
        try:
            self._client.put_item(**request)
        except ClientError as exc:
            if not _condition_failed(exc):
                raise
            existing = _failed_item(exc) or self._get(self._jobs, operation_id)
            if existing is not None and content_fingerprint(existing) != fingerprint(job_type, payload):
                raise IdentityConflict(operation_id) from None
            return Admission(
                Operation.from_records(operation_id, existing, self._get(self._state, operation_id)), False
            )
        return Admission(Operation.from_records(operation_id, request["Item"], None), created=True)

    # -- reads (operators, redrive, the reconciler; never the happy path) -------------------------------------

    def get(self, operation_id: str, consistent: bool = True) -> Operation | None:
        request = self._get(self._jobs, operation_id, consistent)
        state = self._get(self._state, operation_id, consistent)
        if request is None and state is None:
            return None
        return Operation.from_records(operation_id, request, state)

    def require(self, operation_id: str) -> Operation:
        operation = self.get(operation_id)
        if operation is None:
            raise OperationNotFound(f"no operation {operation_id!r}")
        return operation

    def record(self, operation_id: str) -> StateRecord:
        """The state record alone (ACCEPTED and not `recorded` when there is none yet)."""
        item = self._get(self._state, operation_id)
        return StateRecord.from_item(item) if item else StateRecord.absent(operation_id)

    def list_attention(
        self, key: str, job_type: str | None = None, limit: int = 50, start: dict[str, Any] | None = None
    ) -> Page:
        """One page of operations under an attention key, from a sparse index (a Query, never a Scan)."""
        if key == Flag.CONFLICT:
            index, hash_name, sort_name = self._conflict_index, "conflict", "conflict_sk"
        elif key in ATTENTION_STATES or key == Flag.STUCK:
            index, hash_name, sort_name = self._attention_index, "attention", "attention_sk"
        else:
            raise InvalidTransition(f"{key} is not an attention key; choose one of {', '.join(states.ATTENTION_KEYS)}")
        condition = f"{hash_name} = :key"
        values: dict[str, Any] = {":key": s(str(key))}
        if job_type:
            condition += f" AND begins_with({sort_name}, :prefix)"
            values[":prefix"] = s(f"{job_type}#")
        request: dict[str, Any] = {
            "TableName": self._state,
            "IndexName": index,
            "KeyConditionExpression": condition,
            "ExpressionAttributeValues": values,
            "Limit": limit,
        }
        if start:
            request["ExclusiveStartKey"] = start
        response = self._client.query(**request)
        rows = [_row(item) for item in response.get("Items", [])]
        return Page(rows, response.get("LastEvaluatedKey"))

    def iter_attention(self, key: str, job_type: str | None = None, page_size: int = 100) -> Iterator[dict]:
        start = None
        while True:
            page = self.list_attention(key, job_type, limit=page_size, start=start)
            yield from page.operations
            if not page.next_token:
                return
            start = page.next_token

    # -- a delivery's writes: one each, reading nothing first -------------------------------------------------

    def acquire(self, subject: Subject, owner: str, lease_seconds: float) -> Lease | Refused:
        """Take the operation IN_PROGRESS under a lease, creating its record if it has none.

        Refused (with the record as it stands) when it is settled, leased by a live holder, or
        promised to other content.
        """
        now, at = self._now()
        accepted = HistoryEntry(_S.ACCEPTED, subject.accepted_at or at, "accepted")
        started = HistoryEntry(_S.IN_PROGRESS, at, "started")
        # The fewest actions that make the change: the happy path's cost is this write and the settle.
        update = Update().set_if_absent("fingerprint", s(subject.fingerprint))
        update.set("state", s(_S.IN_PROGRESS)).set("lease_owner", s(owner)).set("lease_until", n(now + lease_seconds))
        update.append("history", [started.low_level()], start=[accepted.low_level()])
        update.add("attempts").remove("attention", "attention_sk", "stuck")
        self._may_move(update, _S.IN_PROGRESS, now, subject.fingerprint)
        result = self._write(update, subject.operation_id, return_old=True)
        if isinstance(result, Refused):
            return result
        old = result.get("Attributes")
        previous = StateRecord.from_item(old) if old else None
        history = previous.history if previous and previous.history else (accepted,)
        return Lease(
            operation_id=subject.operation_id,
            job_type=subject.job_type,
            owner=owner,
            until=now + lease_seconds,
            attempt=(previous.attempts if previous else 0) + 1,
            history=(*history, started),
            errors=previous.errors if previous else (),
            previous=previous,
        )

    def settle(self, lease: Lease, to: OperationState, reason: str, error: str | None = None) -> Refused | None:
        """Record the outcome and give the lease back, if this delivery still holds it (None: recorded).

        For effect_then_claim this write is the claim."""
        states.check(_S.IN_PROGRESS, to)
        return self._as_holder(lease, to, reason, error)

    def release(self, lease: Lease, reason: str, error: str | None = None) -> Refused | None:
        """Give the lease back without an outcome (a retry or a hand-back follows); None: released."""
        states.check(_S.IN_PROGRESS, _S.IN_PROGRESS)
        return self._as_holder(lease, _S.IN_PROGRESS, reason, error)

    def pause(self, subject: Subject, reason: str) -> Refused | None:
        """The kill switch is off: PAUSED (listed) until the resumer re-dispatches it; None: paused."""
        now, at = self._now()
        update = self._identified(subject, at)
        self._blind_move(update, subject, _S.PAUSED, reason, at, now)
        return _refusal(self._write(update, subject.operation_id))

    def reject(self, subject: Subject, reason: str) -> Refused | None:
        """Refuse the operation's input: REJECTED (final, listed) with the reason; None: rejected."""
        now, at = self._now()
        update = self._identified(subject, at)
        self._blind_move(update, subject, _S.REJECTED, reason, at, now)
        update.set("last_error", s(clip(reason)))
        update.append("errors", [ErrorEntry(at, 0, clip(reason)).low_level()], start=[])
        return _refusal(self._write(update, subject.operation_id))

    def record_conflict(
        self,
        operation_id: str,
        conflicting: ConflictEntry,
        original_fingerprint: str,
        original: JobRequest | None = None,
    ) -> bool:
        """Record a producer's write of other content under this id (listed under CONFLICT).

        The operation keeps the fingerprint it was admitted with; `original`, when given, is the
        request as first admitted, kept so that a re-dispatch still runs it although the jobs table
        now holds other content. False when the "other" content is in fact the operation's own.
        """
        at = conflicting.at
        job_type = original.job_type if original else conflicting.job_type
        update = Update()
        update.set_if_absent("fingerprint", s(original_fingerprint)).set_if_absent("job_type", s(job_type))
        accepted = HistoryEntry(_S.ACCEPTED, at, "accepted")
        update.set_if_absent("state", s(_S.ACCEPTED)).set_if_absent("history", {"L": [accepted.low_level()]})
        if original is not None:
            kept = {name: value for name, value in original.to_item().items() if name != "operation_id"}
            update.set_if_absent("original", {"M": kept})
        update.append("conflicts", [conflicting.low_level()], start=[])
        update.set("conflict", s(Flag.CONFLICT)).set("conflict_sk", s(f"{job_type}#{at}"))
        new = update.value(s(conflicting.fingerprint))
        update.require(f"attribute_not_exists({update.name('fingerprint')}) OR {update.name('fingerprint')} <> {new}")
        cap = update.value(n(CONFLICTS_LIMIT))
        update.require(f"attribute_not_exists({update.name('conflicts')}) OR size({update.name('conflicts')}) < {cap}")
        result = self._write(update, operation_id)
        if not isinstance(result, Refused):
            return True
        if result.current.fingerprint == conflicting.fingerprint:
            return False
        # The receipt keeps the first conflicts; later ones are counted (and the listing refreshed).
        overflow = Update().add("conflicts_dropped").set("conflict", s(Flag.CONFLICT))
        overflow.set("conflict_sk", s(f"{job_type}#{at}"))
        self._client.update_item(**overflow.request(self._state, _key(operation_id)))
        return True

    # -- marks and operator moves (after a read) --------------------------------------------------------------

    def mark_stuck(
        self,
        seen: StateRecord,
        kind: str,
        reason: str,
        subject: Subject | None = None,
        count_redrive: bool = False,
        job_type: str | None = None,
    ) -> bool:
        """List an open operation under STUCK with the reason (its state is unchanged); False if it moved."""
        if seen.state not in OPEN_STATES:
            raise InvalidTransition(f"only open operations are stuck; {seen.operation_id} is {seen.state}")
        _, at = self._now()
        job_type = job_type or seen.job_type or (subject.job_type if subject else "")
        update = Update()
        update.set("attention", s(Flag.STUCK)).set("attention_sk", s(f"{job_type}#{at}"))
        update.set("stuck", s(clip(f"{kind}: {reason}")))
        if count_redrive:
            update.add("redrives")
        if seen.recorded:
            update.require(f"{update.name('state')} = {update.value(s(seen.state))}")
        else:
            if subject is not None:
                self._identified(subject, at, into=update)
            else:
                update.set_if_absent("job_type", s(job_type))
            update.set("state", s(_S.ACCEPTED))
            accepted = HistoryEntry(_S.ACCEPTED, (subject.accepted_at if subject else None) or at, "accepted")
            update.set("history", {"L": [accepted.low_level()]})
            update.require(f"attribute_not_exists({update.name('state')})")
        return not isinstance(self._write(update, seen.operation_id), Refused)

    def transition(
        self,
        current: Operation,
        to: OperationState,
        reason: str,
        *,
        error: str | None = None,
        count_redrive: bool = False,
        stuck: tuple[str, str] | None = None,
        forget_lease: bool = False,
    ) -> bool:
        """An operator's move (resume, redrive, resolve) of an operation read just before.

        Raises InvalidTransition when the table does not list it; False when the operation changed
        since it was read. `stuck` lists the reopened operation under STUCK until a worker takes it,
        so that one whose message never arrives stays visible. `forget_lease` drops an earlier
        holder's lease, so the next attempt is not a takeover (an operator established what happened).
        """
        record = current.state_record
        states.check(record.state, to)
        _, at = self._now()
        history = _bounded([*record.history, HistoryEntry(to, at, clip(reason))])
        update = Update().set("state", s(to)).set("job_type", s(current.job_type))
        update.set("history", {"L": [entry.low_level() for entry in history]})
        self._error(update, record.errors, record.attempts, error, at)
        if stuck is not None and to in OPEN_STATES:
            kind, why = stuck
            update.set("attention", s(Flag.STUCK)).set("attention_sk", s(f"{current.job_type}#{at}"))
            update.set("stuck", s(clip(f"{kind}: {why}")))
        else:
            self._attention(update, to, current.job_type, at)
        if count_redrive:
            update.add("redrives")
        if forget_lease:
            update.remove("lease_owner", "lease_until")
        if record.recorded:
            update.require(f"{update.name('state')} = {update.value(s(record.state))}")
        else:
            if current.request is not None:
                update.set_if_absent("fingerprint", s(current.request.fingerprint))
            update.require(f"attribute_not_exists({update.name('state')})")
        return not isinstance(self._write(update, current.operation_id), Refused)

    # -- building blocks --------------------------------------------------------------------------------------

    def _as_holder(self, lease: Lease, to: OperationState, reason: str, error: str | None) -> Refused | None:
        """A write only the lease's holder may make: it knows the record, so it stores the bounded history."""
        _, at = self._now()
        history = _bounded([*lease.history, HistoryEntry(to, at, clip(reason))])
        update = Update().set("state", s(to)).set("history", {"L": [entry.low_level() for entry in history]})
        earlier_error = lease.previous is not None and lease.previous.last_error is not None
        self._error(update, lease.errors, lease.attempt, error, at, clear=earlier_error)
        self._attention(update, to, lease.job_type, at)
        update.remove("lease_owner", "lease_until")
        update.require(f"{update.name('lease_owner')} = {update.value(s(lease.owner))}")
        return _refusal(self._write(update, lease.operation_id))

    def _blind_move(
        self, update: Update, subject: Subject, to: OperationState, reason: str, at: str, now: float
    ) -> None:
        """Move to `to` from any state the table allows, without knowing which: one history entry appended."""
        accepted = HistoryEntry(_S.ACCEPTED, subject.accepted_at or at, "accepted")
        update.set("state", s(to))
        update.append("history", [HistoryEntry(to, at, clip(reason)).low_level()], start=[accepted.low_level()])
        self._attention(update, to, subject.job_type, at)
        self._may_move(update, to, now, subject.fingerprint)

    def _identified(self, subject: Subject, at: str, into: Update | None = None) -> Update:
        """The attributes a record is created with (kept when it exists): job type, fingerprint, creation time."""
        update = into or Update()
        return update.set_if_absent("job_type", s(subject.job_type)).set_if_absent(
            "fingerprint", s(subject.fingerprint)
        )

    @staticmethod
    def _may_move(update: Update, to: OperationState, now: float, content: str) -> None:
        """Apply only from a state the table lets move to `to` (no record at all is ACCEPTED), never under a
        live lease, and only for the content the operation was admitted with."""
        state, lease_until, fp = update.name("state"), update.name("lease_until"), update.name("fingerprint")
        allowed = ", ".join(update.value(s(source)) for source in sorted(states.sources(to)))
        absent = f"attribute_not_exists({state}) OR " if _S.ACCEPTED in states.sources(to) else ""
        update.require(f"{absent}{state} IN ({allowed})")
        # Only an IN_PROGRESS record holds a live lease; an expired one is a takeover.
        update.require(f"attribute_not_exists({lease_until}) OR {lease_until} < {update.value(n(now))}")
        update.require(f"attribute_not_exists({fp}) OR {fp} = {update.value(s(content))}")

    @staticmethod
    def _error(
        update: Update, earlier: tuple[ErrorEntry, ...], attempt: int, error: str | None, at: str, clear: bool = True
    ) -> None:
        """The current outcome's error apart from earlier ones: a success clears `last_error` (when there is one
        to clear), and keeps `errors`."""
        if error is None:
            if clear:
                update.remove("last_error")
            return
        text = clip(error)
        errors = [*earlier, ErrorEntry(at, attempt, text)][-ERRORS_LIMIT:]
        update.set("last_error", s(text)).set("errors", {"L": [entry.low_level() for entry in errors]})

    @staticmethod
    def _attention(update: Update, to: OperationState, job_type: str, at: str) -> None:
        if to in ATTENTION_STATES:
            update.set("attention", s(to)).set("attention_sk", s(f"{job_type}#{at}"))
        else:
            update.remove("attention", "attention_sk")
        update.remove("stuck")

    def _write(self, update: Update, operation_id: str, return_old: bool = False) -> Any:
        extra: dict[str, Any] = {"ReturnValuesOnConditionCheckFailure": "ALL_OLD"}
        if return_old:
            extra["ReturnValues"] = "ALL_OLD"
        try:
            return self._client.update_item(**update.request(self._state, _key(operation_id), **extra))
        except ClientError as exc:
            if not _condition_failed(exc):
                raise
            item = _failed_item(exc) or self._get(self._state, operation_id)
            return Refused(StateRecord.from_item(item) if item else StateRecord.absent(operation_id))

    def _get(self, table: str, operation_id: str, consistent: bool = True) -> dict[str, Any] | None:
        response = self._client.get_item(TableName=table, Key=_key(operation_id), ConsistentRead=consistent)
        item = response.get("Item")
        return item if item else None

    def _now(self) -> tuple[float, str]:
        now = self._clock.now()
        return now, iso(now)


def _bounded(history: list[HistoryEntry]) -> list[HistoryEntry]:
    """The first entry (when the operation was accepted) and the latest changes, HISTORY_LIMIT in all."""
    return history if len(history) <= HISTORY_LIMIT else [history[0], *history[-(HISTORY_LIMIT - 1) :]]


def _key(operation_id: str) -> dict[str, Any]:
    return {"operation_id": s(operation_id)}


def _row(item: dict[str, Any]) -> dict[str, Any]:
    """A listing row: the projected attributes, plus when the operation was listed (from its sort key)."""
    row = {key: plain(_deserializer.deserialize(value)) for key, value in item.items()}
    sort_key = str(row.get("attention_sk") or row.get("conflict_sk") or "")
    row["listed_at"] = sort_key.rpartition("#")[2] or None
    if isinstance(row.get("stuck"), str):
        kind, _, reason = row["stuck"].partition(": ")
        row["stuck_kind"], row["stuck_reason"] = kind, reason
    return row


def _refusal(result: Any) -> Refused | None:
    return result if isinstance(result, Refused) else None


def _failed_item(exc: ClientError) -> dict[str, Any] | None:
    """The item that failed a condition, when the service returned it (ReturnValuesOnConditionCheckFailure)."""
    item: Any = exc.response.get("Item")
    return item if isinstance(item, dict) and item else None


def _condition_failed(exc: ClientError) -> bool:
    return exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException"
