"""A replace-mode cap's order of requests: which is the newest a key has seen (docs/flow-control.md, "Modes").

Requests are ordered by when each was accepted (its producer's write, whole milliseconds), then by operation id;
one whose acceptance is unknown (a message sent again carries none) is older than any other, and passes only as
the key's newest. The key's item keeps its newest as `newest`, a map of `id` and `at`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from converge.store.codecs import number_value, string_value


@dataclass(frozen=True)
class Newest:
    """A request in a replace-mode cap's order: its operation and when it was accepted (whole milliseconds; 0 when
    unknown, which is older than any other)."""

    operation_id: str
    at_ms: int

    @property
    def known(self) -> bool:
        return self.at_ms > 0

    def newer_than(self, other: Newest) -> bool:
        return (self.at_ms, self.operation_id) > (other.at_ms, other.operation_id)

    @staticmethod
    def of(item: dict[str, Any]) -> Newest | None:
        found = item.get("newest", {}).get("M")
        if not found:
            return None
        return Newest(found["id"]["S"], int(found["at"]["N"]))  # `value` writes both, always

    def value(self) -> dict[str, Any]:
        return {"M": {"id": string_value(self.operation_id), "at": number_value(self.at_ms)}}


def not_older(names: dict[str, str], values: dict[str, Any], me: Newest) -> str:
    """The condition that the key's newest request is not newer than `me` (or is `me`), its names and values added
    (`:me` among them, the value that makes `me` the newest)."""
    names.update({"#n": "newest", "#ni": "id"})
    values[":mi"] = string_value(me.operation_id)
    if not me.known:
        return "(attribute_not_exists(#n) OR #n.#ni = :mi)"
    names["#na"] = "at"
    values.update({":me": me.value(), ":ma": number_value(me.at_ms)})
    return "(attribute_not_exists(#n) OR #n.#ni = :mi OR #n.#na < :ma OR (#n.#na = :ma AND #n.#ni < :mi))"
