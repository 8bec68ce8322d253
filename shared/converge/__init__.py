"""converge: background jobs on AWS serverless that stay correct when every handler runs twice."""

from __future__ import annotations

from typing import Any

from converge.flow.registry import JobBinding, Policy, Queue
from converge.model.errors import (
    ConvergeError,
    IdentityConflict,
    InvalidMessage,
    JobDisabled,
    OutcomeUnknown,
    PermanentError,
    TransientError,
    UnknownJobType,
)
from converge.model.records import Admission
from converge.model.states import OperationState
from converge.screening.message import JobMessage

__all__ = [
    "Admission",
    "ConvergeError",
    "IdentityConflict",
    "InvalidMessage",
    "JobBinding",
    "JobDisabled",
    "JobMessage",
    "OperationState",
    "OutcomeUnknown",
    "PermanentError",
    "Policy",
    "Queue",
    "TransientError",
    "UnknownJobType",
    "enqueue",
    "enqueue_put",
]

_default: Any = None


def _runtime() -> Any:
    global _default
    if _default is None:
        from converge.runtime import Converge

        _default = Converge.from_env()
    return _default


def enqueue(job_type: str, operation_id: str, payload: Any, correlation_id: str | None = None) -> Admission:
    """Admit a job into this deployment's jobs table (settings from the environment)."""
    return _runtime().enqueue(job_type, operation_id, payload, correlation_id)


def enqueue_put(job_type: str, operation_id: str, payload: Any, correlation_id: str | None = None) -> dict[str, Any]:
    """The `Put` for the producer's own TransactWriteItems: its business write and the job, atomically."""
    return _runtime().enqueue_put(job_type, operation_id, payload, correlation_id)
