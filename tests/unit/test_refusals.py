"""What a refused delivery leaves behind: an identity conflict found by the lease, invalid input, and
the state table failing while either is recorded. Each says why, is counted under its job type, and
is stored where an operator looks (or, when it cannot be stored, comes back to be tried again)."""

from __future__ import annotations

import uuid

import pytest

from converge.model.envelope import Envelope
from converge.model.errors import TransientError
from converge.model.outcomes import Outcome
from converge.model.request import JobRequest
from converge.model.states import Flag, OperationState

from .conftest import deliver, throttle

CONFLICT = "the message's content differs from the content this operation id was admitted with"


def started(app, recorder, operation_id: str) -> None:
    """An operation whose first delivery took the lease and failed transiently: its record holds its content."""
    app.enqueue("mail.notice.v1", operation_id, {"user_id": str(uuid.uuid4())})
    recorder.fail_effect.append(TransientError("provider unavailable"))
    assert deliver(app, operation_id).outcome is Outcome.RETRY


def other_content(operation_id: str) -> str:
    return Envelope(
        operation_id=operation_id, job_type="mail.notice.v1", payload={"user_id": str(uuid.uuid4())}
    ).to_body()


def test_a_delivery_of_other_content_is_a_conflict_recorded_listed_and_never_run(app, recorder, counted):
    # Given an operation whose record holds the content it was admitted with
    started(app, recorder, "op-twin")
    counted.clear()
    # When a message with other content under the same id is delivered
    result = deliver(app, "op-twin", attempt=2, body=other_content("op-twin"))
    # Then it is a conflict, saying why, counted once under its job type, and nothing ran for it
    assert (result.outcome, result.reason, result.error_class) == (Outcome.CONFLICT, CONFLICT, None)
    assert counted == [("identity_conflict", "mail.notice.v1", 1)]
    assert recorder.calls.count("effect:op-twin") == 1  # the first delivery's alone
    # And the operation keeps its state and content, with the conflict on its receipt and listed
    stored = app.operations.require("op-twin")
    assert stored.state is OperationState.IN_PROGRESS
    [conflict] = stored.conflicts
    assert (conflict.source, conflict.job_type) == (f"worker: {CONFLICT}", "mail.notice.v1")
    assert conflict.fingerprint != stored.fingerprint
    assert [row["operation_id"] for row in app.operations.listings.list_attention(Flag.CONFLICT).operations] == [
        "op-twin"
    ]


def test_a_conflict_that_cannot_be_recorded_comes_back_and_is_counted_as_retried(app, recorder, counted, monkeypatch):
    # Given a delivery of other content, and the state table throttling the conflict's write
    started(app, recorder, "op-twin")
    monkeypatch.setattr(app.operations.state, "record_conflict", throttle)
    counted.clear()
    # When it is delivered
    result = deliver(app, "op-twin", attempt=2, body=other_content("op-twin"))
    # Then it goes back to be tried again, saying what could not be recorded, counted as retried under its job
    assert result.outcome is Outcome.RETRY
    assert result.reason.startswith("could not record the identity conflict: ClientError: ")
    assert result.error_class == "ClientError"
    assert counted == [("retried", "mail.notice.v1", 1)]
    monkeypatch.undo()
    assert app.operations.require("op-twin").conflicts == ()


@pytest.mark.parametrize(
    ("job_type", "payload", "error_class", "counted_as"),
    [
        ("mail.notice.v1", {"user_id": "not-a-uuid"}, "InvalidMessage", "mail.notice.v1"),
        ("retired.job.v1", {"user_id": str(uuid.uuid4())}, "UnknownJobType", None),  # no job type to name
    ],
    ids=["invalid payload", "unknown job type"],
)
def test_input_refused_at_the_worker_says_which_error_it_was(
    app, recorder, counted, job_type, payload, error_class, counted_as
):
    # Given an operation stored past the enqueue checks, with input its job refuses
    app.operations.admit(JobRequest("op-refused", job_type, payload))
    # When its message is delivered
    result = deliver(app, "op-refused")
    # Then the result names the error and its class, the very reason stored on the REJECTED operation
    stored = app.operations.require("op-refused")
    assert (result.outcome, result.error_class) == (Outcome.REJECTED, error_class)
    assert result.reason == stored.last_error and result.reason.startswith(f"{error_class}: ")
    assert stored.state is OperationState.REJECTED
    assert counted == [("rejected", counted_as, 1)]
    assert recorder.calls == []


@pytest.mark.parametrize(
    ("job_type", "payload", "counted_as"),
    [
        ("mail.notice.v1", {"user_id": "not-a-uuid"}, "mail.notice.v1"),
        ("retired.job.v1", {"user_id": str(uuid.uuid4())}, None),  # a job type nobody registered is no dimension
    ],
    ids=["invalid payload", "unknown job type"],
)
def test_a_rejection_that_cannot_be_recorded_comes_back_and_is_counted_as_retried(
    app, recorder, counted, monkeypatch, job_type, payload, counted_as
):
    # Given refused input, and the state table throttling the rejection's write
    app.operations.admit(JobRequest("op-refused", job_type, payload))
    monkeypatch.setattr(app.operations.state, "reject", throttle)
    # When its message is delivered
    result = deliver(app, "op-refused")
    # Then it goes back to be tried again, saying what could not be recorded, and nothing is stored
    assert result.outcome is Outcome.RETRY
    assert result.reason.startswith("could not record REJECTED: ClientError: ")
    assert counted == [("retried", counted_as, 1)]
    monkeypatch.undo()
    assert app.operations.require("op-refused").state is OperationState.ACCEPTED
