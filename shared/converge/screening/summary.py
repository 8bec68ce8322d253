"""What a batch's callback is told: the batch's id and how its children ended, as fields of its own message.

A callback's message declares them by subclassing `converge.BatchSummary`; converge adds their values to the
callback's payload when the batch completes (a job message holds identifiers and numbers, never a nested
structure, so the summary is flat).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from converge.model.states import OperationState
from converge.screening.identifiers import Identifier
from converge.screening.message import JobMessage


class BatchSummary(JobMessage):
    """Subclass it for a batch's callback message: `class StatementsSent(converge.BatchSummary): month: Code`."""

    batch_id: Identifier
    batch_total: int
    batch_succeeded: int = 0
    batch_noop: int = 0
    """Children that found nothing to do (their runner's load returned None)."""
    batch_failed: int = 0
    """Children that ended FAILED: `converge batches show <batch_id> --failed` lists them."""
    batch_rejected: int = 0
    """Children refused as invalid when they were run (their job type or message changed since admission)."""
    batch_cancelled: int = 0
    """Children cancelled before they started (the batch, or the child on its own, was cancelled)."""
    batch_expired: int = 0
    """Children not started by their expires_at."""


SUMMARY_FIELDS = tuple(BatchSummary.model_fields)


def summary_fields(batch_id: str, total: int, counts: Mapping[str, int]) -> dict[str, Any]:
    """The summary's values, from the batch's counts by final state (an UNKNOWN child holds completion back)."""
    return {
        "batch_id": batch_id,
        "batch_total": total,
        "batch_succeeded": counts.get(OperationState.SUCCEEDED.value, 0),
        "batch_noop": counts.get(OperationState.NOOP.value, 0),
        "batch_failed": counts.get(OperationState.FAILED.value, 0),
        "batch_rejected": counts.get(OperationState.REJECTED.value, 0),
        "batch_cancelled": counts.get(OperationState.CANCELLED.value, 0),
        "batch_expired": counts.get(OperationState.EXPIRED.value, 0),
    }
