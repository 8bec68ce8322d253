"""A limiter's keys in the markers table: one item per key, holding when its next unit is free.

The item is `pk` "limit#<limiter>", `sk` "key#<key>", and `free`, the time its next unit is free, in whole
milliseconds since the epoch (an ADD of whole numbers never drifts). A reservation reads nothing:

* a key at rest (its `free` not later than now, or no item yet): one conditional UpdateItem sets `free` to now
  plus the job's cost, and the job may start now;
* a busy key (`free` later than now), or one gone (an operator's release deleted it): one UpdateItem adds the cost
  to `free` (to now, for a key gone) and returns the old value, from which the job's start follows
  (`Limiter.start`).

Which of the two is tried first is a guess (the key's last answer in this process); a wrong guess costs one refused
write. Each refusal says the key changed since the write before (another worker's reservation or give-back, an
operator's release), so the next write follows what it met: a reservation ends as soon as the key holds still for one
write, and never fails for a key that moved under it.

A reservation no job will start on (its job held by another of its limiters) is given back: `free` put back as it
was, only while no reservation came after it (`give_back`). The items of one limiter share its partition, so its
keys are listed with one Query (the operator's view), and each carries a time to live a day past its `free`, so a key
at rest for a day is gone.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from converge.model.limits import KeyState
from converge.store.codecs import number_value
from converge.store.conditions import condition_failed
from converge.store.flow_keys import key_item, key_items
from converge.store.updates import Update

LIMIT_PK = "limit#"
KEPT_SECONDS = 24 * 3600
"""A key's item lives this long past its free time (the table's time to live), so keys at rest are not listed."""
GONE = -1
"""What `_add` answers for a key that was not there (an operator's release deleted it): no free time before."""
HINTS_KEPT = 10_000
"""At most this many keys' last answers are remembered per process (a guess; forgetting one costs a refused write)."""


@dataclass(frozen=True)
class Reservation:
    """What one reservation found: the key's free time before it (epoch seconds), and the writes it took; and, to give
    it back, the key's free time it left and the one to put back (whole milliseconds, as the item counts them: now,
    for a key it found at rest)."""

    free_before: float
    writes: int
    free_after_ms: int
    put_back_ms: int


class LimiterTable:
    """Limiter keys' free times: a reservation in one write (two when the guess of the key's state was wrong)."""

    def __init__(self, table_name: str, dynamodb_client: Any) -> None:
        self._table = table_name
        self._client = dynamodb_client
        self._busy: dict[tuple[str, str], bool] = {}

    def reserve(self, limiter: str, key: str, now: float, cost: float) -> Reservation:
        """Take `cost` seconds of the key's pace; the key's free time before this job's share of it."""
        # `now` as whole milliseconds: at rest means free no later than it (rounded down), and the free time set
        # from it is rounded up, so the next unit is never less than the cost after this one.
        now_ms, cost_ms, from_ms = math.floor(now * 1000), max(1, round(cost * 1000)), math.ceil(now * 1000)
        busy = self._busy.get((limiter, key), False)
        # Each refused write met the key changed since the one before (a guess wrong, or another's write between two
        # of these: a reservation, a give-back, an operator's release): the next write is the other one.
        writes = 0
        while True:
            writes += 1
            if busy:
                old = self._add(limiter, key, now_ms, cost_ms, from_ms)
                if old is not None:
                    self._remember(limiter, key, True)
                    if old == GONE:  # released under it: at rest, paced from now as a first write would
                        return Reservation(now, writes, from_ms + cost_ms, now_ms)
                    return Reservation(old / 1000, writes, old + cost_ms, old)
            elif self._start(limiter, key, now_ms, cost_ms, from_ms):
                self._remember(limiter, key, False)
                return Reservation(now, writes, from_ms + cost_ms, now_ms)
            busy = not busy

    def give_back(self, limiter: str, key: str, reservation: Reservation) -> bool:
        """Undo a reservation no job will start on (its job held by another limiter): the key's free time put back as
        it was (now, for a key it found at rest), only while it is still the one the reservation left. False when
        another reservation came after it (or the key was paused or released since): its units are then spent unused,
        a stricter pace, never a looser one (a job behind it holds its start already)."""
        update = Update().set("free", number_value(reservation.put_back_ms))
        update.require(f"{update.name('free')} = {update.value(number_value(reservation.free_after_ms))}")
        return self._apply(update, limiter, key) is not None

    def push_back(self, limiter: str, key: str, until: float, cost: float) -> bool:
        """Pause the key: its free time set to `until` (an upstream's retry-after, its burst added) and `cost` seconds
        of its pace taken from there: True when taken, False when the key was busy past `until` already (nothing
        written)."""
        until_ms, cost_ms = math.ceil(until * 1000), round(cost * 1000)
        update = (
            Update()
            .set("free", number_value(until_ms + cost_ms))
            .set("expires_at", number_value(until_ms // 1000 + KEPT_SECONDS))
        )
        free = update.name("free")
        update.require(f"attribute_not_exists({free}) OR {free} <= {update.value(number_value(until_ms))}")
        self._remember(limiter, key, True)  # a pause of no cost (an operator's) leaves the key busy until then
        return self._apply(update, limiter, key) is not None

    def release(self, limiter: str, key: str) -> bool:
        """Forget the key's pace (an operator's release): the next job starts at once; False when it had none."""
        response = self._client.delete_item(TableName=self._table, Key=_key(limiter, key), ReturnValues="ALL_OLD")
        self._remember(limiter, key, False)
        return bool(response.get("Attributes"))

    def keys(self, limiter: str) -> list[KeyState]:
        """The limiter's keys used within the last day, by key: one Query (more pages only for many keys)."""
        return [
            KeyState(limiter, key, int(item["free"]["N"]) / 1000)
            for key, item in key_items(self._client, self._table, LIMIT_PK + limiter)
            if "N" in item.get("free", {})
        ]

    # -- the two writes ----------------------------------------------------------------------------------------

    def _start(self, limiter: str, key: str, now_ms: int, cost_ms: int, from_ms: int) -> bool:
        """The key at rest: its free time set to now (`from_ms`, rounded up) plus the cost; False when it is busy."""
        update = (
            Update()
            .set("free", number_value(from_ms + cost_ms))
            .set("expires_at", number_value(now_ms // 1000 + KEPT_SECONDS))
        )
        free = update.name("free")
        update.require(f"attribute_not_exists({free}) OR {free} <= {update.value(number_value(now_ms))}")
        return self._apply(update, limiter, key) is not None

    def _add(self, limiter: str, key: str, now_ms: int, cost_ms: int, from_ms: int) -> int | None:
        """A busy key: the cost added to its free time, its free time before back; a key gone (released since the last
        write): made with its free time now (`from_ms`) plus the cost, `GONE` back; None when it is at rest."""
        # Its time to live moves with it (a whole second a write at least: a busy key is never dropped).
        update = (
            Update()
            .add_from("free", number_value(from_ms), cost_ms)
            .add_from("expires_at", number_value(now_ms // 1000 + KEPT_SECONDS), max(1, math.ceil(cost_ms / 1000)))
        )
        free = update.name("free")
        update.require(f"attribute_not_exists({free}) OR {free} > {update.value(number_value(now_ms))}")
        attributes = self._apply(update, limiter, key, returns="UPDATED_OLD")
        if attributes is None:
            return None
        return int(attributes["free"]["N"]) if "free" in attributes else GONE

    def _apply(self, update: Update, limiter: str, key: str, returns: str = "UPDATED_NEW") -> dict[str, Any] | None:
        """The write; the values it `returns` (new or old), or None when its condition failed."""
        try:
            response = self._client.update_item(**update.request(self._table, _key(limiter, key), ReturnValues=returns))
        except ClientError as exc:
            if condition_failed(exc):
                return None
            raise
        attributes: dict[str, Any] = response.get("Attributes") or {}
        return attributes

    def _remember(self, limiter: str, key: str, busy: bool) -> None:
        if len(self._busy) >= HINTS_KEPT:
            self._busy.clear()
        self._busy[(limiter, key)] = busy


def _key(limiter: str, key: str) -> dict[str, Any]:
    return key_item(LIMIT_PK + limiter, key)
