"""Signal items in the markers table: one per (operation, wait name), beside the operation's step markers.

The item's key is the operation's partition (`pk` "operation#<id>") and `sk` "signal#<name>". It is written by a
conditional put (`attribute_not_exists`), by whichever comes first: a sender's signal (`receive`) or the wait's
timeout (`time_out`). What it holds then is the wait's outcome for good: a second put of either finds it, and is
answered with it (ReturnValuesOnConditionCheckFailure, no second read). A later signal under another id is
refused and appended to the item's `refused` list (bounded; the rest counted), so it is listed, never dropped.
The payload is stored as compact JSON (screened before: identifiers and small numbers, `converge.screening`).
"""

from __future__ import annotations

import json
from typing import Any

from botocore.exceptions import ClientError

from converge.model.clock import Clock, SystemClock, iso
from converge.model.records import clip
from converge.model.signals import REFUSED_KEPT, RefusedSignal, SignalKind, SignalRecord
from converge.store.codecs import number_value, string_value
from converge.store.conditions import condition_failed
from converge.store.partitions import items_of, operation_id_of, operation_key, put_unless_held
from converge.store.updates import Update

SIGNAL_SK = "signal#"
TIMEOUT_ID = "timeout"
"""The signal id a timeout's item records (a sender's id is screened like an operation id; this one is fixed)."""


class SignalStore:
    """The operations' signal items in the markers table (partition key `pk`, sort key `sk`)."""

    def __init__(self, table_name: str, dynamodb_client: Any, clock: Clock | None = None) -> None:
        self._table = table_name
        self._client = dynamodb_client
        self._clock = clock or SystemClock()

    def receive(
        self, operation_id: str, name: str, signal_id: str, payload: dict[str, Any], sent_by: str
    ) -> SignalRecord | None:
        """Keep a signal for the wait `name`, unless the wait has its outcome: None when kept, else the item that
        holds the outcome (this same signal when its id was received before)."""
        item = self._item(operation_id, name, SignalKind.SIGNAL, signal_id, sent_by)
        item["payload"] = string_value(json.dumps(payload, separators=(",", ":"), sort_keys=True))
        return self._put_first(item)

    def time_out(self, operation_id: str, name: str) -> SignalRecord | None:
        """Record that the wait's time came first: None when recorded, else the signal that came before it."""
        return self._put_first(self._item(operation_id, name, SignalKind.TIMEOUT, TIMEOUT_ID, "converge"))

    def refuse(self, operation_id: str, name: str, refused: RefusedSignal) -> None:
        """List a signal refused because its wait had its outcome: kept on the item (the first ones; later
        ones counted), so a refusal is never silent."""
        key = _key(operation_id, name)
        update = Update().append(
            "refused", [{"M": {k: string_value(v) for k, v in refused.to_item().items()}}], start=[]
        )
        cap = update.value(number_value(REFUSED_KEPT))
        update.require(f"attribute_not_exists({update.name('refused')}) OR size({update.name('refused')}) < {cap}")
        try:
            self._client.update_item(**update.request(self._table, key))
        except ClientError as exc:
            if not condition_failed(exc):
                raise
            self._client.update_item(**Update().add("refused_dropped").request(self._table, key))

    def get(self, operation_id: str, name: str) -> SignalRecord | None:
        """The wait's item, read strongly consistent (None: neither a signal nor its timeout yet)."""
        response = self._client.get_item(TableName=self._table, Key=_key(operation_id, name), ConsistentRead=True)
        item = response.get("Item")
        return _record(item) if item else None

    def all(self, operation_id: str) -> tuple[SignalRecord, ...]:
        """Every signal item of the operation (one Query of its partition's signal items), by time."""
        found = (_record(item) for item in items_of(self._client, self._table, operation_id, SIGNAL_SK))
        return tuple(sorted(found, key=lambda record: record.at))

    def _put_first(self, item: dict[str, Any]) -> SignalRecord | None:
        condition = Update()
        condition.require(f"attribute_not_exists({condition.name('pk')})")
        held = put_unless_held(self._client, self._table, item, condition)
        return None if held is None else _record(held)

    def _item(self, operation_id: str, name: str, kind: SignalKind, signal_id: str, sent_by: str) -> dict[str, Any]:
        return {
            **_key(operation_id, name),
            "kind": string_value(kind),
            "signal_id": string_value(signal_id),
            "at": string_value(iso(self._clock.now())),
            "sent_by": string_value(clip(sent_by)),
        }  # no `expires_at`: kept as long as the operation's record, as its step markers are


def _key(operation_id: str, name: str) -> dict[str, Any]:
    return operation_key(operation_id, f"{SIGNAL_SK}{name}")


def _record(item: dict[str, Any]) -> SignalRecord:
    stored = item.get("payload", {}).get("S")
    refused = tuple(
        RefusedSignal(**{k: v.get("S", "") for k, v in entry["M"].items()})
        for entry in item.get("refused", {}).get("L", [])
        if isinstance(entry, dict) and "M" in entry
    )
    return SignalRecord(
        operation_id=operation_id_of(item),
        name=item["sk"]["S"].removeprefix(SIGNAL_SK),
        kind=SignalKind(item["kind"]["S"]),
        signal_id=item["signal_id"]["S"],
        at=item["at"]["S"],
        sent_by=item.get("sent_by", {}).get("S", ""),
        payload=json.loads(stored) if stored else {},
        refused=refused,
        refused_dropped=int(item.get("refused_dropped", {}).get("N", "0")),
    )
