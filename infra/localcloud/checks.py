"""One invariant's verdict: its name, whether it holds, and what breaks it (the invariants' common shape)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

SHOWN_VIOLATIONS = 20
"""Violations a report shows per check (it counts them all)."""


@dataclass
class Check:
    name: str
    holds: bool
    detail: str
    violations: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "holds": self.holds,
            "detail": self.detail,
            "violations": self.violations[:SHOWN_VIOLATIONS],
            "violation_count": len(self.violations),
        }
