"""Admission: validate a job and write its operation into the jobs table (the outbox).

The table's stream carries every new operation to the relay, so a single conditional PutItem is
the whole enqueue; the transactional form lets a producer commit its own business write and the
job together.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC
from typing import Any

from converge.flow.registry import Registry
from converge.model.batches import reserved
from converge.model.clock import iso
from converge.model.errors import InvalidMessage, InvalidTiming
from converge.model.records import Admission
from converge.model.request import JobRequest
from converge.model.submission import Submission, When
from converge.model.timing import Timing
from converge.screening.message import check_identifier, validate_payload
from converge.store.operations import OperationStore


def timing_fields(run_at: When, expires_at: When, now: float) -> tuple[str | None, str | None]:
    """Check a request's times (at most a year ahead, expiry after run_at and not past) and return them
    in their stored form; raises InvalidTiming with the reason."""
    texts = tuple(_text(name, value) for name, value in (("run_at", run_at), ("expires_at", expires_at)))
    timing = Timing.parse(*texts)
    timing.check(now, admitting=True)
    return (
        iso(timing.run_at) if timing.run_at is not None else None,
        iso(timing.expires_at) if timing.expires_at is not None else None,
    )


def _text(name: str, value: When) -> str | None:
    if value is None or isinstance(value, str):
        return value
    if value.tzinfo is None:
        raise InvalidTiming(f"{name} must be an aware datetime (in UTC), not a naive one")
    return value.astimezone(UTC).isoformat()


def _not_reserved(operation_id: str) -> None:
    if reserved(operation_id):
        raise InvalidMessage(
            f"operation_id {operation_id!r} is invalid: ids with '::' are batches' own (enqueue_batch)"
        )


def normalized_payload(registry: Registry, job_type: str, payload: Any) -> dict[str, Any]:
    """Validate a payload for its job type and return it as it will be stored (JSON primitives)."""
    binding = registry.get(job_type)
    message = validate_payload(binding.message_class(), payload)
    return message.model_dump(mode="json", exclude_none=True)


def admit(registry: Registry, operations: OperationStore, submission: Submission, now: float) -> Admission:
    """Admit one operation; nothing is written unless the job type, ids, payload and times are valid.

    The same id with the same content returns the existing operation (no new dispatch); the same
    id with other content raises IdentityConflict. `submitted_by` records the enqueue API's caller.
    `run_at` delays it (SCHEDULED until then); `expires_at` ends it EXPIRED if not started by then.
    """
    return operations.admit(admissible(registry, submission, now))


def put_for(registry: Registry, operations: OperationStore, submission: Submission, now: float) -> dict[str, Any]:
    """The `Put` to add to the producer's own TransactWriteItems, validated exactly like `admit`.

    If the operation already exists the transaction is cancelled with a ConditionalCheckFailed
    reason for this item; the producer decides whether that is a replay of the same request.
    """
    return operations.jobs.put_request(admissible(registry, submission, now))


def admissible(registry: Registry, submission: Submission, now: float) -> JobRequest:
    """The request a submission is stored as: its ids checked, its payload validated and in its stored form (JSON
    primitives), its times checked and in theirs; raises InvalidMessage, UnknownJobType or InvalidTiming."""
    check_identifier("operation_id", submission.operation_id)
    _not_reserved(submission.operation_id)
    if submission.correlation_id is not None:
        check_identifier("correlation_id", submission.correlation_id)
    stored = normalized_payload(registry, submission.job_type, submission.payload)
    run_at, expires_at = timing_fields(submission.run_at, submission.expires_at, now)
    request = JobRequest(submission.operation_id, submission.job_type, stored)
    return replace(
        request,
        correlation_id=submission.correlation_id,
        submitted_by=submission.submitted_by,
        run_at=run_at,
        expires_at=expires_at,
    )
