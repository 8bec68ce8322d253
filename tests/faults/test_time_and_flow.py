"""Delayed, cancelled and expiring operations through the local cloud: effects counted in the emulated
services, receipts read back, and duplicate or late copies of a message shown to be no-ops."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from catalogue import examples
from converge.flow.delays import schedule_name
from converge.model.clock import iso
from converge.model.errors import InvalidTiming
from converge.model.states import OperationState
from converge.model.timing import parse_instant
from converge.operate.cancel import bulk_cancel, cancel

from .conftest import Chaos

RESET = "email.password-reset.v1"
PAYLOAD = {"user_id": examples.CONFIRMED_USER}
_S = OperationState


def later(chaos: Chaos, seconds: float) -> str:
    return iso(chaos.cloud.clock.now() + seconds)


def emails(chaos: Chaos, operation_id: str) -> int:
    return chaos.effects().for_operation(operation_id)["ses"]


def schedules(chaos: Chaos) -> list[dict[str, Any]]:
    scheduler, group = chaos.cloud.client("scheduler"), chaos.cloud.outputs["ScheduleGroupName"]
    return [
        scheduler.get_schedule(Name=summary["Name"], GroupName=group)
        for summary in scheduler.list_schedules(GroupName=group)["Schedules"]
    ]


def started_at(chaos: Chaos, operation_id: str) -> float:
    entries = [entry for entry in chaos.operation(operation_id).history if entry.state == _S.IN_PROGRESS]
    assert entries, chaos.operation(operation_id).history
    return parse_instant("started", entries[0].at)


def send_copy(chaos: Chaos, operation_id: str) -> None:
    """A stray copy of the operation's message (a late or repeated firing, a redriven duplicate)."""
    envelope = chaos.workload.converge.dispatcher.envelope_for(chaos.operation(operation_id))
    chaos.cloud.client("sqs").send_message(
        QueueUrl=chaos.cloud.outputs["CriticalQueueUrl"], MessageBody=envelope.to_body()
    )


def test_a_short_delay_waits_in_the_message_and_runs_once_at_its_time(chaos: Chaos) -> None:
    # Given a password reset due in 5 minutes (within SQS's 900 s message delay)
    run_at = later(chaos, 300)
    chaos.workload.converge.enqueue(RESET, "delay-short", PAYLOAD, run_at=run_at)
    # When the relay has dispatched it but no time has passed
    chaos.cloud.drain(max_fast_forward=0)
    # Then it is SCHEDULED, listed with its time, with no schedule created and no e-mail sent
    assert chaos.operation("delay-short").state is _S.SCHEDULED
    listed = chaos.workload.converge.operations.listings.list_attention("SCHEDULED").operations
    assert [(row["operation_id"], iso(float(row["run_at"]))) for row in listed] == [("delay-short", run_at)]
    assert schedules(chaos) == [] and emails(chaos, "delay-short") == 0
    # When time passes
    chaos.settle()
    # Then it ran once, not before its run_at
    assert chaos.operation("delay-short").state is _S.SUCCEEDED
    assert emails(chaos, "delay-short") == 1
    assert started_at(chaos, "delay-short") >= parse_instant("run_at", run_at)
    assert chaos.workload.converge.operations.listings.list_attention("SCHEDULED").operations == []


def test_a_long_delay_waits_in_a_one_time_schedule_that_is_deleted_after_it_fires(chaos: Chaos) -> None:
    # Given a password reset due in 2 hours (beyond SQS's delay)
    run_at = later(chaos, 7200)
    chaos.workload.converge.enqueue(RESET, "delay-long", PAYLOAD, run_at=run_at)
    chaos.cloud.drain(max_fast_forward=0)
    # Then one one-time schedule waits for it, deleted after completion, sending to the job's queue
    [schedule] = schedules(chaos)
    assert schedule["Name"] == schedule_name("delay-long")
    rounded_up = iso(math.ceil(parse_instant("run_at", run_at)))[:19]  # never before run_at
    assert schedule["ScheduleExpression"] == f"at({rounded_up})"
    assert schedule["ActionAfterCompletion"] == "DELETE"
    assert schedule["Target"]["Arn"].endswith(chaos.cloud.outputs["CriticalQueueUrl"].rsplit("/", 1)[-1])
    assert chaos.operation("delay-long").state is _S.SCHEDULED and emails(chaos, "delay-long") == 0
    # When its time comes (and the service delivers the firing twice, as at-least-once allows)
    chaos.cloud.advance(7201)
    fired = chaos.cloud.fire_one_time_schedules(duplicates=1)
    chaos.settle()
    # Then the e-mail went out once, not early, and the schedule is gone
    assert [firing.ok for firing in fired] == [True, True]
    assert emails(chaos, "delay-long") == 1
    assert chaos.operation("delay-long").state is _S.SUCCEEDED
    assert started_at(chaos, "delay-long") >= parse_instant("run_at", run_at)
    assert schedules(chaos) == []
    # When the firing arrives again, late / Then it is a no-op
    chaos.cloud.one_time_schedules.redeliver(fired[0])
    chaos.settle()
    assert emails(chaos, "delay-long") == 1


def test_a_copy_that_arrives_before_run_at_is_handed_back_not_run(chaos: Chaos) -> None:
    # Given an operation due in an hour, and a stray copy of its message in the queue now
    run_at = later(chaos, 3600)
    chaos.workload.converge.enqueue(RESET, "delay-early", PAYLOAD, run_at=run_at)
    chaos.cloud.drain(max_fast_forward=0)
    send_copy(chaos, "delay-early")
    # When the worker receives the copy
    chaos.cloud.drain(max_fast_forward=0)
    # Then nothing ran: the operation waits, and the copy is back in the queue, hidden until the run_at
    assert emails(chaos, "delay-early") == 0
    assert chaos.operation("delay-early").state is _S.SCHEDULED
    assert chaos.operation("delay-early").attempts == 0
    # When the time comes (the copy and the schedule both deliver) / Then it runs exactly once, on time
    chaos.settle()
    assert emails(chaos, "delay-early") == 1
    assert started_at(chaos, "delay-early") >= parse_instant("run_at", run_at)


def test_a_cancelled_operation_never_runs_and_its_copies_are_no_ops(chaos: Chaos) -> None:
    # Given a delayed operation waiting in its schedule
    chaos.workload.converge.enqueue(RESET, "cancel-me", PAYLOAD, run_at=later(chaos, 7200))
    chaos.cloud.drain(max_fast_forward=0)
    # When an operator cancels it
    result = chaos.workload.converge.cancel("cancel-me", "the customer withdrew", actor="cli:alice")
    # Then it is CANCELLED with the actor and reason in its receipt, listed, and its schedule is deleted
    assert (result.applied, result.before, result.after, result.message) == (
        True,
        "SCHEDULED",
        "CANCELLED",
        "cancelled",
    )
    operation = chaos.operation("cancel-me")
    assert operation.state is _S.CANCELLED
    assert operation.history[-1].reason == "cancelled by cli:alice: the customer withdrew"
    assert "cancel-me" in {
        row["operation_id"] for row in chaos.workload.converge.operations.listings.iter_attention("CANCELLED")
    }
    assert schedules(chaos) == []
    # When a copy arrives anyway (a schedule that fired after the cancel, a redriven duplicate)
    send_copy(chaos, "cancel-me")
    chaos.cloud.advance(7200)
    chaos.settle()
    # Then nothing ran and nothing moved
    assert emails(chaos, "cancel-me") == 0
    assert chaos.operation("cancel-me").state is _S.CANCELLED


def test_cancel_comes_too_late_for_a_settled_operation(chaos: Chaos) -> None:
    # Given an operation that ran
    chaos.enqueue(RESET, "ran-already", PAYLOAD)
    chaos.settle()
    # When it is cancelled / Then the cancel reports it came too late and changes nothing
    result = chaos.workload.converge.cancel("ran-already", "too slow")
    assert (result.applied, result.after, result.message) == (False, "SUCCEEDED", "too late: it is SUCCEEDED")
    assert chaos.operation("ran-already").state is _S.SUCCEEDED
    assert emails(chaos, "ran-already") == 1
    with pytest.raises(ValueError, match="needs a reason"):
        cancel(
            chaos.workload.converge.operations,
            chaos.workload.converge.delays,
            "ran-already",
            " ",
            settlement=chaos.workload.converge.settlement,
        )


def test_bulk_cancel_counts_on_a_dry_run_and_cancels_only_what_matches(chaos: Chaos) -> None:
    # Given three delayed password resets and one delayed verification e-mail
    converge = chaos.workload.converge
    for index in range(3):
        converge.enqueue(RESET, f"bulk-{index}", PAYLOAD, run_at=later(chaos, 3600))
    converge.enqueue(
        "email.partner-verification.v1", "bulk-other", {"user_id": examples.UNCONFIRMED_USER}, run_at=later(chaos, 3600)
    )
    chaos.cloud.drain(max_fast_forward=0)
    # When a dry run asks how many password resets are scheduled / Then it counts them and writes nothing
    dry = bulk_cancel(
        converge.operations,
        converge.delays,
        _S.SCHEDULED,
        "",
        job_type=RESET,
        dry_run=True,
        settlement=converge.settlement,
    )
    assert (dry.matched, dry.cancelled, sorted(dry.operation_ids)) == (3, 0, ["bulk-0", "bulk-1", "bulk-2"])
    assert all(chaos.operation(f"bulk-{index}").state is _S.SCHEDULED for index in range(3))
    # When it is run for real, for those older than an hour only / Then none match yet
    assert bulk_cancel(converge.operations, converge.delays, _S.SCHEDULED, "x", job_type=RESET,
                       older_than_seconds=3600, dry_run=False, settlement=converge.settlement).matched == 0  # fmt: skip
    # When it is run for real / Then those three are CANCELLED and the other runs at its time
    done = bulk_cancel(
        converge.operations,
        converge.delays,
        _S.SCHEDULED,
        "campaign stopped",
        job_type=RESET,
        dry_run=False,
        settlement=converge.settlement,
    )
    assert (done.matched, done.cancelled, done.too_late) == (3, 3, 0)
    chaos.settle()
    assert [chaos.operation(f"bulk-{index}").state for index in range(3)] == [_S.CANCELLED] * 3
    assert chaos.operation("bulk-other").state is _S.SUCCEEDED
    assert sum(emails(chaos, f"bulk-{index}") for index in range(3)) == 0


def test_an_operation_not_started_by_its_expiry_ends_expired_and_listed(chaos: Chaos) -> None:
    # Given an operation that must start within a minute, and a delivery that comes later than that
    converge = chaos.workload.converge
    converge.enqueue(RESET, "expires", PAYLOAD, expires_at=later(chaos, 60))
    chaos.cloud.advance(120)
    # When the worker receives it
    chaos.settle()
    # Then it never ran: EXPIRED (final) with the reason, and listed
    operation = chaos.operation("expires")
    assert operation.state is _S.EXPIRED
    assert operation.history[-1].reason.startswith("not started by its expires_at")
    assert emails(chaos, "expires") == 0
    assert [row["operation_id"] for row in converge.operations.listings.iter_attention("EXPIRED")] == ["expires"]


def test_times_are_checked_at_enqueue_and_a_raw_write_with_a_bad_one_is_rejected(chaos: Chaos) -> None:
    converge = chaos.workload.converge
    # When a producer asks for more than a year ahead, an expiry before run_at, or a local time
    # Then enqueue refuses it with the reason, writing nothing
    for run_at, expires_at, reason in (
        (later(chaos, 400 * 86400), None, "more than a year ahead"),
        (later(chaos, 600), later(chaos, 300), "is not after run_at"),
        ("2030-01-01T09:00:00", None, "must be in UTC"),
        (None, later(chaos, -10), "has already passed"),
    ):
        with pytest.raises(InvalidTiming, match=reason):
            converge.enqueue(RESET, "bad-time", PAYLOAD, run_at=run_at, expires_at=expires_at)
    assert converge.operations.get("bad-time") is None
    # When a producer writes one raw / Then the relay records it REJECTED with the reason, and nothing runs
    chaos.workload.enqueue_raw(
        {
            "operation_id": {"S": "raw-far"},
            "job_type": {"S": RESET},
            "payload": {"M": {"user_id": {"S": examples.CONFIRMED_USER}}},
            "run_at": {"S": later(chaos, 400 * 86400)},
        }
    )
    chaos.settle()
    operation = chaos.operation("raw-far")
    assert operation.state is _S.REJECTED
    assert "more than a year ahead" in (operation.last_error or "")
    assert emails(chaos, "raw-far") == 0
    assert json.loads(json.dumps(operation.to_json()))["run_at"] is not None
