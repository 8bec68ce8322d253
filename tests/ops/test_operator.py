"""The framework's operator actions on moto: what applies, what does not and why, and what the receipt says."""

from __future__ import annotations

import json

import boto3
import pytest

from converge.flow.registry import Queue
from converge.model.errors import InvalidAction, OperationNotFound
from converge.model.states import OperationState
from converge.operate.actions import Operator

from .conftest import PREFIX, dead_letter, depth, messages, new_id, operation_in, work_off

ACTOR = "cli:alice"


@pytest.fixture
def operator(app, dlq_urls, sleeps) -> Operator:
    return app.operator(ACTOR, dlq_urls=dlq_urls, redrive_options={"sleep": sleeps})


@pytest.mark.parametrize(("outcome", "state"), [("succeeded", "SUCCEEDED"), ("failed", "FAILED")])
def test_resolve_records_the_decision_with_the_actor_and_the_reason(app, operator, queues, outcome, state):
    # Given an UNKNOWN operation
    unknown = operation_in(app, new_id(), OperationState.UNKNOWN)
    # When an operator resolves it
    result = operator.resolve(unknown.operation_id, outcome, "checked the ledger")
    # Then it applied, from UNKNOWN to the decided state, and the receipt names who and why
    assert (result.applied, result.before, result.after) == (True, "UNKNOWN", state)
    assert result.message == f"resolved as {outcome}"
    stored = app.operations.require(unknown.operation_id)
    assert stored.state.value == state
    assert stored.history[-1].reason == f"resolved as {outcome} by cli:alice: checked the ledger"
    # And nothing was sent anywhere
    assert depth(queues[Queue.CRITICAL][0]) == 0
    assert result.to_json()["operation"]["state"] == state


def test_resolve_as_retry_sends_the_same_identity_once_and_it_runs_once(app, operator, queues, effects):
    # Given an UNKNOWN operation
    unknown = operation_in(app, new_id(), OperationState.UNKNOWN)
    source = queues[Queue.CRITICAL][0]
    # When it is resolved as retry
    result = operator.resolve(unknown.operation_id, "retry", "provider has no record")
    # Then it is ACCEPTED, listed under STUCK until a worker takes it, its old lease forgotten
    assert (result.applied, result.after) == (True, "ACCEPTED")
    record = app.operations.require(unknown.operation_id).state_record
    assert record.stuck_kind == "reopened" and record.lease_owner is None
    # And its stored request is on its queue once; a worker runs it to one effect
    [sent] = messages(source)
    assert json.loads(sent["Body"])["operation_id"] == unknown.operation_id
    assert work_off(app, source) == ["succeeded"]
    assert effects.done == [unknown.operation_id]
    assert app.operations.require(unknown.operation_id).state is OperationState.SUCCEEDED


@pytest.mark.parametrize(
    ("state", "says"),
    [
        (OperationState.SUCCEEDED, "too late: it is SUCCEEDED, not UNKNOWN"),
        (OperationState.NOOP, "too late: it is NOOP, not UNKNOWN"),
        (OperationState.FAILED, "it is FAILED, not UNKNOWN: retry it"),
        (OperationState.REJECTED, "it is REJECTED, not UNKNOWN"),
        (OperationState.IN_PROGRESS, "not now: it is IN_PROGRESS, not UNKNOWN"),
        (OperationState.PAUSED, "not now: it is PAUSED, not UNKNOWN"),
    ],
)
def test_resolve_does_not_apply_to_another_state_and_says_why(app, operator, queues, state, says):
    # Given an operation that is not UNKNOWN
    other = operation_in(app, new_id(), state)
    # When an operator tries to resolve it
    result = operator.resolve(other.operation_id, "succeeded", "sure")
    # Then it does not apply, says why, and the receipt is untouched
    assert (result.applied, result.before, result.after) == (False, state.value, state.value)
    assert says in result.message
    assert app.operations.require(other.operation_id).history == other.history
    assert depth(queues[Queue.CRITICAL][0]) == 0


def test_an_operation_that_changed_meanwhile_is_reported_not_overwritten(app, operator, monkeypatch):
    # Given an UNKNOWN operation that another operator resolves just after this one read it
    unknown = operation_in(app, new_id(), OperationState.UNKNOWN)
    stale = app.operations.require(unknown.operation_id)
    app.operator("cli:bob").resolve(unknown.operation_id, "failed", "refunded")
    reads = iter([stale])
    real_require = app.operations.require
    monkeypatch.setattr(app.operations, "require", lambda operation_id: next(reads, None) or real_require(operation_id))
    # When this operator's decision is written
    result = operator.resolve(unknown.operation_id, "succeeded", "ledger shows it")
    # Then the conditional write refused it: not applied, the current state named, bob's decision kept
    assert (result.applied, result.before, result.after) == (False, "UNKNOWN", "FAILED")
    assert result.message == "changed meanwhile: it is now FAILED; show it and try again"
    assert real_require(unknown.operation_id).history[-1].reason == "resolved as failed by cli:bob: refunded"


def test_bad_arguments_and_unknown_ids_raise(app, operator):
    unknown = operation_in(app, new_id(), OperationState.UNKNOWN)
    with pytest.raises(InvalidAction, match="reason"):
        operator.resolve(unknown.operation_id, "succeeded", "  ")
    with pytest.raises(InvalidAction, match="succeeded, failed, retry"):
        operator.resolve(unknown.operation_id, "maybe", "why not")
    with pytest.raises(OperationNotFound):
        operator.retry("op-nobody", "why not")
    with pytest.raises(InvalidAction, match="actor"):
        app.operator(" ")
    assert app.operations.require(unknown.operation_id).state is OperationState.UNKNOWN


def test_retry_reruns_a_failed_operation_and_its_dlq_copy_then_converges(app, operator, queues, effects):
    # Given a FAILED operation whose message is in the DLQ
    source, dlq = queues[Queue.CRITICAL]
    failed = operation_in(app, new_id(), OperationState.FAILED)
    dead_letter(dlq, failed)
    # When an operator retries it, and a worker takes it
    result = operator.retry(failed.operation_id, "provider fixed")
    assert (result.applied, result.before, result.after) == (True, "FAILED", "ACCEPTED")
    assert work_off(app, source) == ["succeeded"]
    # Then it ran once, and the receipt says who retried it and why
    stored = app.operations.require(failed.operation_id)
    assert stored.state is OperationState.SUCCEEDED and effects.done == [failed.operation_id]
    assert "retried by cli:alice: provider fixed" in [entry.reason for entry in stored.history]
    # And a later redrive deletes the DLQ copy as converged, sending nothing
    summary = operator.redrive("critical", dry_run=False)
    assert (summary.skipped_converged, summary.moved) == (1, 0)
    assert depth(dlq) == 0 and depth(source) == 0 and effects.done == [failed.operation_id]


@pytest.mark.parametrize(
    ("state", "says"),
    [
        (OperationState.SUCCEEDED, "too late: it is SUCCEEDED, not FAILED"),
        (OperationState.UNKNOWN, "it is UNKNOWN, not FAILED: resolve it"),
        (OperationState.REJECTED, "it would fail again"),
        (OperationState.ACCEPTED, "not now: it is ACCEPTED, not FAILED"),
    ],
)
def test_retry_does_not_apply_to_another_state(app, operator, queues, state, says):
    other = operation_in(app, new_id(), state)
    result = operator.retry(other.operation_id, "again")
    assert (result.applied, result.after) == (False, state.value)
    assert says in result.message
    assert depth(queues[Queue.CRITICAL][0]) == 0
    assert app.operations.require(other.operation_id).history == other.history


def test_redrive_is_a_dry_run_unless_told_and_names_the_actor(app, operator, queues):
    # Given a FAILED operation's message in the critical DLQ
    source, dlq = queues[Queue.CRITICAL]
    failed = operation_in(app, new_id(), OperationState.FAILED)
    dead_letter(dlq, failed)
    # When redriven by default (a dry run), then for real, for its job type
    dry = operator.redrive("critical", job_type="mail.notice.v1")
    assert (dry.dry_run, dry.moved, depth(source), depth(dlq)) == (True, 1, 0, 1)
    assert app.operations.require(failed.operation_id).state is OperationState.FAILED
    done = operator.redrive("critical", job_type="mail.notice.v1", dry_run=False, limit=5)
    # Then it moved, and the history names who redrove it
    assert (done.moved, depth(source), depth(dlq)) == (1, 1, 0)
    assert app.operations.require(failed.operation_id).history[-1].reason == "redriven from the DLQ by cli:alice"


def test_set_toggle_writes_once_records_who_and_counts_paused_work(app, operator):
    ssm = boto3.client("ssm")
    name = f"{PREFIX}/money.credit"
    # Given the fail-closed job with two PAUSED operations and no parameter (off by default)
    for _ in range(2):
        operation_in(app, new_id(), OperationState.PAUSED, job_type="money.credit.v1")
    # When it is turned on with a reason
    change = operator.set_toggle("money.credit", True, "provider back")
    # Then the parameter says on, its description names who and why, and the paused work is counted
    assert (change.changed, change.before["source"], change.paused_to_resume) == (True, "default", 2)
    parameter = ssm.get_parameter(Name=name)["Parameter"]
    assert parameter["Value"] == "on"
    [described] = ssm.describe_parameters(ParameterFilters=[{"Key": "Name", "Values": [name]}])["Parameters"]
    assert described["Description"] == "on by cli:alice: provider back"
    # And the same again writes nothing (the version stays)
    again = operator.set_toggle("money.credit.v1", True)
    assert (again.changed, again.message) == (False, "already on; nothing written")
    assert ssm.get_parameter(Name=name)["Parameter"]["Version"] == parameter["Version"]
    # And off is written and counts nothing to resume
    off = operator.set_toggle("money.credit", False)
    assert (off.changed, off.paused_to_resume, off.message) == (True, 0, "on (parameter) -> off")
