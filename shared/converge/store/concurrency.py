"""A concurrency cap's keys in the markers table: one item per key, the operations running under it.

The item is `pk` "running#<cap>", `sk` "key#<key>", and `holders`, a map of operation id to the time its slot
lapses (whole milliseconds: its lease's end, so a crashed holder's slot comes back when its lease would).
Taking a slot reads nothing: one conditional UpdateItem adds the operation to the map while it holds fewer than
the limit (on the key's first use that one is refused, and a second makes the map holding the slot). A refusal
returns the item (ReturnValuesOnConditionCheckFailure): holders whose slots lapsed are removed (each only if
unchanged) and the slot tried again; live ones say when the earliest may free one. Giving a slot back removes the
operation from the map while it holds the slot that delivery took (one UpdateItem): a delivery whose lease lapsed
and was taken over never frees its successor's slot. The items of one cap share its partition: its
keys are listed with one Query, and each lives a day past its last slot taken.

A cap in replace mode keeps `newest` on the item too, the newest request the key has seen (its id and when it was
accepted, in milliseconds): the same write that takes a slot requires the taker not older and makes it the newest;
refused while the key is full, the request makes itself the newest (one more write), so that the one it displaces
ends NOOP on its return. An operator's pause is `paused_by` and `paused_at` on the item (no take passes while they
are there, and the item does not expire); the release removes them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError

from converge.model.concurrency import Running
from converge.store.codecs import number_value, string_value
from converge.store.concurrency_operator import KEPT_SECONDS, OperatorWrites
from converge.store.concurrency_order import Newest, not_older
from converge.store.conditions import condition_failed, failed_item
from converge.store.flow_keys import key_item, key_items

RUNNING_PK = "running#"
MAX_FORGOTTEN = 20
"""At most this many stale waiters are forgotten by one note (the map stays bounded by the live ones)."""


@dataclass(frozen=True)
class Taken:
    """What one try to take a slot found: `taken` (this call added the operation), `already` (a live slot of the
    same operation, another delivery of it), and the live holders when refused; in replace mode `replaced_by`, the
    newer request that displaced this one; `paused_by`, the operator who paused the key."""

    taken: bool
    already: bool = False
    holders: dict[str, float] = field(default_factory=dict)
    replaced_by: str | None = None
    paused_by: str | None = None
    waiting: dict[str, float] = field(default_factory=dict)
    """When refused: the operations noted as waiting on the key, each with when it tries again."""
    paused_at: float | None = None
    """When paused: since when (epoch seconds), as the operator's pause recorded it."""


class ConcurrencyTable(OperatorWrites):
    """Concurrency caps' running operations per key: a slot taken in one write, given back in one."""

    def __init__(self, table_name: str, dynamodb_client: Any) -> None:
        self._table = table_name
        self._client = dynamodb_client

    def take(
        self,
        cap: str,
        key: str,
        operation_id: str,
        until: float,
        limit: int,
        now: float,
        me: Newest | None = None,
    ) -> Taken:
        """Hold one of the key's `limit` slots for `operation_id` until `until` (epoch seconds). With `me` (replace
        mode: this request and when it was accepted) the taker must be the key's newest request, and a refused one
        becomes it. A request whose acceptance is unknown (0: a message sent again) passes only as the newest; refused,
        it waits if no newer one is there (it is the newest, or the key has none: a key paused before any request)."""
        until_ms, now_ms = _whole_ms(until), math.floor(now * 1000)
        holders: dict[str, int] = {}
        for _ in range(5):  # at most: create the map, reclaim lapsed slots, a race lost, become the newest, the take
            names = {"#h": "holders", "#o": operation_id, "#e": "expires_at", "#p": "paused_by"}
            values = {
                ":until": number_value(until_ms),
                ":kept": number_value(until_ms // 1000 + KEPT_SECONDS),
                ":limit": number_value(limit),
            }
            expression = "SET #h.#o = :until, #e = :kept"
            condition = "attribute_exists(#h) AND attribute_not_exists(#h.#o) AND size(#h) < :limit"
            condition += " AND attribute_not_exists(#p)"
            if me is not None:
                condition += " AND " + not_older(names, values, me)
                if me.known:
                    expression += ", #n = :me"
            try:
                self._update(cap, key, expression, condition, names, values)
                return Taken(True)
            except ClientError as exc:
                if not condition_failed(exc):
                    raise
                item = failed_item(exc)
            if item is None or "holders" not in item:
                # No item came back: the key's first use (no read), unless the refusal dropped it (an emulator)
                if self._create(cap, key, operation_id, until_ms, me):
                    return Taken(True)
                item = self._read(cap, key)
                if item is None or "holders" not in item:
                    continue
            holders = {op: int(v["N"]) for op, v in item["holders"]["M"].items()}  # a map, always
            mine = holders.get(operation_id)
            if mine is not None and mine > now_ms:
                return Taken(False, already=True)  # another delivery of it runs: the lease decides which
            newest = Newest.of(item)
            if me is not None and newest is not None and newest.operation_id != operation_id and newest.newer_than(me):
                return Taken(False, replaced_by=newest.operation_id)
            live = {op: at / 1000 for op, at in holders.items() if at > now_ms}
            paused = item.get("paused_by", {}).get("S")
            paused_at = int(item["paused_at"]["N"]) / 1000 if paused is not None and "paused_at" in item else None
            waiting = _waiting(item)
            lapsed = {op: at for op, at in holders.items() if at <= now_ms}
            if lapsed and paused is None:
                self._reclaim(cap, key, lapsed)
                continue
            if len(holders) < limit and paused is None:
                continue  # a slot came free meanwhile (a race for the key's first use lost, or the newest changed)
            refused = Taken(False, holders=live, paused_by=paused, waiting=waiting, paused_at=paused_at)
            if me is None:
                return refused
            if not me.known or (newest is not None and newest.operation_id == operation_id):
                # the key's newest already, or a request sent again on a key with none (one whose acceptance is
                # unknown is never made the newest, and none newer is there): it waits
                return refused
            if self._become_newest(cap, key, me):
                return refused
        live = {op: at / 1000 for op, at in holders.items() if at > now_ms}
        return Taken(False, holders=live)

    def note_waiting(self, cap: str, key: str, operation_id: str, until: float, stale: list[str]) -> None:
        """Note a held operation on the key with when it tries again (the operator's queue depth and next start),
        and forget `stale` ones (waiters whose try is long past: they ran, ended or moved on)."""
        names = {"#w": "waiting", "#o": operation_id}
        removes = []
        for index, gone in enumerate(stale[:MAX_FORGOTTEN]):
            if gone != operation_id:
                names[f"#g{index}"] = gone
                removes.append(f"#w.#g{index}")
        expression = "SET #w.#o = :until" + (" REMOVE " + ", ".join(removes) if removes else "")
        values = {":until": number_value(_whole_ms(until))}
        try:
            self._update(cap, key, expression, "attribute_exists(#w)", names, values)
        except ClientError as exc:
            if not condition_failed(exc):
                raise
            # The key's first waiter: the map made holding it (an item made before waiters were noted has none)
            self._update(
                cap,
                key,
                "SET #w = :first",
                "attribute_exists(holders)",
                {"#w": "waiting"},
                {":first": {"M": {operation_id: values[":until"]}}},
            )

    def waiting_on(self, cap: str, key: str) -> dict[str, float]:
        """The operations noted as waiting on the key, each with when it tries again (one consistent read)."""
        item = self._read(cap, key)
        return _waiting(item) if item is not None else {}

    def give_back(self, cap: str, key: str, operation_id: str, until: float) -> bool:
        """The slot this delivery took (`until`, as it took it) free again. False, changing nothing, when the
        operation holds none, or holds one another delivery of it took since (a takeover after this one's lease
        lapsed: that one runs on in its slot), or the item is gone."""
        names = {"#h": "holders", "#o": operation_id}
        mine = {":mine": number_value(_whole_ms(until))}
        return self._applied(cap, key, "REMOVE #h.#o", "#h.#o = :mine", names, mine)

    def forget_newest(self, cap: str, key: str, operation_id: str) -> bool:
        """A replace-mode key's newest request forgotten, only while it is still `operation_id` (one that ended before
        it ran replaces nothing). False, changing nothing, when another is the newest now (or none is)."""
        names = {"#n": "newest", "#ni": "id"}
        return self._applied(cap, key, "REMOVE #n", "#n.#ni = :mi", names, {":mi": string_value(operation_id)})

    def keys(self, cap: str) -> list[Running]:
        """The cap's keys used within the last day, with their holders: one Query (more pages only for many keys)."""
        found: list[Running] = []
        for key, item in key_items(self._client, self._table, RUNNING_PK + cap):
            holders = {op: int(v["N"]) / 1000 for op, v in item.get("holders", {}).get("M", {}).items()}
            newest = Newest.of(item)
            paused = item.get("paused_by", {}).get("S")
            waiting = _waiting(item)
            newest_id = newest.operation_id if newest else None
            found.append(Running(cap, key, holders, newest_id, paused, waiting))
        return found

    # -- the writes ----------------------------------------------------------------------------------------------

    def _create(self, cap: str, key: str, operation_id: str, until_ms: int, me: Newest | None) -> bool:
        """The key's first use: its map made holding this operation's slot (and it the newest, in replace mode);
        False when it has a map already (another taker made it first: the take is tried again)."""
        names = {"#h": "holders", "#e": "expires_at"}
        values = {
            ":holders": {"M": {operation_id: number_value(until_ms)}},
            ":kept": number_value(until_ms // 1000 + KEPT_SECONDS),
        }
        expression = "SET #h = :holders, #e = :kept"
        if me is not None and me.known:
            names["#n"] = "newest"
            values[":me"] = me.value()
            expression += ", #n = :me"
        try:
            self._update(cap, key, expression, "attribute_not_exists(#h)", names, values)
        except ClientError as exc:
            if not condition_failed(exc):
                raise
            return False
        return True

    def _become_newest(self, cap: str, key: str, me: Newest) -> bool:
        """A replace-mode request refused a slot waits as the key's newest: False when a newer one is there (or the
        slot came free meanwhile: the take is tried again). Only a request whose acceptance is known is asked."""
        names = {"#h": "holders"}
        values: dict[str, Any] = {}
        condition = "attribute_exists(#h) AND " + not_older(names, values, me)
        return self._applied(cap, key, "SET #n = :me", condition, names, values)

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


def _whole_ms(until: float) -> int:
    """A time as the key's item keeps it (a slot's end, a waiter's next try): whole milliseconds, rounded up, so a
    slot never lapses before the lease it was taken for, and a give-back names the slot as it was taken."""
    return math.ceil(until * 1000)


def _waiting(item: dict[str, Any]) -> dict[str, float]:
    """The key item's noted waiters: operation id -> when it tries again (epoch seconds)."""
    return {op: int(v["N"]) / 1000 for op, v in item.get("waiting", {}).get("M", {}).items()}


def _key(cap: str, key: str) -> dict[str, Any]:
    return key_item(RUNNING_PK + cap, key)
