"""What one settle is about: the value the settlement and every extension's settle hooks are given."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
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
    counted_as: OperationState | None = field(kw_only=True)
    """What the operation was counted as before this settle: the final state it had before an operator reopened it
    (or the UNKNOWN an operator resolves), from which a batch moves its count; None when it was never final.
    Every settle says it (no default), so that none forgets a reopened operation."""
    batch_child: bool = field(default=True, kw_only=True)
    """False for a request under a batch child's id that no batch wrote (the relay refuses it): counted on no
    batch."""
