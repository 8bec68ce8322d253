"""The batches table: each batch's record, its counting shards and the keys of its children.

One table, one partition key (`pk`), three kinds of item, none of whose keys an operation id can take
(operation ids hold no '#'):
- the record, under the batch id: its state (admitting, open, complete), the fingerprint of its whole manifest,
  its child count and shard count, the callback's job type, its progress, and once complete the counts the
  callback was given and the changes made after it;
- a counting shard per CHILDREN_PER_SHARD children, under "<batch>#s<n>": a list with a place for each child it
  counts, holding the letter of the final state the child counts as ("-" until it is final). The counter, reading
  the state table's stream, sets the places of the children a stream batch made final (`place`): a child holds one
  place, so setting it again (a stream batch given again) never counts it twice;
- the keys of each chunk of children, under "<batch>#k<n>", so the children can be paged through.
The children's requests go to the jobs table (their stream is the outbox, as for any operation).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from botocore.exceptions import ClientError

from converge.model.batches import COUNT_CODES, NOT_FINAL, STATE_OF_CODE, Batch, BatchChange, BatchState
from converge.model.errors import UnusableRequest
from converge.model.request import JobRequest
from converge.model.states import OperationState
from converge.store.codecs import number_value, request_from_image, request_item, string_value
from converge.store.conditions import condition_failed, met_item
from converge.store.transact import cancellation_reasons, failed_index
from converge.store.updates import Update

CHANGES_LIMIT = 20
"""The changes after the callback a batch's record keeps by name (later ones are counted)."""

PLACES_PER_WRITE = 100
"""Places set by one UpdateItem (its expression stays well under DynamoDB's 4 KB): a shard's 250 in three writes."""

_WRITE_BATCH = 25
_GET_BATCH = 100


def batch_key(batch_id: str) -> dict[str, Any]:
    return {"pk": string_value(batch_id)}


def shard_key(batch_id: str, shard: int) -> dict[str, Any]:
    return {"pk": string_value(f"{batch_id}#s{shard}")}


def keys_key(batch_id: str, chunk: int) -> dict[str, Any]:
    return {"pk": string_value(f"{batch_id}#k{chunk}")}


class BatchesTable:
    """Every read and write of the batches table, and the children's requests (BatchWriteItem, jobs table)."""

    def __init__(self, table_name: str, jobs_table: str, dynamodb_client: Any, sleep: Any = time.sleep) -> None:
        self._table = table_name
        self._jobs = jobs_table
        self._client = dynamodb_client
        self._sleep = sleep

    # -- admission ---------------------------------------------------------------------------------------------

    def begin(
        self,
        batch_id: str,
        fingerprint: str,
        total: int,
        shards: int,
        callback_job_type: str,
        callback_payload: dict[str, Any],
        at: str,
    ) -> Batch | None:
        """Write the batch's record, "admitting", unless the id exists: None when written, else the batch that
        holds the id (the caller compares its fingerprint)."""
        item = {
            "pk": string_value(batch_id),
            "kind": string_value("batch"),
            "state": string_value(BatchState.ADMITTING),
            "fingerprint": string_value(fingerprint),
            "total": number_value(total),
            "shards": number_value(shards),
            "callback_job_type": string_value(callback_job_type),
            "callback_payload": request_item(JobRequest(batch_id, callback_job_type, callback_payload))["payload"],
            "created_at": string_value(at),
            "written": number_value(0),
            "chunks": number_value(0),
        }
        try:
            self._client.put_item(
                TableName=self._table,
                Item=item,
                ConditionExpression="attribute_not_exists(pk)",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as exc:
            if not condition_failed(exc):
                raise
            return self.decode(met_item(exc, lambda: self.record_item(batch_id)) or item)
        return None

    def ensure_shards(self, batch_id: str, expected: Sequence[int]) -> None:
        """The counting shards, each with a place for every child it counts ("-": not final yet); one that exists is
        kept (its counts may have begun)."""
        for shard, count in enumerate(expected):
            places = {"L": [string_value(NOT_FINAL)] * count}
            update = Update().set_if_absent("kind", string_value("shard")).set_if_absent("children", places)
            self._client.update_item(**update.request(self._table, shard_key(batch_id, shard)))

    def write_chunk(self, batch_id: str, chunk: int, keys: Sequence[str], requests: Sequence[JobRequest]) -> None:
        """One chunk of children: their keys (for paging), their requests (BatchWriteItem, 25 at a time, what
        is left unprocessed sent again), then the record's progress. Written again on a retry, the same content."""
        self._client.put_item(
            TableName=self._table,
            Item={
                **keys_key(batch_id, chunk),
                "kind": string_value("keys"),
                "keys": {"L": [string_value(key) for key in keys]},
            },
        )
        for start in range(0, len(requests), _WRITE_BATCH):
            puts = [{"PutRequest": {"Item": request_item(r)}} for r in requests[start : start + _WRITE_BATCH]]
            self._write_all(puts)
        update = Update().add("written", len(requests)).set("chunks", number_value(chunk + 1))
        update.require(f"{update.name('chunks')} = {update.value(number_value(chunk))}")
        try:
            self._client.update_item(**update.request(self._table, batch_key(batch_id)))
        except ClientError as exc:
            if not condition_failed(exc):
                raise  # another admission recorded this chunk already: nothing to add

    def _write_all(self, puts: list[dict[str, Any]]) -> None:
        pending = {self._jobs: puts}
        for attempt in range(8):
            answer = self._client.batch_write_item(RequestItems=pending)
            pending = answer.get("UnprocessedItems") or {}
            if not pending:
                return
            self._sleep(min(1.0, 0.05 * 2**attempt))
        raise RuntimeError("the jobs table left children unprocessed after 8 attempts; enqueue the batch again")

    def open(self, batch_id: str, at: str) -> None:
        """Every child is written: the batch is open (a record already open or complete is left as it is)."""
        update = Update().set("state", string_value(BatchState.OPEN)).set("opened_at", string_value(at))
        update.require(f"{update.name('state')} = {update.value(string_value(BatchState.ADMITTING))}")
        try:
            self._client.update_item(**update.request(self._table, batch_key(batch_id)))
        except ClientError as exc:
            if not condition_failed(exc):
                raise

    # -- counting ----------------------------------------------------------------------------------------------

    def place(self, batch_id: str, shard: int, places: Mapping[int, OperationState]) -> tuple[str, str] | None:
        """Each child's counted state at its place on its shard, PLACES_PER_WRITE places an UpdateItem (setting a
        letter again is harmless: a stream batch given again writes the same letters). The shard's letters before
        and after; None when the shard does not exist, is shorter (no batch admitted those children there) or holds
        no list (an earlier converge wrote it)."""
        ordered = sorted(places.items())
        before: list[str] = []
        after: list[str] = []
        for start in range(0, len(ordered), PLACES_PER_WRITE):
            part = ordered[start : start + PLACES_PER_WRITE]
            update = Update()
            for place, state in part:
                update.set_element("children", place, string_value(COUNT_CODES[state]))
            # No shard, or one of the earlier shape (no list; `_shard`): the first condition fails, and nothing is set.
            update.require(f"attribute_exists({update.name('children')})")
            update.require(f"size({update.name('children')}) > {update.value(number_value(part[-1][0]))}")
            try:
                answer = self._client.update_item(
                    **update.request(self._table, shard_key(batch_id, shard), ReturnValues="ALL_OLD")
                )
            except ClientError as exc:
                if not condition_failed(exc):
                    raise
                return None
            old = _letters(answer.get("Attributes", {}))
            before = before or list(old)
            after = old
            for place, state in part:
                before[place] = old[place]
                after[place] = COUNT_CODES[state]
        return "".join(before), "".join(after)

    def shard_counts(self, batch_id: str, shard: int) -> tuple[int, dict[str, int]] | None:
        """One shard's expected children and its counts, read strongly consistent (None: no such shard)."""
        item = self._client.get_item(TableName=self._table, Key=shard_key(batch_id, shard), ConsistentRead=True)
        found = item.get("Item")
        return _shard(found) if found else None

    def all_counts(self, batch_id: str, shards: int) -> list[tuple[int, dict[str, int]]]:
        """Every shard's expected children and counts, read strongly consistent (BatchGetItem, 100 at a time)."""
        found: dict[str, dict[str, Any]] = {}
        keys = [shard_key(batch_id, shard) for shard in range(shards)]
        for start in range(0, len(keys), _GET_BATCH):
            pending: dict[str, Any] = {self._table: {"Keys": keys[start : start + _GET_BATCH], "ConsistentRead": True}}
            for attempt in range(8):
                answer = self._client.batch_get_item(RequestItems=pending)
                for item in answer.get("Responses", {}).get(self._table, []):
                    found[item["pk"]["S"]] = item
                pending = answer.get("UnprocessedKeys") or {}
                if not pending:
                    break
                self._sleep(min(1.0, 0.05 * 2**attempt))
        return [_shard(found[key["pk"]["S"]]) for key in keys if key["pk"]["S"] in found]

    # -- completion --------------------------------------------------------------------------------------------

    def complete(self, batch_id: str, callback: JobRequest, summary: Mapping[str, int], at: str) -> bool:
        """In one transaction: the callback's request (conditional on its id being new) and the record
        "complete" with the counts the callback was given (conditional on it being open). True when this
        call wrote them; False when the batch was complete already (or is not open)."""
        record = (
            Update()
            .set("state", string_value(BatchState.COMPLETE))
            .set("completed_at", string_value(at))
            .remove("listed")
        )
        record.set("summary", {"M": {state: number_value(count) for state, count in summary.items()}})
        record.require(f"{record.name('state')} = {record.value(string_value(BatchState.OPEN))}")
        put = {
            "TableName": self._jobs,
            "Item": request_item(callback),
            "ConditionExpression": "attribute_not_exists(operation_id)",
        }
        try:
            self._client.transact_write_items(
                TransactItems=[{"Put": put}, {"Update": record.request(self._table, batch_key(batch_id))}]
            )
        except ClientError as exc:
            reasons = cancellation_reasons(exc)
            if reasons is None or failed_index(reasons) is None:
                raise
            return False
        return True

    def record_change(self, batch_id: str, change: BatchChange) -> None:
        """A child's final state changed after the callback: counted on the record, and kept by name (the first
        CHANGES_LIMIT)."""
        entry = {
            "M": {
                "at": string_value(change.at),
                "child": string_value(change.child),
                "before": string_value(change.before),
                "after": string_value(change.after),
            }
        }
        update = Update().add("changes_after_callback").append("changes", [entry], start=[])
        changes = update.name("changes")
        update.require(
            f"attribute_not_exists({changes}) OR size({changes}) < {update.value(number_value(CHANGES_LIMIT))}"
        )
        try:
            self._client.update_item(**update.request(self._table, batch_key(batch_id)))
        except ClientError as exc:
            if not condition_failed(exc):
                raise
            overflow = Update().add("changes_after_callback")
            self._client.update_item(**overflow.request(self._table, batch_key(batch_id)))

    def mark_cancelled(self, batch_id: str, note: str) -> None:
        """Record on the batch who cancelled it, when and why (the first cancel's words are kept)."""
        update = Update().set_if_absent("cancelled", string_value(note))
        self._client.update_item(**update.request(self._table, batch_key(batch_id)))

    def list_reason(self, batch_id: str, reason: str | None, seen_state: BatchState) -> bool:
        """The reconciler's finding on a batch that cannot finish by itself (`reason`), or none (None): set on its
        record while it is still in `seen_state`; False if it moved meanwhile."""
        update = Update()
        if reason is None:
            update.remove("listed")
        else:
            update.set("listed", string_value(reason))
        update.require(f"{update.name('state')} = {update.value(string_value(seen_state))}")
        try:
            self._client.update_item(**update.request(self._table, batch_key(batch_id)))
        except ClientError as exc:
            if not condition_failed(exc):
                raise
            return False
        return True

    def unfinished(self) -> Iterator[Batch]:
        """The records of batches not complete (admitting or open): a Scan of the table filtered on the server,
        page after page (its cost grows with the table; the reconciler's, never the happy path)."""
        request: dict[str, Any] = {
            "TableName": self._table,
            "FilterExpression": "#kind = :batch AND #state <> :complete",
            "ExpressionAttributeNames": {"#kind": "kind", "#state": "state"},
            "ExpressionAttributeValues": {
                ":batch": string_value("batch"),
                ":complete": string_value(BatchState.COMPLETE),
            },
        }
        while True:
            answer = self._client.scan(**request)
            for item in answer["Items"]:
                yield batch_from_item(item, {})
            if "LastEvaluatedKey" not in answer:
                return
            request["ExclusiveStartKey"] = answer["LastEvaluatedKey"]

    # -- reads -------------------------------------------------------------------------------------------------

    @staticmethod
    def decode(item: Mapping[str, Any]) -> Batch:
        """A record item as a Batch (without its counts)."""
        return batch_from_item(item, {})

    def record(self, batch_id: str) -> Batch | None:
        """The batch's record without its counts, read strongly consistent (None: no such batch)."""
        return self.batch(batch_id, with_counts=False)

    def record_item(self, batch_id: str) -> dict[str, Any] | None:
        response = self._client.get_item(TableName=self._table, Key=batch_key(batch_id), ConsistentRead=True)
        return response.get("Item")

    def batch(self, batch_id: str, with_counts: bool = True) -> Batch | None:
        """The batch's record, with its counts summed over its shards (one BatchGetItem per 100 shards)."""
        item = self.record_item(batch_id)
        if item is None or _text(item, "kind") != "batch":
            return None
        counts: dict[str, int] = {}
        if with_counts:
            for _, shard in self.all_counts(batch_id, int(_number(item, "shards"))):
                for state, count in shard.items():
                    counts[state] = counts.get(state, 0) + count
        return batch_from_item(item, counts)

    def batches(self, limit: int, after: str | None, *, listed_only: bool) -> tuple[list[Batch], str | None]:
        """Batches' records (without their counts), a page at a time: a Scan of the table's record items,
        for an operator (its cost grows with the table, shards and keys items included). `listed_only`: those
        the reconciler listed as unable to finish by themselves."""
        found: list[Batch] = []
        request: dict[str, Any] = {
            "TableName": self._table,
            "FilterExpression": "#kind = :batch" + (" AND attribute_exists(#listed)" if listed_only else ""),
            "ExpressionAttributeNames": {"#kind": "kind", **({"#listed": "listed"} if listed_only else {})},
            "ExpressionAttributeValues": {":batch": string_value("batch")},
        }
        if after:
            request["ExclusiveStartKey"] = {"pk": string_value(after)}
        while True:
            answer = self._client.scan(**request)
            for item in answer["Items"]:
                found.append(batch_from_item(item, {}))
                if len(found) == limit:
                    return found, item["pk"]["S"]
            if "LastEvaluatedKey" not in answer:
                return found, None
            request["ExclusiveStartKey"] = answer["LastEvaluatedKey"]

    def keys(self, batch_id: str, chunk: int, consistent: bool = False) -> list[str] | None:
        """One chunk's child keys, in admission order (None past the last chunk written); `consistent`: a strongly
        consistent read (a chunk written a moment ago is seen)."""
        key = keys_key(batch_id, chunk)
        response = self._client.get_item(TableName=self._table, Key=key, ConsistentRead=consistent)
        item = response.get("Item")
        if item is None:
            return None
        return [entry["S"] for entry in item.get("keys", {}).get("L", []) if "S" in entry]

    def all_keys(self, batch_id: str) -> Iterator[str]:
        chunk = 0
        while (keys := self.keys(batch_id, chunk)) is not None:
            yield from keys
            chunk += 1


def _text(item: Mapping[str, Any], name: str) -> str | None:
    value = item.get(name)
    return value.get("S") if isinstance(value, dict) else None


def _number(item: Mapping[str, Any], name: str) -> float:
    value = item.get(name)
    try:
        return float(value["N"]) if isinstance(value, dict) and "N" in value else 0.0
    except (TypeError, ValueError):
        return 0.0


def _letters(item: Mapping[str, Any]) -> list[str]:
    """A counting shard's letters, a child's place each (an item of another shape has none)."""
    places = item.get("children")
    entries = places.get("L", []) if isinstance(places, dict) else []
    return [
        entry["S"] if isinstance(entry, dict) and isinstance(entry.get("S"), str) else NOT_FINAL for entry in entries
    ]


def _shard(item: Mapping[str, Any]) -> tuple[int, dict[str, int]]:
    """A counting shard's children and how many of them are counted in each final state."""
    if "children" not in item and "expected" in item:
        # A shard an earlier converge wrote (a number a state, added by each settle): read as it stands, so the
        # batch never looks complete with none of its children counted (see docs/deploying.md, upgrading).
        earlier = {state.value: int(_number(item, state.value)) for state in COUNT_CODES if state.value in item}
        return int(_number(item, "expected")), earlier
    letters = _letters(item)
    counts: dict[str, int] = {}
    for letter in letters:
        state = STATE_OF_CODE.get(letter)
        if state is not None:
            counts[state.value] = counts.get(state.value, 0) + 1
    return len(letters), counts


def batch_from_item(item: Mapping[str, Any], counts: Mapping[str, int]) -> Batch:
    summary = item.get("summary", {}).get("M") if isinstance(item.get("summary"), dict) else None
    changes = []
    for entry in item.get("changes", {}).get("L", []) if isinstance(item.get("changes"), dict) else []:
        fields = entry.get("M", {})
        changes.append(BatchChange(*(_text(fields, name) or "" for name in ("at", "child", "before", "after"))))
    return Batch(
        batch_id=_text(item, "pk") or "",
        state=BatchState(_text(item, "state") or BatchState.ADMITTING),
        fingerprint=_text(item, "fingerprint") or "",
        total=int(_number(item, "total")),
        shards=int(_number(item, "shards")),
        callback_job_type=_text(item, "callback_job_type") or "",
        created_at=_text(item, "created_at") or "",
        written=int(_number(item, "written")),
        chunks=int(_number(item, "chunks")),
        counts=dict(counts),
        opened_at=_text(item, "opened_at"),
        completed_at=_text(item, "completed_at"),
        summary={name: int(_number(summary, name)) for name in summary} if summary is not None else None,
        changes=tuple(changes),
        changes_after_callback=int(_number(item, "changes_after_callback")),
        cancelled=_text(item, "cancelled"),
        listed=_text(item, "listed"),
        callback_payload=_callback_payload(item),
    )


def _callback_payload(item: Mapping[str, Any]) -> dict[str, Any]:
    """The callback's payload as admitted (the batch's summary is added when it is written); {} when unreadable."""
    image = {
        "operation_id": item.get("pk"),
        "job_type": item.get("callback_job_type"),
        "payload": item.get("callback_payload"),
    }
    try:
        return dict(request_from_image(image).payload)
    except UnusableRequest:
        return {}
