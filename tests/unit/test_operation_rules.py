"""The stored receipt as an operator reads it (`converge ops show --json`): every field, under its name."""

from __future__ import annotations

from converge.clock import iso
from converge.operations import OperationState


def test_the_operators_view_of_an_operation_names_every_field_of_its_receipt(app, clock):
    # Given an operation enqueued with a correlation id, then failed once and retried
    app.enqueue("mail.notice.v1", "op-view", {"user_id": "2c9d6c2e-8f5e-4c43-9a51-0d2b9d0c1f00"}, "corr-7")
    accepted_at = iso(clock.now())
    clock.advance(5)
    operation = app.operations.require("op-view")
    app.operations.transition(
        operation, OperationState.IN_PROGRESS, "attempt 1 failed; retrying", attempts=1, last_error="TransientError: x"
    )
    # When an operator reads it
    view = app.operations.require("op-view").to_json()
    # Then every field of the receipt is there, under the documented name
    retried_at = iso(clock.now())
    assert view == {
        "operation_id": "op-view",
        "job_type": "mail.notice.v1",
        "state": "IN_PROGRESS",
        "attempts": 1,
        "history": [
            {"state": "ACCEPTED", "at": accepted_at, "reason": "enqueued"},
            {"state": "IN_PROGRESS", "at": retried_at, "reason": "attempt 1 failed; retrying"},
        ],
        "last_error": "TransientError: x",
        "correlation_id": "corr-7",
        "payload": {"user_id": "2c9d6c2e-8f5e-4c43-9a51-0d2b9d0c1f00"},
        "redrives": 0,
        "created_at": accepted_at,
        "updated_at": retried_at,
    }
