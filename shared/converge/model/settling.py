"""What one settle is about: the value the settlement and every extension's settle hooks are given."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from converge.model.states import OperationState


@dataclass(frozen=True)
class Settling:
    """One settle about to be written: which operation, to what state, with which payload."""

    operation_id: str
    job_type: str
    state: OperationState
    payload: Mapping[str, Any]
    correlation_id: str | None = None
