"""A concurrency cap's keys in the markers table: one item per key, the operations running under it.

The item is `pk` "running#<cap>", `sk` "key#<key>", and `holders`, a map of operation id to the time its slot
lapses (whole milliseconds: its lease's end, so a crashed holder's slot comes back when its lease would).
Taking a slot reads nothing: one conditional UpdateItem adds the operation to the map while it holds fewer than
the limit (on the key's first use that one is refused, and a second makes the map holding the slot). A refusal
returns the item (ReturnValuesOnConditionCheckFailure): holders whose slots lapsed are removed (each only if
unchanged) and the slot tried again; live ones say when the earliest may free one. Giving a slot back removes the
operation from the map (one UpdateItem, whatever the map holds). The items of one cap share its partition: its
keys are listed with one Query, and each lives a day past its last slot taken.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError

from converge.model.concurrency import Running
from converge.store.codecs import number_value, string_value
from converge.store.conditions import condition_failed, failed_item

RUNNING_PK = "running#"
KEY_SK = "key#"
KEPT_SECONDS = 24 * 3600


@dataclass(frozen=True)
class Taken:
    """What one try to take a slot found: `taken` (this call added the operation), `already` (a live slot of the
    same operation, another delivery of it), and the live holders when refused."""

    taken: bool
    already: bool = False
    holders: dict[str, float] = field(default_factory=dict)


class ConcurrencyTable:
    """Concurrency caps' running operations per key: a slot taken in one write, given back in one."""

    def __init__(self, table_name: str, dynamodb_client: Any) -> None:
        self._table = table_name
        self._client = dynamodb_client

    def take(self, cap: str, key: str, operation_id: str, until: float, limit: int, now: float) -> Taken:
        """Hold one of the key's `limit` slots for `operation_id` until `until` (epoch seconds)."""
        until_ms, now_ms = math.ceil(until * 1000), math.floor(now * 1000)
        holders: dict[str, int] = {}
        for _ in range(4):  # at most: create the map, reclaim lapsed slots, a race lost to another taker, the take
            try:
                self._update(
                    cap,
                    key,
                    "SET #h.#o = :until, #e = :kept",
                    "attribute_exists(#h) AND attribute_not_exists(#h.#o) AND size(#h) < :limit",
                    {"#h": "holders", "#o": operation_id, "#e": "expires_at"},
                    {
                        ":until": number_value(until_ms),
                        ":kept": number_value(until_ms // 1000 + KEPT_SECONDS),
                        ":limit": number_value(limit),
                    },
                )
                return Taken(True)
            except ClientError as exc:
                if not condition_failed(exc):
                    raise
                item = failed_item(exc)
            if item is None or "holders" not in item:
                # No item came back: the key's first use (no read), unless the refusal dropped it (an emulator)
                if self._create(cap, key, operation_id, until_ms):
                    return Taken(True)
                item = self._read(cap, key)
                if item is None or "holders" not in item:
                    continue
            holders = {op: int(v["N"]) for op, v in item["holders"].get("M", {}).items()}
            mine = holders.get(operation_id)
            if mine is not None and mine > now_ms:
                return Taken(False, already=True)  # another delivery of it runs: the lease decides which
            lapsed = {op: at for op, at in holders.items() if at <= now_ms}
            if not lapsed:
                return Taken(False, holders={op: at / 1000 for op, at in holders.items()})
            self._reclaim(cap, key, lapsed)
        live = {op: at / 1000 for op, at in holders.items() if at > now_ms}
        return Taken(False, holders=live)

    def give_back(self, cap: str, key: str, operation_id: str) -> None:
        """The operation's slot free again (nothing when it holds none, or the item is gone)."""
        try:
            self._update(cap, key, "REMOVE #h.#o", "attribute_exists(#h)", {"#h": "holders", "#o": operation_id}, {})
        except ClientError as exc:
            if not condition_failed(exc):
                raise

    def keys(self, cap: str) -> list[Running]:
        """The cap's keys used within the last day, with their holders: one Query (more pages only for many keys)."""
        found: list[Running] = []
        request: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "pk = :pk",
            "ExpressionAttributeValues": {":pk": string_value(RUNNING_PK + cap)},
        }
        while True:
            response = self._client.query(**request)
            for item in response["Items"]:
                sk = item.get("sk", {}).get("S", "")
                if sk.startswith(KEY_SK):
                    holders = {op: int(v["N"]) / 1000 for op, v in item.get("holders", {}).get("M", {}).items()}
                    found.append(Running(cap, sk[len(KEY_SK) :], holders))
            if "LastEvaluatedKey" not in response:
                return found
            request["ExclusiveStartKey"] = response["LastEvaluatedKey"]

    # -- the writes ----------------------------------------------------------------------------------------------

    def _create(self, cap: str, key: str, operation_id: str, until_ms: int) -> bool:
        """The key's first use: its map made holding this operation's slot; False when it has a map already
        (another taker made it first: the take is tried again)."""
        try:
            self._update(
                cap,
                key,
                "SET #h = :holders, #e = :kept",
                "attribute_not_exists(#h)",
                {"#h": "holders", "#e": "expires_at"},
                {
                    ":holders": {"M": {operation_id: number_value(until_ms)}},
                    ":kept": number_value(until_ms // 1000 + KEPT_SECONDS),
                },
            )
        except ClientError as exc:
            if not condition_failed(exc):
                raise
            return False
        return True

    def _reclaim(self, cap: str, key: str, lapsed: dict[str, int]) -> None:
        """Remove holders whose slots lapsed (crashed, or timed out), each only while unchanged."""
        names: dict[str, str] = {"#h": "holders"}
        values: dict[str, Any] = {}
        removes, conditions = [], []
        for index, (operation_id, at) in enumerate(sorted(lapsed.items())):
            names[f"#l{index}"] = operation_id
            values[f":l{index}"] = number_value(at)
            removes.append(f"#h.#l{index}")
            conditions.append(f"#h.#l{index} = :l{index}")
        try:
            self._update(cap, key, "REMOVE " + ", ".join(removes), " AND ".join(conditions), names, values)
        except ClientError as exc:
            if not condition_failed(exc):
                raise

    def _update(
        self, cap: str, key: str, expression: str, condition: str, names: dict[str, str], values: dict[str, Any]
    ) -> None:
        request: dict[str, Any] = {
            "TableName": self._table,
            "Key": _key(cap, key),
            "UpdateExpression": expression,
            "ConditionExpression": condition,
            "ExpressionAttributeNames": names,
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
        if values:
            request["ExpressionAttributeValues"] = values
        self._client.update_item(**request)

    def _read(self, cap: str, key: str) -> dict[str, Any] | None:
        item: dict[str, Any] | None = self._client.get_item(
            TableName=self._table, Key=_key(cap, key), ConsistentRead=True
        ).get("Item")
        return item


def _key(cap: str, key: str) -> dict[str, Any]:
    return {"pk": string_value(RUNNING_PK + cap), "sk": string_value(KEY_SK + key)}
