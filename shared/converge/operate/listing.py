"""Operations listed by state, job type, correlation id and age, one bounded page at a time.

An attention key (FAILED, UNKNOWN, PAUSED, REJECTED, STUCK, CONFLICT) is a Query on its sparse
index, so it costs the result. Any other state, or every state ("recent"), has no index: the happy
path writes none (an index on every state would double its write cost), so those listings Scan the
state table, a page at a time, and each call evaluates at most `budget` items; the next token
continues where it stopped. Filters the key cannot serve (an age without a job type, a correlation
id, which lives in the request) are applied to each page, within the same budget, so a page may hold
fewer rows than asked for while a next token remains.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from converge.model import states
from converge.model.clock import iso
from converge.model.errors import InvalidListing
from converge.model.records import StateRecord
from converge.model.states import LISTED_STATES, Flag, OperationState
from converge.store.codecs import record_from_item, s
from converge.store.operations import _row as index_row

if TYPE_CHECKING:
    from converge.runtime import Converge

DEFAULT_BUDGET = 1000
"""Items a listing call evaluates at most (index entries or state records)."""

SCAN_PROJECTION = ["operation_id", "job_type", "state", "attempts", "last_error", "stuck", "history"]


def listable() -> list[str]:
    """Every value `state` takes: the attention keys (an index) and every other state (a bounded scan)."""
    return [*states.ATTENTION_KEYS, *sorted(set(OperationState) - LISTED_STATES)]


@dataclass(frozen=True)
class Filters:
    state: str | None = None  # an attention key or a state; None: every state
    job_type: str | None = None
    correlation_id: str | None = None
    since: float | None = None  # epoch seconds: changed (or, for attention keys, listed) at or after this

    @property
    def indexed(self) -> bool:
        return self.state in states.ATTENTION_KEYS


@dataclass(frozen=True)
class ListingPage:
    operations: list[dict[str, Any]]
    next_token: dict[str, Any] | None
    evaluated: int  # index entries or state records read for this page
    source: str  # "index" or "scan"


class Listing:
    """Pages of operations for operators (never on the happy path)."""

    def __init__(self, converge: Converge) -> None:
        self._client = converge.clients.dynamodb
        self._settings = converge.settings

    def page(
        self,
        filters: Filters,
        limit: int = 50,
        start: dict[str, Any] | None = None,
        budget: int = DEFAULT_BUDGET,
    ) -> ListingPage:
        if filters.state is not None and filters.state not in listable():
            raise InvalidListing(f"{filters.state!r} is not a state; choose one of {', '.join(listable())}")
        if filters.indexed:
            call, convert, source = self._query(filters), index_row, "index"
        else:
            call, convert, source = self._scan(filters), _request_row, "scan"
        rows: list[dict[str, Any]] = []
        evaluated = 0
        token = start
        while True:
            # Each call evaluates at most what is left of both the page and the budget, so the rows never
            # exceed `limit` and the token resumes exactly after the last item evaluated.
            request = call(min(limit - len(rows), budget - evaluated))
            if token:
                request["ExclusiveStartKey"] = token
            response = (self._client.query if source == "index" else self._client.scan)(**request)
            evaluated += int(response.get("ScannedCount", len(response.get("Items", []))))
            found = [convert(item) for item in response.get("Items", [])]
            rows += self._refine(found, filters, source)
            token = response.get("LastEvaluatedKey")
            if not token or len(rows) >= limit or evaluated >= budget:
                break
        if source == "scan":
            rows.sort(key=lambda row: str(row.get("updated_at") or ""), reverse=True)
        return ListingPage(rows, token, evaluated, source)

    def _query(self, filters: Filters) -> Callable[[int], dict[str, Any]]:
        key = str(filters.state)
        if key == Flag.CONFLICT:
            index, hash_name, sort_name = self._settings.conflict_index, "conflict", "conflict_sk"
        else:
            index, hash_name, sort_name = self._settings.attention_index, "attention", "attention_sk"
        condition = f"{hash_name} = :key"
        values: dict[str, Any] = {":key": s(key)}
        if filters.job_type and filters.since is not None:
            # The sort key is "<job type>#<listed at>": the age is served by the key.
            condition += f" AND {sort_name} BETWEEN :from AND :to"
            values[":from"], values[":to"] = s(f"{filters.job_type}#{iso(filters.since)}"), s(f"{filters.job_type}#~")
        elif filters.job_type:
            condition += f" AND begins_with({sort_name}, :prefix)"
            values[":prefix"] = s(f"{filters.job_type}#")

        def call(limit: int) -> dict[str, Any]:
            return {
                "TableName": self._settings.state_table,
                "IndexName": index,
                "KeyConditionExpression": condition,
                "ExpressionAttributeValues": values,
                "Limit": max(limit, 1),
            }

        return call

    def _scan(self, filters: Filters) -> Callable[[int], dict[str, Any]]:
        request: dict[str, Any] = {
            "TableName": self._settings.jobs_table,
            "ProjectionExpression": "operation_id, job_type, correlation_id",
        }
        conditions, values = [], {}
        if filters.job_type:
            conditions.append("job_type = :job_type")
            values[":job_type"] = s(filters.job_type)
        if filters.correlation_id is not None:
            conditions.append("correlation_id = :correlation_id")
            values[":correlation_id"] = s(filters.correlation_id)
        if conditions:
            request["FilterExpression"] = " AND ".join(conditions)
            request["ExpressionAttributeValues"] = values

        def call(limit: int) -> dict[str, Any]:
            return {**request, "Limit": max(limit, 1)}

        return call

    def _refine(self, rows: list[dict[str, Any]], filters: Filters, source: str) -> list[dict[str, Any]]:
        """Join each row with the record the other table holds, then apply the filters neither key served."""
        if not rows:
            return rows
        ids = [str(row["operation_id"]) for row in rows]
        if source == "index":
            requests = self._batch_get(self._settings.jobs_table, ids, ["operation_id", "correlation_id"])
            for row in rows:
                row["correlation_id"] = requests.get(row["operation_id"], {}).get("correlation_id", {}).get("S")
            if filters.correlation_id is not None:
                rows = [row for row in rows if row["correlation_id"] == filters.correlation_id]
        else:
            records = self._batch_get(self._settings.state_table, ids, SCAN_PROJECTION)
            rows = [_scan_row(row, records.get(row["operation_id"])) for row in rows]
            if filters.state is not None:
                rows = [row for row in rows if row["state"] == filters.state]
        if filters.since is not None:
            cutoff = iso(filters.since)
            rows = [row for row in rows if str(row.get("listed_at") or row.get("updated_at") or "") >= cutoff]
        return rows

    def _batch_get(self, table: str, operation_ids: list[str], attributes: list[str]) -> dict[str, dict[str, Any]]:
        """The items of these ids (BatchGetItem, a hundred a call), by id."""
        names = {f"#a{n}": name for n, name in enumerate(attributes)}
        found: dict[str, dict[str, Any]] = {}
        for start in range(0, len(operation_ids), 100):
            keys: list[dict[str, Any]] = [{"operation_id": s(i)} for i in operation_ids[start : start + 100]]
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
                for item in response.get("Responses", {}).get(table, []):
                    found[item["operation_id"]["S"]] = item
                keys = response.get("UnprocessedKeys", {}).get(table, {}).get("Keys", [])
        return found


def _scan_row(request: dict[str, Any], item: dict[str, Any] | None) -> dict[str, Any]:
    """A request joined with its state record (none yet: ACCEPTED, not yet taken by a worker)."""
    operation_id = request["operation_id"]
    record = record_from_item(item) if item else StateRecord.absent(operation_id)
    row: dict[str, Any] = {
        "operation_id": operation_id,
        "job_type": record.job_type or request.get("job_type"),
        "correlation_id": request.get("correlation_id"),
        "state": record.state.value,
        "attempts": record.attempts,
        "last_error": record.last_error,
        "updated_at": record.updated_at,
    }
    if record.stuck_kind:
        row["stuck_kind"], row["stuck_reason"] = record.stuck_kind, record.stuck_reason
    return row


def _request_row(item: dict[str, Any]) -> dict[str, Any]:
    return {name: value["S"] for name, value in item.items() if isinstance(value, dict) and "S" in value}
