"""Listing operations: queries of the state table's sparse indexes, and the bounded scan every other listing is.

An attention key (FAILED, UNKNOWN, PAUSED, REJECTED, SCHEDULED, CANCELLED, EXPIRED, STUCK, CONFLICT) is a
Query on its sparse index, so it costs the result; overdue SCHEDULED operations are one key range of the
schedule index. Any other state has no index (the happy path writes none), so the operator's listing of
those scans the jobs table, one bounded call at a time, and joins each page with the other table
(BatchGetItem). Rows are plain values; nothing above the store sees an attribute value.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from typing import Any

from converge.model import states
from converge.model.clock import iso
from converge.model.envelope import plain
from converge.model.errors import InvalidTransition
from converge.model.records import StateRecord
from converge.model.signals import SIGNAL_ITEM_JOB_TYPE, signal_form
from converge.model.states import LISTED_STATES, Flag, OperationState
from converge.store.codecs import number_value, record_from_item, string_value

SCAN_PROJECTION = ["operation_id", "job_type", "state", "attempts", "last_error", "stuck", "history"]
"""What a scanned row shows of its state record."""


@dataclass(frozen=True)
class Page:
    operations: list[dict[str, Any]]
    next_token: dict[str, Any] | None


@dataclass(frozen=True)
class Slice:
    """One call's rows, how many items it evaluated, and where the next call goes on (None: the end)."""

    rows: list[dict[str, Any]]
    evaluated: int
    next_token: dict[str, Any] | None


class Listings:
    """Queries of the state table's sparse indexes, and the operator's bounded listings of both tables."""

    def __init__(
        self,
        jobs_table: str,
        state_table: str,
        dynamodb_client: Any,
        attention_index: str = "attention-index",
        conflict_index: str = "conflict-index",
        schedule_index: str = "schedule-index",
    ) -> None:
        self._jobs = jobs_table
        self._state = state_table
        self._client = dynamodb_client
        self._attention_index = attention_index
        self._conflict_index = conflict_index
        self._schedule_index = schedule_index

    # -- attention keys ---------------------------------------------------------------------------------------

    def list_attention(
        self, key: str, job_type: str | None = None, limit: int = 50, start: dict[str, Any] | None = None
    ) -> Page:
        """One page of operations under an attention key, from a sparse index (a Query, never a Scan)."""
        if key != Flag.CONFLICT and key not in LISTED_STATES and key != Flag.STUCK:
            raise InvalidTransition(f"{key} is not an attention key; choose one of {', '.join(states.ATTENTION_KEYS)}")
        request = self._listed(key, job_type, None)
        request["Limit"] = limit
        if start:
            request["ExclusiveStartKey"] = start
        response = self._client.query(**request)
        return Page([listing_row(item) for item in response["Items"]], response.get("LastEvaluatedKey"))

    def iter_attention(self, key: str, job_type: str | None = None, page_size: int = 100) -> Iterator[dict]:
        start = None
        while True:
            page = self.list_attention(key, job_type, limit=page_size, start=start)
            yield from page.operations
            if not page.next_token:
                return
            start = page.next_token

    def count(self, key: str, at_most: int) -> int:
        """How many operations an attention key lists (COUNT queries: they cost the entries counted), up to about
        `at_most` (a page past it is not read)."""
        request: dict[str, Any] = {**self._listed(key, None, None), "Select": "COUNT"}
        total = 0
        while total < at_most:
            response = self._client.query(**request)
            total += int(response["Count"])
            if not response.get("LastEvaluatedKey"):
                break
            request["ExclusiveStartKey"] = response["LastEvaluatedKey"]
        return total

    def overdue(self, before: float, limit: int) -> list[tuple[str, float]]:
        """SCHEDULED operations whose run_at is before `before`, earliest first: (id, run_at), at most `limit`.

        One key range of the schedule index (listed operations by run_at), so it costs what it finds."""
        found: list[tuple[str, float]] = []
        request: dict[str, Any] = {
            "TableName": self._state,
            "IndexName": self._schedule_index,
            "KeyConditionExpression": "attention = :scheduled AND run_at < :before",
            "ExpressionAttributeValues": {
                ":scheduled": string_value(OperationState.SCHEDULED),
                ":before": number_value(float(before)),
            },
        }
        while len(found) < limit:
            response = self._client.query(**request, Limit=limit - len(found))
            found += [(item["operation_id"]["S"], float(item["run_at"]["N"])) for item in response["Items"]]
            if not response.get("LastEvaluatedKey"):
                break
            request["ExclusiveStartKey"] = response["LastEvaluatedKey"]
        return found

    # -- the operator's listing: one bounded call at a time -----------------------------------------------------

    def listed(
        self, key: str, job_type: str | None, since: float | None, limit: int, start: dict[str, Any] | None
    ) -> Slice:
        """Operations under an attention key, of one job type and listed since a time when given (both served by
        the sort key, "<job type>#<listed at>"), at most `limit`."""
        return self._call(self._client.query, self._listed(key, job_type, since), limit, start, listing_row)

    def requests(
        self, job_type: str | None, correlation_id: str | None, limit: int, start: dict[str, Any] | None
    ) -> Slice:
        """Requests of the jobs table (a Scan, filtered by job type and correlation id when given), evaluating at
        most `limit` items."""
        request: dict[str, Any] = {
            "TableName": self._jobs,
            "ProjectionExpression": "operation_id, job_type, correlation_id",
        }
        conditions, values = [], {}
        if job_type:
            conditions.append("job_type = :job_type")
            values[":job_type"] = string_value(job_type)
        if correlation_id is not None:
            conditions.append("correlation_id = :correlation_id")
            values[":correlation_id"] = string_value(correlation_id)
        if conditions:
            request["FilterExpression"] = " AND ".join(conditions)
            request["ExpressionAttributeValues"] = values
        return self._call(self._client.scan, request, limit, start, _request_row)

    def with_correlation_ids(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Index rows with each request's correlation id (which only the jobs table holds)."""
        requests = self._batch_get(
            self._jobs, [str(row["operation_id"]) for row in rows], ["operation_id", "correlation_id"]
        )
        for row in rows:
            row["correlation_id"] = requests.get(row["operation_id"], {}).get("correlation_id", {}).get("S")
        return rows

    def with_records(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Scanned requests joined with their state records (none yet: ACCEPTED, not yet taken by a worker)."""
        records = self._batch_get(self._state, [str(row["operation_id"]) for row in rows], SCAN_PROJECTION)
        return [_scan_row(row, records.get(row["operation_id"])) for row in rows]

    # -- requests -------------------------------------------------------------------------------------------------

    def _listed(self, key: str, job_type: str | None, since: float | None) -> dict[str, Any]:
        if key == Flag.CONFLICT:
            index, hash_name, sort_name = self._conflict_index, "conflict", "conflict_sk"
        else:
            index, hash_name, sort_name = self._attention_index, "attention", "attention_sk"
        condition = f"{hash_name} = :key"
        values: dict[str, Any] = {":key": string_value(str(key))}
        if job_type and since is not None:
            # The sort key is "<job type>#<listed at>": the age is served by the key.
            condition += f" AND {sort_name} BETWEEN :from AND :to"
            values[":from"], values[":to"] = string_value(f"{job_type}#{iso(since)}"), string_value(f"{job_type}#~")
        elif job_type:
            condition += f" AND begins_with({sort_name}, :prefix)"
            values[":prefix"] = string_value(f"{job_type}#")
        return {
            "TableName": self._state,
            "IndexName": index,
            "KeyConditionExpression": condition,
            "ExpressionAttributeValues": values,
        }

    @staticmethod
    def _call(call: Any, request: dict[str, Any], limit: int, start: dict[str, Any] | None, row: Any) -> Slice:
        request = {**request, "Limit": max(limit, 1)}
        if start:
            request["ExclusiveStartKey"] = start
        response = call(**request)
        items = response["Items"]
        evaluated = int(response["ScannedCount"])
        return Slice([row(item) for item in items], evaluated, response.get("LastEvaluatedKey"))

    def _batch_get(self, table: str, operation_ids: list[str], attributes: list[str]) -> dict[str, dict[str, Any]]:
        """The items of these ids (BatchGetItem, a hundred a call), by id."""
        names = {f"#a{n}": name for n, name in enumerate(attributes)}
        found: dict[str, dict[str, Any]] = {}
        for start in range(0, len(operation_ids), 100):
            keys: list[dict[str, Any]] = [{"operation_id": string_value(i)} for i in operation_ids[start : start + 100]]
            while keys:
                response = self._client.batch_get_item(
                    RequestItems={
                        table: {
                            "Keys": keys,
                            "ProjectionExpression": ", ".join(names),
                            "ExpressionAttributeNames": names,
                        }
                    }
                )
                # Every answer has both maps; a table is absent from Responses when none of its keys was read.
                for item in response["Responses"].get(table, []):
                    found[item["operation_id"]["S"]] = item
                unprocessed = response["UnprocessedKeys"]
                keys = unprocessed[table]["Keys"] if table in unprocessed else []
        return found


def listing_row(item: dict[str, Any]) -> dict[str, Any]:
    """An index row: the projected attributes, plus when the operation was listed (from its sort key)."""
    deserializer = _deserializer()
    row = {key: plain(deserializer.deserialize(value)) for key, value in item.items()}
    sort_key = str(row.get("attention_sk") or row.get("conflict_sk") or "")
    row["listed_at"] = sort_key.rpartition("#")[2] or None
    if isinstance(row.get("stuck"), str):
        kind, _, reason = row["stuck"].partition(": ")
        row["stuck_kind"], row["stuck_reason"] = kind, reason
    return row


def _scan_row(request: dict[str, Any], item: dict[str, Any] | None) -> dict[str, Any]:
    """A request joined with its state record (none yet: ACCEPTED, not yet taken by a worker)."""
    operation_id = request["operation_id"]
    record = record_from_item(item) if item else StateRecord.absent(operation_id)
    row: dict[str, Any] = {
        "operation_id": operation_id,
        # A signal item not answered yet has neither: it shows as what it is (docs/signals.md).
        "job_type": record.job_type or request.get("job_type") or _unanswered_signal(operation_id),
        "correlation_id": request.get("correlation_id"),
        "state": record.state.value,
        "attempts": record.attempts,
        "last_error": record.last_error,
        "updated_at": record.updated_at,
    }
    if record.stuck_kind:
        row["stuck_kind"], row["stuck_reason"] = record.stuck_kind, record.stuck_reason
    return row


def _unanswered_signal(operation_id: str) -> str | None:
    return SIGNAL_ITEM_JOB_TYPE if signal_form(operation_id) else None


def _request_row(item: dict[str, Any]) -> dict[str, Any]:
    return {name: value["S"] for name, value in item.items() if isinstance(value, dict) and "S" in value}


@cache
def _deserializer() -> Any:
    """boto3's attribute-value reader, loaded by the first listing: importing boto3 is a cold-start cost that the
    worker, which lists nothing, does not pay (it talks to AWS through botocore alone)."""
    from boto3.dynamodb.types import TypeDeserializer

    return TypeDeserializer()
