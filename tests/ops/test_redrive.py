"""DLQ redrive on moto: every case of what goes back, what stays, and what a crash leaves behind."""

from __future__ import annotations

import json
from types import SimpleNamespace

import boto3
import pytest

from converge.flow.registry import Queue
from converge.model.states import OperationState
from converge.operate.deadletters import DlqUrls
from converge.operate.redrive_decision import RedriveRequest

from .conftest import (
    body_of,
    dead_letter,
    depth,
    messages,
    new_id,
    operation_in,
    pass_time,
    set_toggle,
    work_off,
)


def request(**fields) -> RedriveRequest:
    return RedriveRequest.model_validate({"queue": "critical", **fields})


def test_a_failed_operation_goes_back_to_its_queue_reopened_with_its_message_intact(app, redrive, queues):
    # Given a FAILED operation whose message the worker copied to the critical DLQ
    source, dlq = queues[Queue.CRITICAL]
    operation = operation_in(app, new_id(), OperationState.FAILED)
    attributes = dead_letter(dlq, operation)
    # When the DLQ is redriven
    summary = redrive.run(request())
    # Then the message is back on its source queue: same body (correlation id included), same attributes,
    # plus redrive_count = 1, and the DLQ is empty
    assert (summary.moved, summary.left, summary.errors) == (1, 0, 0)
    [message] = messages(source)
    assert message["Body"] == body_of(operation)
    assert json.loads(message["Body"])["correlation_id"] == f"corr-{operation.operation_id}"
    sent = {name: value["StringValue"] for name, value in message["MessageAttributes"].items()}
    assert sent == {name: value["StringValue"] for name, value in attributes.items()} | {"redrive_count": "1"}
    assert depth(dlq) == 0
    # And the operation is ACCEPTED again, the redrive counted and recorded in its history
    stored = app.operations.require(operation.operation_id)
    assert stored.state is OperationState.ACCEPTED
    assert stored.redrives == 1
    assert stored.history[-1].reason == "redriven from the DLQ by the redrive function"
    assert [detail["action"] for detail in summary.details] == ["moved"]


def test_a_second_redrive_increments_redrive_count(app, redrive, queues):
    # Given a message that was redriven once before
    source, dlq = queues[Queue.CRITICAL]
    operation = operation_in(app, new_id(), OperationState.FAILED)
    dead_letter(dlq, operation, redrive_count="1")
    # When it is redriven again
    redrive.run(request())
    # Then its redrive_count is 2
    [message] = messages(source)
    assert message["MessageAttributes"]["redrive_count"]["StringValue"] == "2"


@pytest.mark.parametrize("state", [OperationState.SUCCEEDED, OperationState.NOOP])
def test_a_message_of_a_settled_operation_is_deleted_not_resent(app, redrive, queues, state):
    # Given a dead letter whose operation has since converged
    source, dlq = queues[Queue.CRITICAL]
    operation = operation_in(app, new_id(), state)
    dead_letter(dlq, operation)
    # When the DLQ is redriven
    summary = redrive.run(request())
    # Then it is deleted as converged, nothing is sent, and the operation is untouched
    assert (summary.skipped_converged, summary.moved) == (1, 0)
    assert depth(dlq) == 0 and depth(source) == 0
    assert app.operations.require(operation.operation_id).state is state


def test_a_disabled_job_stays_in_the_dlq_visible(app, redrive, queues):
    # Given a dead letter of a fail-closed job whose toggle is off, and one of an enabled job
    source, dlq = queues[Queue.CRITICAL]
    money = operation_in(app, new_id(), OperationState.FAILED, job_type="money.credit.v1")
    mail = operation_in(app, new_id(), OperationState.FAILED)
    dead_letter(dlq, money)
    dead_letter(dlq, mail)
    set_toggle("mail.notice", "on")
    # When the DLQ is redriven
    summary = redrive.run(request())
    # Then the disabled one stays, visible again, its operation still FAILED; the other moved
    assert (summary.skipped_disabled, summary.moved) == (1, 1)
    [left] = messages(dlq)
    assert json.loads(left["Body"])["operation_id"] == money.operation_id
    assert app.operations.require(money.operation_id).state is OperationState.FAILED
    assert "kill switch money.credit is off" in summary.details[0]["reason"] + summary.details[1]["reason"]
    # And once the toggle is on, the next redrive moves it
    set_toggle("money.credit", "on")
    assert redrive.run(request()).moved == 1
    assert depth(dlq) == 0 and depth(source) == 2


def test_unknown_rejected_and_malformed_messages_stay_with_their_reasons(app, redrive, queues):
    # Given an UNKNOWN operation, a REJECTED one, and a message that is not an envelope
    source, dlq = queues[Queue.CRITICAL]
    unknown = operation_in(app, new_id(), OperationState.UNKNOWN)
    rejected = operation_in(app, new_id(), OperationState.REJECTED)
    dead_letter(dlq, unknown)
    dead_letter(dlq, rejected)
    boto3.client("sqs").send_message(QueueUrl=dlq, MessageBody="not json")
    # When the DLQ is redriven
    summary = redrive.run(request())
    # Then nothing moved: two are left for an operator, one is an error, each with a reason
    assert (summary.moved, summary.left, summary.errors) == (0, 2, 1)
    reasons = {detail.get("operation_id"): detail["reason"] for detail in summary.details}
    assert "UNKNOWN" in reasons[unknown.operation_id]
    assert "REJECTED" in reasons[rejected.operation_id]
    assert "malformed message" in reasons[None]
    # And all three are visible in the DLQ again, their operations untouched
    assert len(messages(dlq)) == 3 and depth(source) == 0
    assert app.operations.require(unknown.operation_id).state is OperationState.UNKNOWN
    assert app.operations.require(rejected.operation_id).redrives == 0


def test_filters_select_by_job_type_error_class_operation_id_and_age(app, redrive, queues, clock):
    # Given dead letters of two job types, a worker's error class and SQS's own redrive, of different ages
    source, dlq = queues[Queue.CRITICAL]
    old = operation_in(app, new_id(), OperationState.FAILED)
    dead_letter(dlq, old, error_class="ProviderDown")
    pass_time(7200)
    by_sqs = operation_in(app, new_id(), OperationState.IN_PROGRESS)
    dead_letter(dlq, by_sqs, error_class=None)
    other = operation_in(app, new_id(), OperationState.FAILED, job_type="files.copy.v1")
    dead_letter(dlq, other, error_class="ProviderDown")

    def moved(**filters) -> set[str]:
        summary = redrive.run(request(dry_run=True, **filters))
        return {detail["operation_id"] for detail in summary.details if detail["action"] == "would move"}

    # When / Then each filter selects exactly its messages
    assert moved(job_types=["mail.notice"]) == {old.operation_id, by_sqs.operation_id}
    assert moved(job_types=["files.copy.v1"]) == {other.operation_id}
    assert moved(error_classes=["MaxReceiveCountExceeded"]) == {by_sqs.operation_id}
    assert moved(operation_ids=[old.operation_id, other.operation_id]) == {old.operation_id, other.operation_id}
    assert moved(older_than_seconds=3600) == {old.operation_id}
    assert moved(newer_than_seconds=600) == {by_sqs.operation_id, other.operation_id}
    # And a real run with a filter moves only the match, leaving the rest visible
    summary = redrive.run(request(error_classes=["MaxReceiveCountExceeded"]))
    assert (summary.moved, summary.not_matched) == (1, 2)
    assert len(messages(dlq)) == 2 and len(messages(source)) == 1
    # An operation SQS dead-lettered mid-retry (still IN_PROGRESS) is sent again as it stands, and listed
    # under STUCK until a worker takes it (its state is not rewritten: an earlier holder's lease must stay)
    resent = app.operations.require(by_sqs.operation_id)
    assert resent.state is OperationState.IN_PROGRESS
    assert (resent.state_record.stuck_kind, resent.redrives) == ("reopened", 1)


def test_a_dry_run_counts_but_changes_nothing(app, redrive, queues):
    # Given one of each: failed, succeeded, unknown
    source, dlq = queues[Queue.CRITICAL]
    failed = operation_in(app, new_id(), OperationState.FAILED)
    for operation in (failed, operation_in(app, new_id(), OperationState.SUCCEEDED)):
        dead_letter(dlq, operation)
    dead_letter(dlq, operation_in(app, new_id(), OperationState.UNKNOWN))
    # When a dry run looks at them
    summary = redrive.run(request(dry_run=True))
    # Then the counts say what would happen
    assert summary.to_json() | {"details": []} == {
        "dry_run": True,
        "moved": 1,
        "skipped_converged": 1,
        "superseded": 0,
        "skipped_disabled": 0,
        "left": 1,
        "errors": 0,
        "not_matched": 0,
        "incomplete": False,
        "details": [],
    }
    # And nothing was sent, deleted or transitioned
    assert len(messages(dlq)) == 3 and depth(source) == 0
    stored = app.operations.require(failed.operation_id)
    assert (stored.state, stored.redrives) == (OperationState.FAILED, 0)


def test_sends_are_paced_on_the_injected_clock_without_sleeping(app, redrive, queues, sleeps):
    # Given five failed operations in the DLQ
    dlq = queues[Queue.CRITICAL][1]
    for _ in range(5):
        dead_letter(dlq, operation_in(app, new_id(), OperationState.FAILED))
    # When they are redriven at 2 per second
    summary = redrive.run(request(rate_per_second=2))
    # Then the four gaps between the five sends were waited on the fake clock, half a second each
    assert summary.moved == 5
    assert sleeps.waits == pytest.approx([0.5] * 4)


def test_max_messages_caps_the_run_and_leaves_the_rest_visible(app, redrive, queues):
    # Given twelve failed operations in the DLQ
    source, dlq = queues[Queue.CRITICAL]
    for _ in range(12):
        dead_letter(dlq, operation_in(app, new_id(), OperationState.FAILED))
    # When at most five are redriven
    summary = redrive.run(request(max_messages=5))
    # Then five moved and seven are still visible in the DLQ
    assert summary.moved == 5
    assert len(messages(source)) == 5 and len(messages(dlq)) == 7


def test_queue_all_redrives_each_dlq_to_its_own_queue(app, redrive, queues):
    # Given a dead letter in the critical and one in the default DLQ
    critical = operation_in(app, new_id(), OperationState.FAILED)
    default = operation_in(app, new_id(), OperationState.FAILED, job_type="files.copy.v1")
    dead_letter(queues[Queue.CRITICAL][1], critical)
    dead_letter(queues[Queue.DEFAULT][1], default)
    # When every DLQ is redriven
    summary = redrive.run(request(queue="all"))
    # Then each message went back to the queue its DLQ belongs to, and the bulk queue got nothing
    assert summary.moved == 2
    assert depth(queues[Queue.BULK][0]) == 0
    assert [json.loads(m["Body"])["operation_id"] for m in messages(queues[Queue.CRITICAL][0])] == [
        critical.operation_id
    ]
    assert [json.loads(m["Body"])["operation_id"] for m in messages(queues[Queue.DEFAULT][0])] == [default.operation_id]


def test_a_crash_between_send_and_delete_loses_nothing_and_a_rerun_converges(app, dlq_urls, sleeps, queues, effects):
    # Given a failed operation in the DLQ, and a redrive that dies right after sending
    source, dlq = queues[Queue.CRITICAL]
    operation = operation_in(app, new_id(), OperationState.FAILED)
    dead_letter(dlq, operation)

    def die(message):
        raise SystemExit("killed between send and delete")

    crashing = app.redrive(dlq_urls, sleep=sleeps, after_send=die)
    # When it runs
    with pytest.raises(SystemExit):
        crashing.run(request())
    # Then the message exists twice: sent to its queue, and still (hidden) in the DLQ; the receipt says ACCEPTED
    assert depth(source) == 1 and depth(dlq) == 1
    stored = app.operations.require(operation.operation_id)
    assert (stored.state, stored.redrives) == (OperationState.ACCEPTED, 1)
    # When the worker runs the sent copy, and later (the DLQ copy visible again) the redrive runs again
    assert work_off(app, source) == ["succeeded"]
    pass_time(3600)
    summary = app.redrive(dlq_urls, sleep=sleeps).run(request())
    # Then the leftover copy is deleted as converged: both queues empty, exactly one effect, SUCCEEDED
    assert (summary.skipped_converged, summary.moved) == (1, 0)
    assert depth(source) == 0 and depth(dlq) == 0
    assert effects.done == [operation.operation_id]
    assert app.operations.require(operation.operation_id).state is OperationState.SUCCEEDED


def test_a_rerun_before_the_worker_sends_a_duplicate_that_the_pipeline_absorbs(app, dlq_urls, sleeps, queues, effects):
    # Given a redrive that crashed between send and delete, and a rerun before any worker ran
    source, dlq = queues[Queue.CRITICAL]
    operation = operation_in(app, new_id(), OperationState.FAILED)
    dead_letter(dlq, operation)

    def die(message):
        raise SystemExit("killed")

    with pytest.raises(SystemExit):
        app.redrive(dlq_urls, sleep=sleeps, after_send=die).run(request())
    pass_time(3600)
    rerun = app.redrive(dlq_urls, sleep=sleeps).run(request())
    # Then the rerun moved the leftover copy (the operation is open), so the queue holds two copies
    assert rerun.moved == 1 and depth(source) == 2 and depth(dlq) == 0
    # When the worker takes both
    outcomes = work_off(app, source)
    # Then one ran and the other was skipped as a duplicate: one effect, one SUCCEEDED receipt
    assert sorted(outcomes) == ["duplicate_skipped", "succeeded"]
    assert effects.done == [operation.operation_id]
    stored = app.operations.require(operation.operation_id)
    assert (stored.state, stored.redrives) == (OperationState.SUCCEEDED, 2)


def test_bad_requests_are_answered_with_an_error_not_a_crash(app, redrive, queues):
    # Given requests the redrive cannot accept; When handled; Then each answers with a clear error
    assert "queue" in redrive.handle({"queue": "everything"})["error"]
    assert "max_messages" in redrive.handle({"queue": "all", "max_messages": 0})["error"]
    unknown = redrive.handle({"queue": "critical", "job_types": ["no.such.v1"]})
    assert "unknown job type 'no.such.v1'" in unknown["error"]
    assert "surprise" in redrive.handle({"queue": "critical", "surprise": 1})["error"]
    assert "valid dictionary" in redrive.handle(None)["error"]
    # And an empty event is the bare `converge dlq redrive`: every queue, for real, at the CLI's defaults
    assert {key: redrive.handle({})[key] for key in ("dry_run", "moved", "errors")} == {
        "dry_run": False,
        "moved": 0,
        "errors": 0,
    }
    assert RedriveRequest.model_validate({}) == RedriveRequest(queue="all", max_messages=100, rate_per_second=10.0)
    # And a deployment without a bulk DLQ configured says which setting is missing
    partial = app.redrive(DlqUrls.model_validate({"CRITICAL_DLQ_URL": queues[Queue.CRITICAL][1]}))
    assert "BULK_DLQ_URL" in partial.handle({"queue": "bulk"})["error"]


def test_a_run_short_of_time_stops_and_says_so(app, redrive, queues):
    # Given failed operations in the DLQ and a Lambda with little time left
    dlq = queues[Queue.CRITICAL][1]
    for _ in range(3):
        dead_letter(dlq, operation_in(app, new_id(), OperationState.FAILED))
    # When the handler runs with 5 seconds remaining
    summary = redrive.handle({"queue": "critical"}, SimpleNamespace(get_remaining_time_in_millis=lambda: 5_000))
    # Then it moved nothing, says it is incomplete, and left every message visible
    assert summary["incomplete"] is True and summary["moved"] == 0
    assert len(messages(dlq)) == 3
