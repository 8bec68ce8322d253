"""What an operator's action did to one operation: one shape for every action, cancel included."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from converge.model.records import Operation


@dataclass(frozen=True)
class ActionResult:
    """What an action did to one operation: its state before and after, and one line for humans."""

    action: str
    operation_id: str
    before: str
    after: str
    applied: bool
    message: str
    operation: Operation | None = None  # as stored after the action

    def to_json(self) -> dict[str, Any]:
        document: dict[str, Any] = {
            "action": self.action,
            "operation_id": self.operation_id,
            "before": self.before,
            "after": self.after,
            "applied": self.applied,
            "message": self.message,
        }
        if self.operation is not None:
            document["operation"] = self.operation.to_json()
        return document


__all__ = ["ActionResult"]
