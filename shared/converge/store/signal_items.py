"""Signal items in the jobs table: a signal a producer writes in its own transaction, as it writes a request.

The item's key is "<operation id>::signal:<name>:<signal id>" (`converge.model.signals.signal_item_id`), and it
holds the signal's payload (a map of strings, integers and booleans, as a request's) and nothing else. The key's
"::" is reserved: no request is ever admitted under it, so no producer's write can turn a signal into a request or
a request into a signal. The producer's `Put` is built here (`signal_put`, without a condition: a retried
transaction writes the same item again, a no-op); the relay reads the item back from the stream
(`signal_from_image`), size first, then its attributes, then its key.
"""

from __future__ import annotations

from typing import Any

from converge.model.errors import InvalidMessage
from converge.model.signals import SignalItemKey, parse_signal_item, signal_item_id
from converge.screening.limits import check_request_item
from converge.store.codecs import payload_of, typed_payload

SIGNAL_ITEM_ATTRIBUTES = frozenset({"operation_id", "payload"})
"""A signal item's attributes: its key, and its payload (optional)."""


def signal_put(table: str, key: SignalItemKey, payload: dict[str, Any]) -> dict[str, Any]:
    """The `Put` entry of a signal item for a producer's own TransactWriteItems (the payload screened before)."""
    item = {
        "operation_id": {"S": signal_item_id(key.operation_id, key.name, key.signal_id)},
        "payload": {"M": typed_payload(payload)},
    }
    return {"Put": {"TableName": table, "Item": item}}


def signal_from_image(image: dict[str, Any]) -> tuple[SignalItemKey, dict[str, Any]]:
    """What a signal item's stream image names and carries; InvalidMessage (or UnusableRequest) saying why it is
    not a signal converge can read. The signal itself is screened where every signal is (`Signals.send`)."""
    check_request_item(image)  # size first: a raw item sized to make a check slow is refused here
    others = sorted(name for name in image if name not in SIGNAL_ITEM_ATTRIBUTES)
    if others:
        shown = ", ".join(name[:40] for name in others[:5])
        raise InvalidMessage(f"a signal item holds operation_id and payload only, not {shown}")
    key = image["operation_id"].get("S") if isinstance(image.get("operation_id"), dict) else None
    if not isinstance(key, str):
        raise InvalidMessage("a signal item's operation_id must be a string (S)")
    return parse_signal_item(key), payload_of(image.get("payload"))


def same_signal(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """Whether a rewrite of a signal item writes what it held (its attributes as written)."""
    return old == new
