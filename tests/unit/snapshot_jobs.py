"""A job module named by bindings (tests/unit/test_before_snapshot.py): it records each runner it builds."""

from __future__ import annotations

from typing import Any

from converge.screening.identifiers import Identifier
from converge.screening.message import JobMessage

BUILT: list[str] = []


class Item(JobMessage):
    item_id: Identifier


def build_runner() -> Any:
    BUILT.append("built")
    return object()
