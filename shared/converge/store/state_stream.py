"""The state table's stream, as the batch counter reads it: each batch child's state record, what it counts as.

The stream carries each change's old and new images (NEW_AND_OLD_IMAGES). A child counts as its state when that
is final, and, while an operator has it reopened, as the final state it was reopened from (`reopened_from`, which
the state table keeps until the child is reopened again): `converge.model.batches.counted_state`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from converge.model.batches import CountMove, counted_state, parse_child
from converge.model.states import OperationState


def count_moves(records: Iterable[Any]) -> Iterator[CountMove]:
    """The batch children's changes among a stream batch's records, in stream order; a record of any other
    operation, a removal, or one that is unreadable is left out (the template's filter sends only final ones)."""
    for record in records:
        change = record.get("dynamodb") if isinstance(record, Mapping) else None
        if not isinstance(change, Mapping):
            continue
        key = change.get("Keys", {}).get("operation_id", {}) if isinstance(change.get("Keys"), Mapping) else {}
        operation_id = key.get("S") if isinstance(key, Mapping) else None
        new = change.get("NewImage")
        if not isinstance(operation_id, str) or parse_child(operation_id) is None or not isinstance(new, Mapping):
            continue
        yield CountMove(operation_id, _counted(change.get("OldImage")), _counted(new))


def _counted(image: Any) -> OperationState | None:
    if not isinstance(image, Mapping):
        return None
    return counted_state(_state(image, "state"), _state(image, "reopened_from"))


def _state(image: Mapping[str, Any], name: str) -> OperationState | None:
    value = image.get(name)
    text = value.get("S") if isinstance(value, Mapping) else None
    try:
        return OperationState(text) if isinstance(text, str) else None
    except ValueError:
        return None
