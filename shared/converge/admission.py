"""Admission: validate a job and write its operation into the jobs table (the outbox).

The table's stream carries every new operation to the relay, so a single conditional PutItem is
the whole enqueue; the transactional form lets a producer commit its own business write and the
job together.
"""

from __future__ import annotations

from typing import Any

from converge.message import check_identifier, validate_payload
from converge.operations import Admission, OperationStore
from converge.registry import Registry


def normalized_payload(registry: Registry, job_type: str, payload: Any) -> dict[str, Any]:
    """Validate a payload for its job type and return it as it will be stored (JSON primitives)."""
    binding = registry.get(job_type)
    message = validate_payload(binding.message, payload)
    return message.model_dump(mode="json", exclude_none=True)


def enqueue(
    registry: Registry,
    operations: OperationStore,
    job_type: str,
    operation_id: str,
    payload: Any,
    correlation_id: str | None = None,
    submitted_by: str | None = None,
) -> Admission:
    """Admit one operation; nothing is written unless the job type, ids and payload are valid.

    The same id with the same content returns the existing operation (no new dispatch); the same
    id with other content raises IdentityConflict. `submitted_by` records the enqueue API's caller.
    """
    check_identifier("operation_id", operation_id)
    if correlation_id is not None:
        check_identifier("correlation_id", correlation_id)
    stored = normalized_payload(registry, job_type, payload)
    return operations.admit(job_type, operation_id, stored, correlation_id, submitted_by)


def enqueue_put(
    registry: Registry,
    operations: OperationStore,
    job_type: str,
    operation_id: str,
    payload: Any,
    correlation_id: str | None = None,
) -> dict[str, Any]:
    """The `Put` to add to the producer's own TransactWriteItems, validated exactly like `enqueue`.

    If the operation already exists the transaction is cancelled with a ConditionalCheckFailed
    reason for this item; the producer decides whether that is a replay of the same request.
    """
    check_identifier("operation_id", operation_id)
    if correlation_id is not None:
        check_identifier("correlation_id", correlation_id)
    stored = normalized_payload(registry, job_type, payload)
    return operations.put_request(job_type, operation_id, stored, correlation_id)
