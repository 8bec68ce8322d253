"""The runner pipeline and its three policies, end to end over moto's DynamoDB and SSM."""

from __future__ import annotations

import json
import uuid

import boto3
import pytest
from botocore.exceptions import ClientError

from converge.flow.pipeline import Delivery
from converge.model.envelope import Envelope
from converge.model.errors import PermanentError, TransientError
from converge.model.outcomes import Outcome
from converge.model.records import Subject
from converge.model.states import Flag, OperationState

from .conftest import body_of, deliver, set_toggle


def enqueue(app, job_type="mail.notice.v1", user_id=None, operation_id=None):
    operation_id = operation_id or f"op-{uuid.uuid4().hex[:8]}"
    app.enqueue(job_type, operation_id, {"user_id": user_id or str(uuid.uuid4())})
    return operation_id


class Calls:
    """The DynamoDB calls the pipeline makes (by operation name), counted on its own client.

    Scans are left out: the recording runner scans the tables at the effect, to see what they held.
    """

    def __init__(self, app, monkeypatch):
        self.names: list[str] = []
        client = app.clients.dynamodb
        for name in ("get_item", "put_item", "update_item", "delete_item", "query", "batch_get_item"):
            real = getattr(client, name)
            monkeypatch.setattr(client, name, self._counted(name, real))

    def _counted(self, name, real):
        def call(**kwargs):
            self.names.append(name)
            return real(**kwargs)

        return call


def test_a_job_costs_two_dynamodb_calls_and_no_read(app, recorder, monkeypatch):
    # Given an admitted operation
    op = enqueue(app)
    body = body_of(app, op)
    calls = Calls(app, monkeypatch)
    # When its message is delivered
    assert deliver(app, op, body=body).outcome is Outcome.SUCCEEDED
    # Then the pipeline took the lease and recorded the outcome: two conditional writes, no read
    assert calls.names == ["update_item", "update_item"]
    assert recorder.effects == [op]


def test_already_processed_costs_one_refused_write_no_effect_and_no_load(app, recorder, monkeypatch):
    # Given an operation that has already succeeded
    op = enqueue(app)
    assert deliver(app, op).outcome is Outcome.SUCCEEDED
    recorder.calls.clear()
    body = body_of(app, op)
    calls = Calls(app, monkeypatch)
    # When its message is delivered again
    result = deliver(app, op, message_id="m-2", body=body)
    # Then it is a skipped duplicate: nothing loaded, no effect, and the refused lease was the only call
    assert result.outcome is Outcome.DUPLICATE
    assert recorder.calls == []
    assert calls.names == ["update_item"]
    assert app.operations.require(op).state is OperationState.SUCCEEDED


def test_effect_then_claim_does_the_effect_strictly_before_the_claim(app, recorder):
    # Given an e-mail-like job (effect_then_claim)
    op = enqueue(app)
    # When it is delivered
    result = deliver(app, op)
    # Then at the moment of the effect the operation was leased, not yet claimed (IN_PROGRESS) ...
    assert recorder.claims_at_effect[0]["states"][op] == "IN_PROGRESS"
    # ... and afterwards the claim (its terminal state) is recorded, with the receipt in its history
    assert result.outcome is Outcome.SUCCEEDED
    stored = app.operations.require(op)
    assert stored.state is OperationState.SUCCEEDED
    assert [entry.state for entry in stored.history] == ["ACCEPTED", "IN_PROGRESS", "SUCCEEDED"]
    assert recorder.effects == [op]


def test_a_failing_effect_propagates_writes_no_claim_and_the_retry_runs_it_again(app, recorder):
    # Given an effect that fails once
    op = enqueue(app)
    recorder.fail_effect.append(TransientError("SES throttled"))
    # When it is delivered
    first = deliver(app, op, attempt=1)
    # Then the error comes out as a retry with its reason, no claim is written and the lease is released
    assert first.outcome is Outcome.RETRY
    assert "SES throttled" in first.reason
    stored = app.operations.require(op)
    assert stored.state is OperationState.IN_PROGRESS
    assert "SES throttled" in stored.last_error
    assert stored.state_record.lease_owner is None
    assert recorder.effects == []
    # When the retry comes
    second = deliver(app, op, attempt=2, message_id="m-1")
    # Then the effect really runs again, once, and the receipt keeps the earlier error apart
    assert second.outcome is Outcome.SUCCEEDED
    assert recorder.calls.count(f"effect:{op}") == 2
    assert recorder.effects == [op]
    receipt = app.operations.require(op).to_json()
    assert (receipt["last_error"], receipt["attempts"]) == (None, 2)
    assert ["SES throttled" in error["error"] for error in receipt["errors"]] == [True]


def log_lines(text: str) -> list[dict]:
    """Powertools' JSON log lines among what the pipeline printed (EMF metric lines left out)."""
    return [json.loads(line) for line in text.splitlines() if line.startswith("{") and '"level"' in line]


def test_a_runners_bug_is_logged_once_per_attempt_with_its_traceback_and_fails_on_the_last(app, recorder, capsys):
    # Given a runner whose effect has a bug on every attempt (a key its data does not have)
    op = enqueue(app)
    recorder.fail_effect += [KeyError("user_id"), KeyError("user_id")]
    capsys.readouterr()
    # When it is delivered, then delivered again on its last attempt
    first = deliver(app, op, attempt=1)
    first_lines = log_lines(capsys.readouterr().out)
    last = deliver(app, op, attempt=3, message_id="m-2")
    last_lines = log_lines(capsys.readouterr().out)
    # Then the first is retried, as a transient failure is, and the last records FAILED with the error's class
    assert (first.outcome, last.outcome) == (Outcome.RETRY, Outcome.FAILED_FINAL)
    stored = app.operations.require(op)
    assert stored.state is OperationState.FAILED and stored.last_error == "KeyError: 'user_id'"
    # And each attempt logged exactly one line with the traceback, at ERROR, with the operation's id and attempt
    for lines, attempt, what in ((first_lines, 1, "will retry"), (last_lines, 3, "operation did not succeed")):
        [traced] = [line for line in lines if "exception" in line]
        assert (traced["level"], traced["operation_id"], traced["attempt"]) == ("ERROR", op, attempt)
        assert traced["message"].endswith(what)
        assert traced["exception_name"] == "KeyError" and "in run" in traced["exception"]
        assert traced["reason"] == "KeyError: 'user_id'"
        # and nothing calls it transient
        assert "transient failure; will retry" not in [line["message"] for line in lines]


def test_a_transient_failure_is_one_warning_without_a_traceback(app, recorder, capsys):
    # Given an effect that is throttled once
    op = enqueue(app)
    recorder.fail_effect.append(TransientError("SES throttled"))
    capsys.readouterr()
    # When it is delivered
    assert deliver(app, op).outcome is Outcome.RETRY
    # Then one WARNING line says so, with no traceback and nothing at ERROR
    lines = log_lines(capsys.readouterr().out)
    assert [(line["level"], line["message"]) for line in lines if line["level"] != "INFO"] == [
        ("WARNING", "transient failure; will retry")
    ]
    assert not [line for line in lines if "exception" in line]


def test_a_permanent_failure_is_recorded_failed_at_once(app, recorder):
    op = enqueue(app)
    recorder.fail_effect.append(PermanentError("template missing"))
    result = deliver(app, op)
    assert result.outcome is Outcome.FAILED
    stored = app.operations.require(op)
    assert stored.state is OperationState.FAILED
    assert "template missing" in stored.last_error


def test_the_last_attempt_records_failed_before_the_message_leaves(app, recorder):
    op = enqueue(app)
    recorder.fail_effect.append(TransientError("still down"))
    result = deliver(app, op, attempt=3)  # max_attempts = 3 for the fake jobs
    assert result.outcome is Outcome.FAILED_FINAL
    assert app.operations.require(op).state is OperationState.FAILED


def test_no_op_when_the_job_is_no_longer_needed(app, recorder):
    user = str(uuid.uuid4())
    recorder.users[user] = "deleted"
    op = enqueue(app, user_id=user)
    result = deliver(app, op)
    assert result.outcome is Outcome.NOOP
    assert recorder.effects == []
    assert app.operations.require(op).state is OperationState.NOOP


def test_claim_then_effect_claims_first_and_a_live_lease_blocks_a_second_delivery(app, recorder, clock):
    # Given the money job switched on
    set_toggle("money.credit", "on")
    op = enqueue(app, "money.credit.v1")
    recorder.fail_effect.clear()
    # When a first delivery claims, and a second delivery arrives while the claim's lease is live
    operation = app.operations.require(op)
    subject = Subject(op, "money.credit.v1", operation.request.fingerprint)
    app.operations.state.acquire(subject, "other-worker", 60)
    second = deliver(app, op)
    # Then the second does not run the effect, and comes back when the holder's lease is over
    assert second.outcome is Outcome.BUSY
    assert second.retry_after == pytest.approx(60, abs=1)
    assert recorder.effects == []
    # When the holder's lease expires without it finishing
    clock.advance(61)
    third = deliver(app, op, attempt=2)
    # Then the claim is taken over, the provider is asked first (not applied), then the effect runs once
    assert third.outcome is Outcome.SUCCEEDED
    assert recorder.calls.index(f"confirm:{op}") < recorder.calls.index(f"effect:{op}")
    assert recorder.provider[op] == 1
    # And the claim was in place before the effect
    assert recorder.claims_at_effect[0]["states"][op] == "IN_PROGRESS"


def test_claim_then_effect_settles_a_lost_response_by_asking_the_provider(app, recorder):
    set_toggle("money.credit", "on")
    op = enqueue(app, "money.credit.v1")
    recorder.drop_response = True
    result = deliver(app, op)
    assert result.outcome is Outcome.SUCCEEDED
    assert recorder.provider[op] == 1
    assert "confirms" in app.operations.require(op).history[-1].reason


def test_claim_then_effect_becomes_unknown_when_the_provider_cannot_tell(app, recorder):
    set_toggle("money.credit", "on")
    op = enqueue(app, "money.credit.v1")
    recorder.drop_response = True
    recorder.provider_can_lookup = False
    result = deliver(app, op)
    assert result.outcome is Outcome.UNKNOWN
    stored = app.operations.require(op)
    assert stored.state is OperationState.UNKNOWN
    assert [
        row["operation_id"] for row in app.operations.listings.list_attention(OperationState.UNKNOWN).operations
    ] == [op]
    # And a redelivery does not resubmit: UNKNOWN waits for an operator
    assert deliver(app, op, message_id="m-2").outcome is Outcome.DUPLICATE
    assert recorder.provider[op] == 1


def test_keyed_effect_runs_and_records(app, recorder):
    op = enqueue(app, "files.copy.v1")
    assert deliver(app, op).outcome is Outcome.SUCCEEDED
    assert recorder.effects == [op]


def test_a_disabled_fail_closed_job_pauses_without_loading(app, recorder):
    # Given the money job with no toggle parameter at all (fail-closed)
    op = enqueue(app, "money.credit.v1")
    result = deliver(app, op)
    assert result.outcome is Outcome.PAUSED
    assert recorder.calls == []
    assert app.operations.require(op).state is OperationState.PAUSED
    assert [
        row["operation_id"] for row in app.operations.listings.list_attention(OperationState.PAUSED).operations
    ] == [op]


def test_out_of_time_hands_the_message_back_untouched(app, recorder):
    op = enqueue(app)
    result = deliver(app, op, remaining_ms=1_000)
    assert result.outcome is Outcome.REQUEUE
    assert recorder.calls == []
    assert app.operations.require(op).state is OperationState.ACCEPTED


def test_an_unrelated_dynamodb_error_is_not_swallowed(app, recorder, monkeypatch):
    # Given DynamoDB rejecting the lease for a reason other than the condition
    op = enqueue(app)
    body = body_of(app, op)

    def broken_update(**kwargs):
        raise ClientError({"Error": {"Code": "ValidationException", "Message": "bad"}}, "UpdateItem")

    monkeypatch.setattr(app.clients.dynamodb, "update_item", broken_update)
    result = app.pipeline.process(body, Delivery("m-1", 1, 3, lambda: 30_000))
    # Then it surfaces as a failure of this attempt with its cause, not as "already claimed"
    assert result.outcome is Outcome.RETRY
    assert "ValidationException" in result.reason
    assert recorder.effects == []


@pytest.mark.parametrize(
    "body", ["{}", "garbage", '{"v": 1, "operation_id": "x", "job_type": "no.such.v1", "payload": {}}']
)
def test_malformed_messages_are_rejected_with_a_reason(app, body):
    result = app.pipeline.process(body, Delivery("m", 1, 3, lambda: 30_000))
    assert result.outcome is Outcome.REJECTED
    assert result.reason


def test_a_message_with_other_content_than_its_operation_is_a_conflict_recorded_and_not_run(app, recorder):
    # Given an operation that ran with its content
    op = enqueue(app)
    assert deliver(app, op).outcome is Outcome.SUCCEEDED
    # When a message with the same id but other content arrives (a producer deleted and re-put its item)
    other = Envelope(operation_id=op, job_type="mail.notice.v1", payload={"user_id": str(uuid.uuid4())}).to_body()
    result = app.pipeline.process(other, Delivery("m-9", 1, 3, lambda: 30_000))
    # Then it is refused as an identity conflict: acknowledged, recorded on the operation and listed, never run
    assert result.outcome is Outcome.CONFLICT and result.outcome.acknowledged and not result.outcome.to_dlq_now
    assert recorder.effects == [op]
    receipt = app.operations.require(op)
    assert receipt.state is OperationState.SUCCEEDED
    assert [conflict.source.split(":")[0] for conflict in receipt.conflicts] == ["worker"]
    assert [row["operation_id"] for row in app.operations.listings.list_attention(Flag.CONFLICT).operations] == [op]


def test_a_redelivered_duplicate_after_an_overwrite_is_still_a_duplicate(app, recorder):
    # Given an operation that succeeded, whose request a producer then overwrote with other content
    op = enqueue(app)
    original = body_of(app, op)
    assert deliver(app, op).outcome is Outcome.SUCCEEDED
    boto3.client("dynamodb").put_item(
        TableName=app.settings.jobs_table,
        Item={
            "operation_id": {"S": op},
            "job_type": {"S": "mail.notice.v1"},
            "payload": {"M": {"user_id": {"S": str(uuid.uuid4())}}},
        },
    )
    # When SQS redelivers the original message
    result = app.pipeline.process(original, Delivery("m-1", 2, 3, lambda: 30_000))
    # Then it is a skipped duplicate: the state record, not the overwritten request, decides
    assert result.outcome is Outcome.DUPLICATE
    assert recorder.effects == [op]
