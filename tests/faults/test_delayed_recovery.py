"""Delayed operations whose way to the queue broke: a failed relay batch, a dropped firing, a lost schedule,
a message that burned its receives at its run_at. Each ends run, or listed under STUCK with the reason;
effects are counted in the emulated services, receipts, listings and queues read back.
"""

from __future__ import annotations

import json
from typing import Any

from catalogue import examples
from converge.flow.delays import RETRY_POLICY, schedule_name
from converge.model.clock import iso
from converge.model.envelope import Envelope
from converge.model.states import Flag, OperationState
from converge.operate.deadletters import DlqUrls
from converge.operate.overdue import OVERDUE_GRACE_SECONDS
from converge.operate.redrive_decision import RedriveRequest
from localcloud.faults import FaultKind
from localcloud.workload import RECONCILER

from .conftest import Chaos, cli_listed

RESET = "email.password-reset.v1"
USER = examples.CONFIRMED_USER
TWO_DAYS = 2 * 86400
A_WEEK = 7 * 86400
_S = OperationState


def item(operation_id: str, run_at: str | None = None) -> dict[str, Any]:
    """A producer's raw request, as `aws dynamodb batch-write-item` would write it."""
    raw: dict[str, Any] = {
        "operation_id": {"S": operation_id},
        "job_type": {"S": RESET},
        "payload": {"M": {"user_id": {"S": USER}}},
    }
    if run_at:
        raw["run_at"] = {"S": run_at}
    return raw


def batch_write(chaos: Chaos, *items: dict[str, Any]) -> None:
    table = chaos.cloud.outputs["JobsTableName"]
    chaos.cloud.client("dynamodb").batch_write_item(RequestItems={table: [{"PutRequest": {"Item": i}} for i in items]})


def without_schedule_group(chaos: Chaos) -> None:
    chaos.cloud.client("scheduler").delete_schedule_group(Name=chaos.cloud.outputs["ScheduleGroupName"])


def recreate_schedule_group(chaos: Chaos) -> None:
    chaos.cloud.client("scheduler").create_schedule_group(Name=chaos.cloud.outputs["ScheduleGroupName"])


def schedules(chaos: Chaos) -> list[str]:
    scheduler, group = chaos.cloud.client("scheduler"), chaos.cloud.outputs["ScheduleGroupName"]
    return [summary["Name"] for summary in scheduler.list_schedules(GroupName=group)["Schedules"]]


def queue_messages(chaos: Chaos, output: str) -> list[dict[str, Any]]:
    sqs, url = chaos.cloud.client("sqs"), chaos.cloud.outputs[output]
    return sqs.receive_message(
        QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=0, MessageAttributeNames=["All"]
    ).get("Messages", [])


def stuck_rows(chaos: Chaos) -> dict[str, dict[str, Any]]:
    store = chaos.workload.converge.operations
    return {str(row["operation_id"]): row for row in store.listings.iter_attention(Flag.STUCK)}


def emails(chaos: Chaos, operation_id: str) -> int:
    return chaos.effects().emails[operation_id]


def a_failed_relay_batch_holding_a_long_delay(chaos: Chaos, delay: float = TWO_DAYS) -> str:
    """One item `delay` ahead and one immediate written in one batch while the schedule group is missing: the
    relay records the delayed one SCHEDULED, cannot create its schedule, and after the stream's retries gives
    the batch up (its range on the relay's failure destination). Returns the delayed one's run_at."""
    run_at = iso(chaos.cloud.clock.now() + delay)
    without_schedule_group(chaos)
    batch_write(chaos, item("op-later", run_at), item("op-now"))
    chaos.workload.drain()
    assert chaos.operation("op-later").state is _S.SCHEDULED
    assert chaos.operation("op-now").state is _S.ACCEPTED and not chaos.operation("op-now").state_record.recorded
    assert len(queue_messages(chaos, "RelayFailureQueueUrl")) == 1
    return run_at


def test_the_reconciler_replays_a_relay_batch_holding_a_delay_beyond_900_seconds(chaos: Chaos) -> None:
    # Given a relay batch given up on, holding a request two days ahead and an immediate one
    run_at = a_failed_relay_batch_holding_a_long_delay(chaos)
    # When the schedule group is back and the reconciler runs (its own settings and grants create the schedule)
    recreate_schedule_group(chaos)
    summary = chaos.workload.reconcile()
    # Then both were handled, counted as such, and the failure is cleared
    assert (summary["relay_failures"], summary["redispatched"], summary["relay_failures_left"]) == (1, 2, 0)
    assert queue_messages(chaos, "RelayFailureQueueUrl") == []
    # And the immediate one ran once; the delayed one waits in its one schedule, listed SCHEDULED
    assert chaos.operation("op-now").state is _S.SUCCEEDED and emails(chaos, "op-now") == 1
    assert schedules(chaos) == [schedule_name("op-later")]
    assert "op-later" in cli_listed("SCHEDULED") and emails(chaos, "op-later") == 0
    # When its time comes / Then it runs once, not before its run_at
    chaos.cloud.advance(TWO_DAYS + 1)
    chaos.settle()
    assert chaos.operation("op-later").state is _S.SUCCEEDED and emails(chaos, "op-later") == 1
    started = [entry.at for entry in chaos.operation("op-later").history if entry.state == _S.IN_PROGRESS]
    assert started and started[0] >= run_at
    chaos.check(["op-now", "op-later"])


def test_a_replay_that_fails_part_way_counts_what_it_did_and_lists_what_it_did_not(chaos: Chaos) -> None:
    # Given the same failed batch, and the schedule group still missing when the reconciler runs
    a_failed_relay_batch_holding_a_long_delay(chaos)
    summary = chaos.cloud.invoke(RECONCILER, {})
    # Then nothing is counted as redispatched, the failure is kept for the next run
    assert (summary["relay_failures"], summary["redispatched"], summary["relay_failures_left"]) == (0, 0, 1)
    assert len(queue_messages(chaos, "RelayFailureQueueUrl")) == 1
    # And both requests, which nothing sent (the delayed one recorded SCHEDULED, its schedule never created),
    # are listed under STUCK with the reason and what to do
    assert summary["undispatched_listed"] == 2
    for operation_id in ("op-now", "op-later"):
        row = stuck_rows(chaos)[operation_id]
        assert row["stuck_kind"] == "undispatched"
        assert "replaying its stream batch failed too" in row["stuck_reason"]
        assert "the relay failure is kept" in row["stuck_reason"]
        assert operation_id in cli_listed("STUCK")
    assert chaos.operation("op-later").state is _S.SCHEDULED
    assert emails(chaos, "op-now") == 0
    # When the group is back and the reconciler runs again
    recreate_schedule_group(chaos)
    summary = chaos.workload.reconcile()
    # Then the batch is replayed in full, the failure cleared, and the immediate one ran once (no longer listed)
    assert (summary["relay_failures"], summary["redispatched"]) == (1, 2)
    assert queue_messages(chaos, "RelayFailureQueueUrl") == []
    assert chaos.operation("op-now").state is _S.SUCCEEDED and emails(chaos, "op-now") == 1
    assert "op-now" not in stuck_rows(chaos)
    assert schedules(chaos) == [schedule_name("op-later")]
    # And the delayed one, its schedule made now, is listed SCHEDULED again and no longer STUCK
    assert "op-later" not in stuck_rows(chaos) and "op-later" in cli_listed("SCHEDULED")


def test_a_delayed_request_whose_relay_batch_failed_runs_once_its_run_at_has_passed(chaos: Chaos) -> None:
    # Given a failed relay batch holding a request due in 20 minutes (recorded SCHEDULED, no schedule made)
    a_failed_relay_batch_holding_a_long_delay(chaos, delay=1200)
    recreate_schedule_group(chaos)
    # When its run_at has passed by the time the reconciler replays the batch
    chaos.cloud.advance(1300)
    summary = chaos.workload.reconcile()
    # Then SCHEDULED counts as open: it is sent now, and runs once; the failure is cleared
    assert (summary["relay_failures"], summary["redispatched"], summary["already_moved"]) == (1, 2, 0)
    assert chaos.operation("op-later").state is _S.SUCCEEDED and emails(chaos, "op-later") == 1
    assert queue_messages(chaos, "RelayFailureQueueUrl") == []
    chaos.check(["op-now", "op-later"])


def test_a_dropped_firing_is_retried_dead_lettered_and_sent_again_by_the_reconciler(chaos: Chaos) -> None:
    # Given a delayed e-mail in its one-time schedule, whose firing's delivery to the queue keeps failing
    chaos.workload.converge.enqueue(RESET, "op-dropped", {"user_id": USER}, run_at=iso(chaos.cloud.clock.now() + 7200))
    chaos.cloud.drain(max_fast_forward=0)
    name = schedule_name("op-dropped")
    chaos.cloud.one_time_schedules.fail_delivery = lambda schedule: schedule == name
    # When its time comes and Scheduler has retried per the schedule's RetryPolicy
    chaos.cloud.advance(7201)
    chaos.workload.drain()
    # Then every attempt failed, the last went to the schedules' DLQ with Scheduler's attributes, nothing was sent
    attempts = [firing for firing in chaos.cloud.one_time_schedules.firings if firing.name == name]
    assert [firing.ok for firing in attempts] == [False] * len(attempts)
    assert 1 < len(attempts) <= RETRY_POLICY["MaximumRetryAttempts"] + 1 and attempts[-1].dead_lettered
    [dead] = queue_messages(chaos, "ScheduleDlqUrl")
    attributes = {key: value["StringValue"] for key, value in dead["MessageAttributes"].items()}
    assert attributes["EXHAUSTED_RETRY_CONDITION"] in ("MaximumRetryAttempts", "MaximumEventAgeInSeconds")
    assert attributes["RETRY_ATTEMPTS"] == str(len(attempts) - 1)
    assert attributes["SCHEDULE_ARN"].endswith(f"/{name}") and attributes["ERROR_CODE"]
    assert attributes["TARGET_ARN"].endswith(chaos.cloud.outputs["CriticalQueueUrl"].rsplit("/", 1)[-1])
    assert json.loads(dead["Body"])["operation_id"] == "op-dropped"
    assert chaos.operation("op-dropped").state is _S.SCHEDULED and emails(chaos, "op-dropped") == 0
    # When the reconciler reads that DLQ
    summary = chaos.workload.reconcile()
    # Then it sent the operation again (a delivery failure, not a poison message) and deleted the dead letter
    assert summary["failed_firings"] == 1
    assert chaos.operation("op-dropped").state is _S.SUCCEEDED and emails(chaos, "op-dropped") == 1
    assert queue_messages(chaos, "ScheduleDlqUrl") == []
    chaos.check(["op-dropped"])


def test_a_schedule_that_never_fires_is_found_overdue_listed_and_sent_again(chaos: Chaos) -> None:
    # Given a delayed e-mail whose schedule is deleted before it fires (it will never deliver)
    run_at = chaos.cloud.clock.now() + 7200
    chaos.workload.converge.enqueue(RESET, "op-lost", {"user_id": USER}, run_at=iso(run_at))
    chaos.cloud.drain(max_fast_forward=0)
    group = chaos.cloud.outputs["ScheduleGroupName"]
    chaos.cloud.client("scheduler").delete_schedule(Name=schedule_name("op-lost"), GroupName=group)
    # When the reconciler runs shortly after its run_at (within the grace) / Then nothing is listed or sent yet
    chaos.cloud.advance(7200 + 60)
    assert chaos.cloud.invoke(RECONCILER, {})["overdue_redispatched"] == 0
    assert chaos.operation("op-lost").state is _S.SCHEDULED and "op-lost" not in stuck_rows(chaos)
    # When it runs once the grace has passed
    chaos.cloud.advance(OVERDUE_GRACE_SECONDS)
    summary = chaos.cloud.invoke(RECONCILER, {})
    # Then the operation is listed under STUCK (overdue) with the reason, and sent again from its stored request
    assert summary["overdue_redispatched"] == 1
    row = stuck_rows(chaos)["op-lost"]
    assert row["stuck_kind"] == "overdue" and f"SCHEDULED for {iso(run_at)}" in row["stuck_reason"]
    assert "op-lost" in cli_listed("STUCK") and "op-lost" not in cli_listed("SCHEDULED")
    # When the workers run / Then it ran once and is no longer listed
    chaos.workload.drain()
    assert chaos.operation("op-lost").state is _S.SUCCEEDED and emails(chaos, "op-lost") == 1
    assert "op-lost" not in stuck_rows(chaos)
    chaos.check(["op-lost"])


def test_a_delayed_message_that_burned_its_receives_at_run_at_is_listed_stuck(chaos: Chaos) -> None:
    # Given a delayed e-mail (a message delay) whose every receive at its run_at fails before it starts
    chaos.workload.converge.enqueue(RESET, "op-burned", {"user_id": USER}, run_at=iso(chaos.cloud.clock.now() + 300))
    throttle = chaos.faults.plan(FaultKind.DYNAMODB_THROTTLE, "op-burned", times=1_000)
    # When its receives are spent (the message goes to the DLQ) and the reconciler runs
    chaos.settle()
    # Then the operation, still SCHEDULED, is listed under STUCK with the reason and what to do
    assert chaos.operation("op-burned").state is _S.SCHEDULED
    row = stuck_rows(chaos)["op-burned"]
    assert row["stuck_kind"] == "dead_lettered" and "while the operation is SCHEDULED" in row["stuck_reason"]
    assert "converge dlq redrive" in row["stuck_reason"] and "op-burned" in cli_listed("STUCK")
    assert emails(chaos, "op-burned") == 0
    # When the fault is gone and an operator redrives it, as the reason says
    throttle.times = throttle.used
    urls = DlqUrls.model_validate({"CRITICAL_DLQ_URL": chaos.cloud.outputs["CriticalDlqUrl"]})
    redrive = chaos.workload.converge.redrive(urls, sleep=lambda seconds: None)
    assert redrive.run(RedriveRequest(queue="critical", operation_ids=["op-burned"])).moved == 1
    chaos.settle()
    # Then it ran once, and is no longer listed
    assert chaos.operation("op-burned").state is _S.SUCCEEDED and emails(chaos, "op-burned") == 1
    assert "op-burned" not in stuck_rows(chaos)
    chaos.check(["op-burned"])


def test_an_early_copy_dead_lettered_before_run_at_is_deleted_and_the_operation_stays_scheduled(chaos: Chaos) -> None:
    # Given an e-mail a week ahead, and a copy of its request delivered at once (a replayed dispatch; hidden at most
    # 11 h 40 min a receive, as SQS allows, it spends its receives in some two days)
    run_at = iso(chaos.cloud.clock.now() + A_WEEK)
    chaos.workload.converge.enqueue(RESET, "op-early", {"user_id": USER}, run_at=run_at)
    chaos.workload.drain()
    chaos.faults.replay_dispatch("op-early")
    # When the copy, never started before the run_at, comes back until its receives are spent (dead-lettered)
    chaos.workload.drain()
    assert [json.loads(m["Body"])["operation_id"] for m in queue_messages(chaos, "CriticalDlqUrl")] == ["op-early"]
    # And the reconciler runs
    summary = chaos.cloud.invoke(RECONCILER, {})
    # Then the copy is deleted as superseded (counted, with the reason), and the operation is not listed STUCK
    assert (summary["dead_letters_superseded"], summary["stuck_listed"]) == (1, 0)
    assert "its own delivery is still to come" in summary["details"][0]["reason"]
    assert queue_messages(chaos, "CriticalDlqUrl") == []
    assert chaos.operation("op-early").state is _S.SCHEDULED and "op-early" not in stuck_rows(chaos)
    assert "op-early" in cli_listed("SCHEDULED") and emails(chaos, "op-early") == 0
    # And at its run_at its own schedule delivers it: one e-mail
    chaos.cloud.advance(A_WEEK + 1)
    chaos.settle()
    assert chaos.operation("op-early").state is _S.SUCCEEDED and emails(chaos, "op-early") == 1
    chaos.check(["op-early"])


def test_a_dead_letter_of_other_content_is_no_early_copy_and_is_left_listed(chaos: Chaos) -> None:
    # Given an e-mail two days ahead, SCHEDULED, and in the DLQ a message under its id with other content
    run_at = iso(chaos.cloud.clock.now() + TWO_DAYS)
    chaos.workload.converge.enqueue(RESET, "op-other", {"user_id": USER}, run_at=run_at)
    chaos.workload.drain()
    other = Envelope(operation_id="op-other", job_type=RESET, payload={"user_id": examples.UNCONFIRMED_USER})
    chaos.cloud.client("sqs").send_message(QueueUrl=chaos.cloud.outputs["CriticalDlqUrl"], MessageBody=other.to_body())
    # When the reconciler runs
    summary = chaos.cloud.invoke(RECONCILER, {})
    # Then it is not deleted as superseded (it is no copy of the operation): it stays, and the operation is listed
    assert summary["dead_letters_superseded"] == 0
    assert [json.loads(m["Body"])["payload"] for m in queue_messages(chaos, "CriticalDlqUrl")] == [other.payload]
    assert stuck_rows(chaos)["op-other"]["stuck_kind"] == "dead_lettered"
