"""The resumer: PAUSED operations of enabled jobs sent again, on a schedule or when a toggle changes."""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Any

from converge.model.outcomes import Outcome
from converge.model.states import OperationState

from .conftest import deliver, set_toggle

SCHEDULED_RUN: dict[str, Any] = {}
"""The schedule's event: no toggle named, so every job is looked at."""


def calls_of(app: Any) -> Counter[str]:
    """Every AWS call the app's DynamoDB and SSM clients make from now on, by service and operation."""
    made: Counter[str] = Counter()
    for client in (app.clients.dynamodb, app.clients.ssm):
        client.meta.events.register("before-call", lambda model, **_: made.update([model.name]))
    return made


def test_a_scheduled_run_with_nothing_paused_reads_one_page_and_no_toggle(app):
    # Given a registry of three jobs, none of them with a PAUSED operation (one succeeded)
    op = app.enqueue("mail.notice.v1", "resume-none", {"user_id": str(uuid.uuid4())}).operation.operation_id
    assert deliver(app, op).outcome is Outcome.SUCCEEDED
    calls = calls_of(app)
    # When the schedule runs the resumer
    summary = app.resumer.handle(SCHEDULED_RUN)
    # Then it resumed nothing, after one read of the PAUSED listing: no toggle read, no listing per job
    assert summary["resumed"] == 0
    assert calls == Counter({"Query": 1})


def test_a_scheduled_run_with_one_paused_operation_still_reads_each_job_and_resumes_it(app):
    # Given the money job switched off, and one of its operations PAUSED by it
    op = app.enqueue("money.credit.v1", "resume-one", {"user_id": str(uuid.uuid4())}).operation.operation_id
    assert deliver(app, op).outcome is Outcome.PAUSED
    set_toggle(app.registry.get("money.credit.v1").toggle_key, "on")
    calls = calls_of(app)
    # When the schedule runs the resumer
    summary = app.resumer.handle(SCHEDULED_RUN)
    # Then it is sent again and ACCEPTED, and every job's toggle was read (three jobs: three reads)
    assert summary["resumed"] == 1 and summary["jobs"]["money.credit.v1"] == 1
    assert app.operations.require(op).state is OperationState.ACCEPTED
    assert calls["GetParameter"] == 3
