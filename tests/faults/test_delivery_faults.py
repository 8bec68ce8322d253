"""The delayed path's and the relay's faults, injected deterministically: what each does, seen in the services.

A relay batch failure reaches the on-failure destination; a missing schedule group takes its
schedules with it and refuses new ones until it is created again; a dropped firing is recorded and
sends nothing; a duplicate delivery hands a handled message to the worker once more. Each is counted.
"""

from __future__ import annotations

import json

import pytest

from catalogue import examples
from converge.model.clock import iso
from converge.model.states import OperationState
from localcloud.faults import FaultKind

from .conftest import Chaos

EMAIL = "email.partner-verification.v1"
EMAIL_PAYLOAD = {"user_id": examples.UNCONFIRMED_USER}
TWO_DAYS = 2 * 86400.0


def failure_records(chaos: Chaos) -> list[dict]:
    messages = chaos.cloud.client("sqs").receive_message(
        QueueUrl=chaos.cloud.outputs["RelayFailureQueueUrl"], MaxNumberOfMessages=10, VisibilityTimeout=0
    )
    return [json.loads(message["Body"]) for message in messages.get("Messages", [])]


def schedules(chaos: Chaos) -> list[str]:
    group = chaos.cloud.outputs["ScheduleGroupName"]
    return [s["Name"] for s in chaos.cloud.client("scheduler").list_schedules(GroupName=group)["Schedules"]]


def test_a_relay_batch_failure_runs_out_of_retries_into_the_failure_queue(chaos: Chaos) -> None:
    # Given a relay that fails every batch holding one operation, and a neighbour in the same batch
    chaos.enqueue(EMAIL, "op-poison", EMAIL_PAYLOAD)
    chaos.enqueue(EMAIL, "op-neighbour", {"user_id": examples.SECOND_UNCONFIRMED_USER})
    rule = chaos.faults.plan(FaultKind.RELAY_BATCH_FAILURE, "op-poison", times=50)
    # When the stream is drained
    chaos.workload.drain()
    # Then Lambda bisected the batch, retried the failing half until MaximumRetryAttempts, and gave it up
    [record] = failure_records(chaos)
    assert record["requestContext"]["condition"] == "RetryAttemptsExhausted"
    assert record["DDBStreamBatchInfo"]["batchSize"] == 1
    assert chaos.faults.counts[FaultKind.RELAY_BATCH_FAILURE.value] == rule.used >= 6
    assert chaos.faults.operations["op-poison"].injected[FaultKind.RELAY_BATCH_FAILURE.value] == rule.used
    # ...while the neighbour, bisected away from it, ran; the poisoned one was never dispatched
    assert chaos.operation("op-neighbour").state is OperationState.SUCCEEDED
    assert chaos.effects().emails["op-poison"] == 0


def test_a_missing_schedule_group_takes_its_schedules_and_refuses_new_ones_until_created_again(chaos: Chaos) -> None:
    # Given a job waiting two days in a one-time schedule
    now = chaos.cloud.clock.now()
    chaos.workload.converge.enqueue(EMAIL, "op-waiting", EMAIL_PAYLOAD, run_at=iso(now + TWO_DAYS))
    chaos.cloud.drain(max_fast_forward=0)
    assert len(schedules(chaos)) == 1
    # When the group is deleted
    chaos.faults.delete_schedule_group()
    # Then its schedule is gone with it (logged against the operation), and a new schedule is refused
    assert chaos.faults.operations["op-waiting"].injected[FaultKind.SCHEDULE_GROUP_MISSING.value] == 1
    scheduler = chaos.cloud.client("scheduler")
    with pytest.raises(scheduler.exceptions.ResourceNotFoundException):
        scheduler.create_schedule(
            Name="x",
            GroupName=chaos.cloud.outputs["ScheduleGroupName"],
            ScheduleExpression="at(2030-01-01T00:00:00)",
            FlexibleTimeWindow={"Mode": "OFF"},
            Target={"Arn": "arn:aws:sqs:us-east-1:123456789012:q", "RoleArn": "arn:aws:iam::123456789012:role/r"},
        )
    # When it is created again / Then it is empty, and schedules are made in it again
    chaos.faults.restore_schedule_group()
    assert schedules(chaos) == []
    chaos.workload.converge.enqueue(EMAIL, "op-later", EMAIL_PAYLOAD, run_at=iso(now + TWO_DAYS))
    chaos.cloud.drain(max_fast_forward=0)
    assert len(schedules(chaos)) == 1
    assert chaos.faults.counts[FaultKind.SCHEDULE_GROUP_MISSING.value] == 1


def test_a_dropped_firing_fails_every_attempt_until_dead_lettered_then_the_reconciler_sends_it(chaos: Chaos) -> None:
    # Given a job in a one-time schedule whose next firing's delivery fails
    now = chaos.cloud.clock.now()
    chaos.workload.converge.enqueue(EMAIL, "op-dropped", EMAIL_PAYLOAD, run_at=iso(now + TWO_DAYS))
    chaos.cloud.drain(max_fast_forward=0)
    chaos.faults.plan(FaultKind.SCHEDULE_FIRING_DROPPED, "op-dropped")
    # When its time comes
    chaos.cloud.advance(TWO_DAYS + 1)
    [firing] = chaos.cloud.fire_one_time_schedules()
    # Then the firing is recorded as failed, nothing reached the queue, and no e-mail was sent
    assert (firing.ok, firing.error) == (False, "injected: the schedule's target delivery failed")
    # When the schedule's RetryPolicy has run out
    chaos.cloud.drain()
    # Then every retry failed too (the fault is the firing's, not one attempt's), the last was dead-lettered,
    # and still no e-mail was sent
    attempts = [seen for seen in chaos.cloud.one_time_schedules.firings if seen.name == firing.name]
    assert len(attempts) > 1 and not any(seen.ok for seen in attempts) and attempts[-1].dead_lettered
    assert chaos.effects().emails["op-dropped"] == 0
    assert chaos.faults.operations["op-dropped"].injected[FaultKind.SCHEDULE_FIRING_DROPPED.value] == 1
    # When the reconciler reads the schedules' dead-letter queue / Then it sends the operation, once
    assert chaos.workload.reconcile()["failed_firings"] == 1
    chaos.workload.drain()
    assert chaos.effects().emails["op-dropped"] == 1


def test_a_duplicate_delivery_reaches_the_worker_again_and_the_lease_absorbs_it(chaos: Chaos) -> None:
    # Given an e-mail whose message SQS delivers once more after it was handled
    chaos.enqueue(EMAIL, "op-twice", EMAIL_PAYLOAD)
    chaos.faults.plan(FaultKind.DUPLICATE_DELIVERY, "op-twice")
    worker_runs = chaos.cloud.runtime.invocation_counts["CriticalWorkerFunction"]
    # When everything runs
    chaos.settle()
    # Then the worker saw it twice, and one e-mail went out
    assert chaos.cloud.runtime.invocation_counts["CriticalWorkerFunction"] - worker_runs >= 2
    assert chaos.faults.counts[FaultKind.DUPLICATE_DELIVERY.value] == 1
    assert chaos.operation("op-twice").state is OperationState.SUCCEEDED
    assert chaos.effects().emails["op-twice"] == 1
    chaos.check(["op-twice"])


def test_a_doubled_firing_sends_the_message_twice_and_one_email_goes_out(chaos: Chaos) -> None:
    # Given a job in a one-time schedule whose firing is delivered twice
    now = chaos.cloud.clock.now()
    chaos.workload.converge.enqueue(EMAIL, "op-fired-twice", EMAIL_PAYLOAD, run_at=iso(now + TWO_DAYS))
    chaos.cloud.drain(max_fast_forward=0)
    chaos.faults.plan(FaultKind.DUPLICATE_DELIVERY, "op-fired-twice")
    # When its time comes
    chaos.cloud.advance(TWO_DAYS + 1)
    fired = chaos.cloud.fire_one_time_schedules()
    chaos.settle()
    # Then two messages were sent, and the lease let one e-mail out
    assert [firing.ok for firing in fired] == [True, True]
    assert chaos.effects().emails["op-fired-twice"] == 1
    assert chaos.operation("op-fired-twice").state is OperationState.SUCCEEDED
    chaos.check(["op-fired-twice"])


def test_effects_are_logged_with_the_emulated_time_they_happened(chaos: Chaos) -> None:
    # Given a job due in five minutes
    now = chaos.cloud.clock.now()
    chaos.workload.converge.enqueue(EMAIL, "op-timed", EMAIL_PAYLOAD, run_at=iso(now + 300))
    # When it runs
    chaos.workload.drain()
    # Then its one effect is logged, at or after its run_at
    [seen] = [effect for effect in chaos.faults.effects_seen if effect.operation_id == "op-timed"]
    assert seen.service == "sesv2" and seen.at >= now + 300
