"""A debounced job type's keys in the markers table: one item per key, its open burst and its last burst's run.

The item is `pk` "debounce#<job type>", `sk` "key#<key>", in whole milliseconds: `opened` (the operation that
opened the burst now open), `first`, `quiet` (the latest request's arrival plus the period), `deadline` (the first's
plus `max_wait`), `newest` and `newest_order` (the burst's newest request so far), and `ran` and `ran_order` (the run
of the last closed burst). Each write is one conditional UpdateItem on what its writer saw, so two writers never both
apply on the same sight; a refusal returns the item as it stands (ReturnValuesOnConditionCheckFailure), never a
second read. The item is bounded whatever the burst's size: it names two operations, never the burst's members. A
job type's keys share one partition: its waiting bursts are listed with one Query. Each lives 400 days past its last
write (the table's time to live): longer than a request may be delayed (a year, `run_at`), so a request that arrives
long after its burst's run (a delayed one, or one paused for weeks) still meets the key's last run, and an older one
ends there instead of opening a burst of its own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from converge.model.debounce import OLDEST, Action, Burst
from converge.model.timing import MAX_AHEAD_SECONDS
from converge.store.codecs import number_value, string_value
from converge.store.conditions import condition_failed, failed_item
from converge.store.flow_keys import key_item, key_items

DEBOUNCE_PK = "debounce#"
KEPT_SECONDS = MAX_AHEAD_SECONDS + 35 * 24 * 3600
_OPEN = ("opened", "first", "quiet", "deadline", "newest", "newest_order")


@dataclass(frozen=True)
class Request:
    """One request of a debounced key, as the writes need it (times in whole milliseconds)."""

    operation_id: str
    order: float
    now_ms: int
    period_ms: int
    max_wait_ms: int


class Moved(Exception):
    """A write's condition failed: the key moved since it was seen. `burst` is the key as it stands now."""

    def __init__(self, burst: Burst) -> None:
        super().__init__("the debounced key moved")
        self.burst = burst


class DebounceTable:
    """Debounced keys' bursts: each write conditional on the burst as its writer saw it."""

    def __init__(self, table_name: str, dynamodb_client: Any) -> None:
        self._table = table_name
        self._client = dynamodb_client

    def read(self, job_type: str, key: str) -> Burst:
        """The key as it stands (one strongly consistent read): what a request coming back decides on."""
        item = self._client.get_item(TableName=self._table, Key=_key(job_type, key), ConsistentRead=True).get("Item")
        return burst_from_item(item)

    def write(self, job_type: str, key: str, action: Action, seen: Burst, request: Request) -> Burst:
        """Make `action`'s write on the key as `seen`: the key after it, or Moved with the key as it stands."""
        values: dict[str, Any] = {
            ":kept": number_value((max(request.now_ms, seen.deadline) + request.max_wait_ms) // 1000 + KEPT_SECONDS)
        }
        names = {"#e": "expires_at"}
        sets = ["#e = :kept"]
        removes: list[str] = []
        conditions: list[str] = []
        quiet = request.now_ms + request.period_ms
        if action is Action.OPEN:
            for name, value in (
                ("opened", string_value(request.operation_id)),
                ("first", number_value(request.now_ms)),
                ("quiet", number_value(min(quiet, request.now_ms + request.max_wait_ms))),
                ("deadline", number_value(request.now_ms + request.max_wait_ms)),
                ("newest", string_value(request.operation_id)),
                ("newest_order", _order(request.order)),
            ):
                names[f"#{name}"], values[f":{name}"] = name, value
                sets.append(f"#{name} = :{name}")
            conditions.append("attribute_not_exists(#opened)")
            names["#ran"] = "ran"
            if seen.ran is None:
                conditions.append("attribute_not_exists(#ran)")
            else:
                values[":ran"] = string_value(seen.ran)
                conditions.append("#ran = :ran")
        elif action in (Action.JOIN, Action.EXTEND):
            names.update({"#opened": "opened", "#quiet": "quiet", "#deadline": "deadline", "#newest": "newest"})
            values.update(
                {
                    ":opened": string_value(seen.opened or ""),
                    ":quiet": number_value(min(quiet, seen.deadline)),
                    ":now": number_value(request.now_ms),
                    ":seen_newest": string_value(seen.newest),
                }
            )
            sets.append("#quiet = :quiet")
            conditions += ["#opened = :opened", "#deadline > :now", "#quiet > :now", "#newest = :seen_newest"]
            if action is Action.JOIN:
                names["#order"] = "newest_order"
                values[":op"], values[":order"] = string_value(request.operation_id), _order(request.order)
                sets += ["#newest = :op", "#order = :order"]
            else:
                conditions.append("#quiet < :quiet")
        elif action is Action.CLOSE:
            names.update({"#opened": "opened", "#newest": "newest", "#ran": "ran", "#ran_order": "ran_order"})
            values.update(
                {
                    ":opened": string_value(seen.opened or ""),
                    ":newest": string_value(seen.newest),
                    ":order": _order(seen.order),
                }
            )
            sets += ["#ran = :newest", "#ran_order = :order"]
            conditions += ["#opened = :opened", "#newest = :newest"]
            for index, name in enumerate(_OPEN):
                names[f"#o{index}"] = name
                removes.append(f"#o{index}")
        else:
            raise ValueError(f"{action.value} writes nothing")
        expression = "SET " + ", ".join(sets) + (" REMOVE " + ", ".join(removes) if removes else "")
        condition = " AND ".join(conditions)
        used = f"{expression} {condition}"
        names = {name: attribute for name, attribute in names.items() if re.search(re.escape(name) + r"\b", used)}
        try:
            response = self._client.update_item(
                TableName=self._table,
                Key=_key(job_type, key),
                UpdateExpression=expression,
                ConditionExpression=condition,
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
                ReturnValues="ALL_NEW",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as exc:
            if not condition_failed(exc):
                raise
            item = failed_item(exc)
            # An emulator that drops the item, or a key with no item yet (an OPEN's refusal always has one)
            raise Moved(burst_from_item(item) if item else self.read(job_type, key)) from None
        return burst_from_item(response.get("Attributes"))

    def keys(self, job_type: str) -> list[tuple[str, Burst]]:
        """The job type's keys used within the last day, with their bursts: one Query (more pages only for many)."""
        return [
            (key, burst_from_item(item)) for key, item in key_items(self._client, self._table, DEBOUNCE_PK + job_type)
        ]


def burst_from_item(item: dict[str, Any] | None) -> Burst:
    """A key's state from its item (no item: a key never used, or gone a day after its last use)."""
    if not item:
        return Burst()

    def number(name: str, default: float = 0) -> float:
        value = item.get(name, {}).get("N")
        return float(value) if value is not None else default

    def text(name: str) -> str | None:
        value = item.get(name, {}).get("S")
        return value if isinstance(value, str) else None

    return Burst(
        opened=text("opened"),
        first=int(number("first")),
        quiet=int(number("quiet")),
        deadline=int(number("deadline")),
        newest=text("newest") or "",
        order=number("newest_order", OLDEST),
        ran=text("ran"),
        ran_order=number("ran_order", OLDEST),
    )


def _order(order: float) -> dict[str, str]:
    """An order as stored: every digit it has (an epoch time in milliseconds with a fraction, a version)."""
    return {"N": repr(float(order))}


def _key(job_type: str, key: str) -> dict[str, Any]:
    return key_item(DEBOUNCE_PK + job_type, key)
