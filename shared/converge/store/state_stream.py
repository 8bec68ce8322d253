"""The state table's stream, as the batch counter reads it: each batch child's state record turning final.

The stream carries each change's new image (and its old one). The counter's mapping sends only changes whose
new state is final; a child an operator reopens is not sent until it is final again, so its place keeps the
final state it had (docs/batches.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from converge.model.batches import COUNTED, CountMove, parse_child
from converge.model.states import OperationState


def count_moves(records: Iterable[Any]) -> Iterator[CountMove]:
    """The batch children's changes to a final state among a stream batch's records, in stream order; a record of
    any other operation, a removal, a state not final, or one that is unreadable is left out."""
    for record in records:
        change = record.get("dynamodb") if isinstance(record, Mapping) else None
        if not isinstance(change, Mapping):
            continue
        keys = change.get("Keys")
        key = keys.get("operation_id") if isinstance(keys, Mapping) else None
        operation_id = key.get("S") if isinstance(key, Mapping) else None
        child = parse_child(operation_id) if isinstance(operation_id, str) else None
        now = _state(change.get("NewImage"))
        if child is not None and now in COUNTED:
            yield CountMove(str(operation_id), child, now)


def _state(image: Any) -> OperationState | None:
    value = image.get("state") if isinstance(image, Mapping) else None
    text = value.get("S") if isinstance(value, Mapping) else None
    try:
        return OperationState(text) if isinstance(text, str) else None
    except ValueError:
        return None
