"""Operations: the producer's request in the jobs table, converge's state in the state table.

Two records, two owners. The request (the documented item shape) is the producer's; converge only
ever puts it when it enqueues on a producer's behalf, conditionally, and never updates it. The
state record is converge's alone: no producer has a grant on the state table, so no write to the
request can wipe a receipt, reopen a settled operation or smuggle in a state.

Every state change is one conditional UpdateItem that goes through the transition table
(`converge.states`), and a failed condition returns the record as it stood
(ReturnValuesOnConditionCheckFailure), so no change needs a read first. A delivery's writes (the
lease, the outcome, a pause, a refusal) are in `converge.deliveries`; this store adds admission,
reads, the attention listings, identity conflicts, STUCK marks and an operator's moves. The
happy path touches no index: the attention keys are set only for states that need attention, so
the sparse indexes hold those alone.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from boto3.dynamodb.types import TypeDeserializer
from botocore.exceptions import ClientError

from converge import states
from converge.clock import Clock
from converge.deliveries import (
    Lease,
    Refused,
    StateWrites,
    Subject,
    bounded_history,
    condition_failed,
    failed_item,
    never_started,
    state_key,
)
from converge.errors import IdentityConflict, InvalidTransition, OperationNotFound
from converge.message import plain
from converge.receipt import CONFLICTS_LIMIT, ConflictEntry, HistoryEntry, Operation, StateRecord, clip, n, s
from converge.request import JobRequest, content_fingerprint, fingerprint
from converge.states import ATTENTION_STATES, FINAL_STATES, LISTED_STATES, OPEN_STATES, Flag, OperationState
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


class OperationStore(StateWrites):
    """Admission into the jobs table; conditional state changes and attention listing on the state table."""

    def __init__(
        self,
        jobs_table: str,
        state_table: str,
        dynamodb_client: Any,
        attention_index: str = "attention-index",
        conflict_index: str = "conflict-index",
        clock: Clock | None = None,
        schedule_index: str = "schedule-index",
    ) -> None:
        super().__init__(state_table, dynamodb_client, clock)
        self._jobs = jobs_table
        self._attention_index = attention_index
        self._conflict_index = conflict_index
        self._schedule_index = schedule_index

    # -- admission (the jobs table: the request only) ---------------------------------------------------------

    def put_request(
        self,
        job_type: str,
        operation_id: str,
        payload: dict[str, Any],
        correlation_id: str | None = None,
        submitted_by: str | None = None,
        run_at: str | None = None,
        expires_at: str | None = None,
    ) -> dict[str, Any]:
        """The `Put` entry for a producer's own TransactWriteItems (business write and job, atomically)."""
        request = JobRequest(
            operation_id, job_type, payload, correlation_id, submitted_by, run_at=run_at, expires_at=expires_at
        )
        return {
            "Put": {
                "TableName": self._jobs,
                "Item": request.to_item(),
                "ConditionExpression": "attribute_not_exists(operation_id)",
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        }

    def admit(
        self,
        job_type: str,
        operation_id: str,
        payload: dict[str, Any],
        correlation_id: str | None = None,
        submitted_by: str | None = None,
        run_at: str | None = None,
        expires_at: str | None = None,
    ) -> Admission:
        """Create the request unless its id exists; the same content again returns the existing operation."""
        request = self.put_request(job_type, operation_id, payload, correlation_id, submitted_by, run_at, expires_at)[
            "Put"
        ]
        try:
            self._client.put_item(**request)
        except ClientError as exc:
            if not condition_failed(exc):
                raise
            existing = failed_item(exc) or self._get(self._jobs, operation_id)
            # The same id again is the same operation only with the same content and options (times, caller).
            if existing is not None and content_fingerprint(existing) != content_fingerprint(request["Item"]):
                raise IdentityConflict(operation_id) from None
            return Admission(
                Operation.from_records(operation_id, existing, self._get(self._state, operation_id)), False
            )
        return Admission(Operation.from_records(operation_id, request["Item"], None), created=True)

    # -- reads (operators, redrive, the reconciler; never the happy path) -------------------------------------

    def get(self, operation_id: str) -> Operation | None:
        request = self._get(self._jobs, operation_id)
        state = self._get(self._state, operation_id)
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
        elif key in LISTED_STATES or key == Flag.STUCK:
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
        rows = [_row(item) for item in response["Items"]]
        return Page(rows, response.get("LastEvaluatedKey"))

    def iter_attention(self, key: str, job_type: str | None = None, page_size: int = 100) -> Iterator[dict]:
        start = None
        while True:
            page = self.list_attention(key, job_type, limit=page_size, start=start)
            yield from page.operations
            if not page.next_token:
                return
            start = page.next_token

    def overdue(self, before: float, limit: int) -> list[tuple[str, float]]:
        """SCHEDULED operations whose run_at is before `before`, earliest first: (id, run_at), at most `limit`.

        One key range of the schedule index (listed operations by run_at), so it costs what it finds."""
        found: list[tuple[str, float]] = []
        request: dict[str, Any] = {
            "TableName": self._state,
            "IndexName": self._schedule_index,
            "KeyConditionExpression": "attention = :scheduled AND run_at < :before",
            "ExpressionAttributeValues": {":scheduled": s(_S.SCHEDULED), ":before": n(float(before))},
        }
        while len(found) < limit:
            response = self._client.query(**request, Limit=limit - len(found))
            found += [(item["operation_id"]["S"], float(item["run_at"]["N"])) for item in response["Items"]]
            if not response.get("LastEvaluatedKey"):
                break
            request["ExclusiveStartKey"] = response["LastEvaluatedKey"]
        return found

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
        self._client.update_item(**overflow.request(self._state, state_key(operation_id)))
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
        history = bounded_history([*record.history, HistoryEntry(to, at, clip(reason))])
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
        if to in states.NOTHING_RAN:  # a cancel: only if no delivery ever began it, however it stands now
            never_started(update)
        if record.recorded:
            update.require(f"{update.name('state')} = {update.value(s(record.state))}")
        else:
            if current.request is not None:
                update.set_if_absent("fingerprint", s(current.request.fingerprint))
            update.require(f"attribute_not_exists({update.name('state')})")
        return not isinstance(self._write(update, current.operation_id), Refused)


def _row(item: dict[str, Any]) -> dict[str, Any]:
    """A listing row: the projected attributes, plus when the operation was listed (from its sort key)."""
    row = {key: plain(_deserializer.deserialize(value)) for key, value in item.items()}
    sort_key = str(row.get("attention_sk") or row.get("conflict_sk") or "")
    row["listed_at"] = sort_key.rpartition("#")[2] or None
    if isinstance(row.get("stuck"), str):
        kind, _, reason = row["stuck"].partition(": ")
        row["stuck_kind"], row["stuck_reason"] = kind, reason
    return row
