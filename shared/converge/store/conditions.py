"""A conditional write that did not apply: how the store tells, written once for every table.

Every conditional write asks for the item that failed its condition (ReturnValuesOnConditionCheckFailure),
so a refusal is an answer with the record that caused it, never a second read; any other error propagates.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def condition_failed(exc: BaseException) -> bool:
    """Whether an error is a failed condition (ConditionalCheckFailedException), not a fault."""
    response = getattr(exc, "response", None)
    return isinstance(response, dict) and response.get("Error", {}).get("Code") == "ConditionalCheckFailedException"


def failed_item(exc: BaseException) -> dict[str, Any] | None:
    """The item that failed a condition, when the service returned it (ReturnValuesOnConditionCheckFailure)."""
    response = getattr(exc, "response", None)
    item: Any = response.get("Item") if isinstance(response, dict) else None
    return item if isinstance(item, dict) and item else None


def met_item(exc: BaseException, read: Callable[[], dict[str, Any] | None]) -> dict[str, Any] | None:
    """What a failed condition met: the item the service returned with the failure, else the item read again by
    `read` (strongly consistent; an emulator or an SDK that drops the item). Written once for every table."""
    return failed_item(exc) or read()
