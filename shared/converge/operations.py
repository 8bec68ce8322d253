"""Operations: one item per business operation in the jobs table, the stored receipt of its work.

Every state change is conditional on the state it was read in and appends to a bounded history.
Attention states (FAILED, UNKNOWN, PAUSED, REJECTED) also set `attention`/`attention_sk`, the keys
of a sparse index, so listing them costs work proportional to the result, never a scan.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from botocore.exceptions import ClientError

from converge.clock import Clock, SystemClock, iso
from converge.errors import IdentityConflict, InvalidTransition, OperationNotFound
from converge.message import canonical_json, plain

HISTORY_LIMIT = 10
REASON_LIMIT = 300

_serializer = TypeSerializer()
_deserializer = TypeDeserializer()


class OperationState(StrEnum):
    ACCEPTED = "ACCEPTED"
    PAUSED = "PAUSED"
    IN_PROGRESS = "IN_PROGRESS"
    SUCCEEDED = "SUCCEEDED"
    NOOP = "NOOP"
    FAILED = "FAILED"
    UNKNOWN = "UNKNOWN"
    REJECTED = "REJECTED"


ATTENTION_STATES = frozenset(
    {OperationState.FAILED, OperationState.UNKNOWN, OperationState.PAUSED, OperationState.REJECTED}
)
FINAL_STATES = frozenset(
    {
        OperationState.SUCCEEDED,
        OperationState.NOOP,
        OperationState.FAILED,
        OperationState.UNKNOWN,
        OperationState.REJECTED,
    }
)
"""States no delivery moves on from; only an operator (resolve, redrive) reopens them."""
OPEN_STATES = frozenset({OperationState.ACCEPTED, OperationState.PAUSED, OperationState.IN_PROGRESS})


def fingerprint(job_type: str, payload: Any) -> str:
    """What an operation id promises: this job type with this payload."""
    return hashlib.sha256(canonical_json({"job_type": job_type, "payload": payload}).encode()).hexdigest()[:32]


def clip(reason: str | None) -> str:
    text = " ".join((reason or "").split())
    return text if len(text) <= REASON_LIMIT else text[: REASON_LIMIT - 1] + "…"


@dataclass(frozen=True)
class HistoryEntry:
    state: str
    at: str
    reason: str

    def to_item(self) -> dict[str, str]:
        return {"state": self.state, "at": self.at, "reason": self.reason}


@dataclass(frozen=True)
class Operation:
    operation_id: str
    job_type: str
    payload: dict[str, Any]
    state: OperationState
    correlation_id: str | None = None
    attempts: int = 0
    history: tuple[HistoryEntry, ...] = ()
    last_error: str | None = None
    fingerprint: str | None = None
    created_at: str | None = None
    updated_at: str | None = None
    redrives: int = 0
    submitted_by: str | None = None  # the enqueue API's caller; GET /operations/{id} answers only it

    @classmethod
    def from_item(cls, item: dict[str, Any]) -> Operation:
        """From a low-level DynamoDB item; a raw producer item without `state` is ACCEPTED."""
        data = {key: _deserializer.deserialize(value) for key, value in item.items()}
        payload = plain(data.get("payload") or {})
        history = tuple(
            HistoryEntry(str(entry.get("state", "")), str(entry.get("at", "")), str(entry.get("reason", "")))
            for entry in data.get("history") or []
            if isinstance(entry, dict)
        )
        state_value = data.get("state", OperationState.ACCEPTED)
        try:
            state = OperationState(state_value)
        except ValueError:
            state = OperationState.ACCEPTED
        return cls(
            operation_id=str(data["operation_id"]),
            job_type=str(data.get("job_type", "")),
            payload=payload if isinstance(payload, dict) else {"_invalid": payload},
            state=state,
            correlation_id=data.get("correlation_id"),
            attempts=int(data.get("attempts", 0)),
            history=history,
            last_error=data.get("last_error"),
            fingerprint=data.get("fingerprint"),
            created_at=data.get("created_at"),
            updated_at=data.get("updated_at"),
            redrives=int(data.get("redrives", 0)),
            submitted_by=data.get("submitted_by"),
        )

    @property
    def content_fingerprint(self) -> str:
        return self.fingerprint or fingerprint(self.job_type, self.payload)

    def to_json(self) -> dict[str, Any]:
        """The operator's view (`converge ops show --json`)."""
        return {
            "operation_id": self.operation_id,
            "job_type": self.job_type,
            "state": self.state.value,
            "attempts": self.attempts,
            "history": [entry.to_item() for entry in self.history],
            "last_error": self.last_error,
            "correlation_id": self.correlation_id,
            "payload": self.payload,
            "redrives": self.redrives,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "submitted_by": self.submitted_by,
        }


@dataclass(frozen=True)
class Admission:
    operation: Operation
    created: bool


@dataclass(frozen=True)
class Page:
    operations: list[dict[str, Any]]
    next_token: dict[str, Any] | None


class OperationStore:
    """Admission, conditional transitions and attention listing over the jobs table."""

    def __init__(
        self,
        table_name: str,
        dynamodb_client: Any,
        attention_index: str = "attention-index",
        clock: Clock | None = None,
    ) -> None:
        self._table = table_name
        self._client = dynamodb_client
        self._index = attention_index
        self._clock = clock or SystemClock()

    # -- admission -------------------------------------------------------------------------------------------

    def new_item(
        self,
        job_type: str,
        operation_id: str,
        payload: dict[str, Any],
        correlation_id: str | None,
        submitted_by: str | None = None,
    ) -> dict[str, Any]:
        at = iso(self._clock.now())
        item: dict[str, Any] = {
            "operation_id": operation_id,
            "job_type": job_type,
            "payload": payload,
            "state": OperationState.ACCEPTED.value,
            "fingerprint": fingerprint(job_type, payload),
            "attempts": 0,
            "history": [HistoryEntry(OperationState.ACCEPTED, at, "enqueued").to_item()],
            "created_at": at,
            "updated_at": at,
        }
        if correlation_id:
            item["correlation_id"] = correlation_id
        if submitted_by:
            item["submitted_by"] = submitted_by
        return {key: _serializer.serialize(value) for key, value in item.items()}

    def put_request(
        self,
        job_type: str,
        operation_id: str,
        payload: dict[str, Any],
        correlation_id: str | None = None,
        submitted_by: str | None = None,
    ) -> dict[str, Any]:
        """The `Put` entry for a producer's own TransactWriteItems (business write and job, atomically)."""
        return {
            "Put": {
                "TableName": self._table,
                "Item": self.new_item(job_type, operation_id, payload, correlation_id, submitted_by),
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
    ) -> Admission:
        """Create the operation unless its id exists; the same content again returns the existing one."""
        request = self.put_request(job_type, operation_id, payload, correlation_id, submitted_by)["Put"]
        try:
            self._client.put_item(**request)
        except ClientError as exc:
            if not _condition_failed(exc):
                raise
            existing = self._existing(exc, operation_id)
            if existing.content_fingerprint != fingerprint(job_type, payload) or existing.job_type != job_type:
                raise IdentityConflict(operation_id) from None
            return Admission(existing, created=False)
        return Admission(Operation.from_item(request["Item"]), created=True)

    def _existing(self, exc: ClientError, operation_id: str) -> Operation:
        item: Any = exc.response.get("Item")
        if item:
            return Operation.from_item(item)
        return self.require(operation_id)

    # -- reads -----------------------------------------------------------------------------------------------

    def get(self, operation_id: str, consistent: bool = True) -> Operation | None:
        response = self._client.get_item(
            TableName=self._table, Key={"operation_id": {"S": operation_id}}, ConsistentRead=consistent
        )
        item = response.get("Item")
        return Operation.from_item(item) if item else None

    def require(self, operation_id: str) -> Operation:
        operation = self.get(operation_id)
        if operation is None:
            raise OperationNotFound(f"no operation {operation_id!r}")
        return operation

    def list_attention(
        self, state: OperationState, job_type: str | None = None, limit: int = 50, start: dict[str, Any] | None = None
    ) -> Page:
        """One page of operations in an attention state, from the sparse index (a Query, never a Scan)."""
        if state not in ATTENTION_STATES:
            raise InvalidTransition(f"{state} is not an attention state; choose one of {sorted(ATTENTION_STATES)}")
        condition = "attention = :state"
        values: dict[str, Any] = {":state": {"S": state.value}}
        if job_type:
            condition += " AND begins_with(attention_sk, :prefix)"
            values[":prefix"] = {"S": f"{job_type}#"}
        request: dict[str, Any] = {
            "TableName": self._table,
            "IndexName": self._index,
            "KeyConditionExpression": condition,
            "ExpressionAttributeValues": values,
            "Limit": limit,
        }
        if start:
            request["ExclusiveStartKey"] = start
        response = self._client.query(**request)
        rows = [
            {key: plain(_deserializer.deserialize(value)) for key, value in item.items()}
            for item in response.get("Items", [])
        ]
        return Page(rows, response.get("LastEvaluatedKey"))

    def iter_attention(
        self, state: OperationState, job_type: str | None = None, page_size: int = 100
    ) -> Iterator[dict]:
        start = None
        while True:
            page = self.list_attention(state, job_type, limit=page_size, start=start)
            yield from page.operations
            if not page.next_token:
                return
            start = page.next_token

    # -- transitions -----------------------------------------------------------------------------------------

    def transition(
        self,
        current: Operation,
        to: OperationState,
        reason: str,
        *,
        attempts: int | None = None,
        last_error: str | None = None,
        redispatch: str | None = None,
        count_redrive: bool = False,
    ) -> Operation | None:
        """Move `current` to `to` if it is still in the state it was read in.

        Returns the new operation, or None when someone else changed it first (the caller decides
        what that means: usually that another delivery already finished the work).
        """
        now = iso(self._clock.now())
        entry = HistoryEntry(to.value, now, clip(reason))
        history = [*current.history, entry][-HISTORY_LIMIT:]
        names = {"#state": "state"}
        values: dict[str, Any] = {
            ":to": {"S": to.value},
            ":history": _serializer.serialize([item.to_item() for item in history]),
            ":now": {"S": now},
        }
        sets = ["#state = :to", "history = :history", "updated_at = :now"]
        removes = []
        if to in ATTENTION_STATES:
            sets += ["attention = :to", "attention_sk = :attention_sk"]
            values[":attention_sk"] = {"S": f"{current.job_type}#{now}"}
        else:
            removes += ["attention", "attention_sk"]
        if attempts is not None:
            sets.append("attempts = :attempts")
            values[":attempts"] = {"N": str(attempts)}
        if last_error is not None:
            sets.append("last_error = :error")
            values[":error"] = {"S": clip(last_error)}
        if redispatch is not None:
            sets.append("redispatch = :redispatch")
            values[":redispatch"] = {"S": redispatch}
        else:
            removes.append("redispatch")
        if count_redrive:
            sets.append("redrives = if_not_exists(redrives, :zero) + :one")
            values[":zero"] = {"N": "0"}
            values[":one"] = {"N": "1"}
        if current.state is OperationState.ACCEPTED:
            condition = "attribute_exists(operation_id) AND (attribute_not_exists(#state) OR #state = :from)"
        else:
            condition = "#state = :from"
        values[":from"] = {"S": current.state.value}
        expression = "SET " + ", ".join(sets) + (" REMOVE " + ", ".join(removes) if removes else "")
        try:
            # No ReturnValues: the new state is known here, and parsing the item back costs CPU on every job.
            self._client.update_item(
                TableName=self._table,
                Key={"operation_id": {"S": current.operation_id}},
                UpdateExpression=expression,
                ConditionExpression=condition,
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
            )
        except ClientError as exc:
            if _condition_failed(exc):
                return None
            raise
        return replace(
            current,
            state=to,
            history=tuple(history),
            updated_at=now,
            attempts=current.attempts if attempts is None else attempts,
            last_error=current.last_error if last_error is None else clip(last_error),
            redrives=current.redrives + 1 if count_redrive else current.redrives,
        )

    def request_redispatch(self, current: Operation, reason: str, token: str) -> Operation | None:
        """Back to ACCEPTED with a fresh `redispatch` token: the stream carries it to the relay again."""
        return self.transition(current, OperationState.ACCEPTED, reason, redispatch=token)


def _condition_failed(exc: ClientError) -> bool:
    return exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException"
