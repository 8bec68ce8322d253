"""Histories the explorer found and shrunk, replayed step by step as Hypothesis printed them.

Each is a promise the code broke when it was found (the kind of break it raised is named in its comment);
replayed now, each keeps the promise, and a regression raises that kind again. Add a new one by pasting
the printed steps into a test that takes the `explorer` fixture (see docs/fault-injection.md, "The explorer").
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from converge.model.states import OperationState
from converge.store.codecs import request_from_image
from localcloud.faults import FaultKind

from . import promise
from .machine import Explorer


def test_a_long_delayed_request_given_up_by_the_relay_is_replayed_by_the_reconciler(explorer: type[Explorer]) -> None:
    # Break 2 (it raised LostScheduledAhead): the reconciler had no scheduler settings, so its replay raised
    # Given a request two days ahead whose relay batch failed until Lambda gave it up
    # When the reconciler replays the failure / Then the operation is in flight again (or listed)
    state = explorer()
    state.promise_kept()
    operations_0 = api_operations_0 = state.caller_posts_to_api(job="email", timing="run_at in 2 days")  # noqa: F841
    state.promise_kept()
    state.relay_batch_fails()
    state.promise_kept()
    state.reconciler_runs()
    state.teardown()


def test_an_immediate_request_in_a_batch_with_a_long_delay_is_replayed_by_the_reconciler(
    explorer: type[Explorer],
) -> None:
    # Break 2 (it raised LostAccepted): the replay raised on the delayed request, and the immediate one after it
    # in the batch stayed ACCEPTED with no state record
    # Given the schedule group missing while a batch of a request two days ahead and one for now is relayed
    # When the reconciler replays the batch the relay gave up / Then both are in flight again (or listed)
    state = explorer()
    state.promise_kept()
    state.schedule_group_deleted()
    state.promise_kept()
    operations_0 = api_operations_0 = state.caller_posts_to_api(job="email", timing="run_at in 2 days")  # noqa: F841
    state.promise_kept()
    operations_1 = api_operations_1 = state.caller_posts_to_api(job="email", timing="now")  # noqa: F841
    state.promise_kept()
    state.everything_drains()
    state.promise_kept()
    state.reconciler_runs()
    state.teardown()


def test_a_delayed_request_whose_relay_batch_failed_runs_after_its_run_at(explorer: type[Explorer]) -> None:
    # Break 3 (it raised LostScheduledPastRunAt): the reconciler took SCHEDULED for "already moved"
    # Given the schedule group missing while a request two days ahead is relayed (the batch is given up)
    # When it is quiescent: the group back, the clock past the run_at, the reconciler run
    # Then the operation ran, or is listed
    state = explorer()
    state.promise_kept()
    state.schedule_group_deleted()
    state.promise_kept()
    operations_0 = api_operations_0 = state.caller_posts_to_api(job="email", timing="run_at in 2 days")  # noqa: F841
    state.promise_kept()
    state.everything_drains()
    state.promise_kept()
    state.teardown()


def test_a_credit_made_before_a_crash_is_never_cancelled_afterwards(explorer: type[Explorer]) -> None:
    # Break 1 (it raised EffectAfterUnstartedEnd): cancel judged "not started" by the state (PAUSED) alone.
    # Written from the explorer's rules by hand: the explorer did not reach this history within the budget
    # it was given when this break was reported (see docs/fault-injection.md, "The explorer").
    # Given a credit whose holder crashes after the ledger applied it, before its terminal write
    state = explorer()
    operations_0 = state.producer_enqueues(job="money", timing="now")
    state.holder_crashes_after_effect()
    state.visible_work_drains()
    state.promise_kept()
    assert state.chaos.faults.counts[FaultKind.CRASH_AFTER_EFFECT.value] == 1  # the history is the one it names
    # When its kill switch is turned off, the message comes back, and an operator cancels it
    state.toggle_flips(job="money", on=False)
    state.everything_drains()
    state.promise_kept()
    state.operator_cancels(operation=operations_0)
    # Then it is not CANCELLED with the credit made (it is too late to cancel a started operation)
    state.promise_kept()
    state.teardown()


def test_the_targeted_score_climbs_to_started_work_that_reads_as_not_started(explorer: type[Explorer]) -> None:
    # The explorer's targeted score for the history above (promise.started_then_unstarted), step by step
    # Given a credit: not started yet
    state = explorer()
    operations_0 = state.producer_enqueues(job="money", timing="now")
    state.promise_kept()
    assert state.nearest == 0
    # When its holder crashes after the ledger applied it, and its lease lapses: started, its holder gone
    state.holder_crashes_after_effect()
    state.visible_work_drains()
    state.promise_kept()
    assert state.nearest == 1
    state.clock_advances(seconds=1000.0)
    state.promise_kept()
    assert state.nearest == 2
    # And its kill switch is off when the message comes back: PAUSED, started work that reads as not started
    state.toggle_flips(job="money", on=False)
    state.everything_drains()
    state.promise_kept()
    assert state.converge.operations.require(operations_0).state is OperationState.PAUSED
    assert state.nearest == promise.STARTED_READS_UNSTARTED
    state.teardown()


def test_a_producer_cannot_take_an_api_callers_operation(explorer: type[Explorer]) -> None:
    # Found by the explorer at length (ApiRefusedItsCaller) while its producer still wrote with every right: a
    # re-put naming another caller, before the relay read the request, left the real caller a 404 on its cancel.
    # A producer holds ProducerPolicy, which denies that put (break 5's fix): the history must show the refusal.
    # Given an operation the enqueue API admitted for its caller
    state = explorer()
    state.promise_kept()
    operations_0 = api_operations_0 = state.caller_posts_to_api(job="email", timing="now")
    state.promise_kept()
    # When a producer holding the template's ProducerPolicy re-puts it naming another caller
    state.producer_reputs_other_submitter(operation=operations_0)
    # Then IAM refuses the put (the policy denies an item naming submitted_by), and the caller still cancels it
    assert state.refused_puts == 1
    state.promise_kept()
    state.caller_cancels_through_api(operation=api_operations_0)
    state.teardown()


def test_a_cancel_before_the_relay_keeps_the_content_first_written(explorer: type[Explorer]) -> None:
    # Found by the explorer (RewriteMishandled: "runs other content than was first written"; shrunk by hand from
    # its history, whose other steps changed nothing): a cancel written before the relay read the request
    # recorded the fingerprint of a producer's rewrite as the operation's, and the conflict went unlisted.
    # Given a request, rewritten with other content before the relay read it
    state = explorer()
    operations_0 = state.producer_enqueues(job="email", timing="now")
    state.promise_kept()
    state.producer_reputs_other_content(operation=operations_0)
    state.promise_kept()
    # When it is cancelled (in the console) and everything is relayed
    state.console_cancels(operation=operations_0)
    state.promise_kept()
    # Then it is CANCELLED with the first content, the rewrite listed under CONFLICT (teardown checks both)
    state.teardown()


def test_a_rewrite_of_a_cancelled_request_whose_relay_batch_was_given_up_is_listed_conflict(
    explorer: type[Explorer], record_property: Any
) -> None:
    # Found by the explorer (RewriteMishandled: "other content written under its id, but not listed CONFLICT"),
    # shrunk as printed; it broke without any step of a job of steps. Traced: the reconciler's replay of the given-up
    # batch does record the rewrite (a cancel written before the relay read the request adopts no fingerprint, and
    # the replayed MODIFY records the first content as the operation's and the rewrite as a conflict); the break
    # was the explorer's quiescence, which ran no reconciler once every operation was final and nothing was in
    # flight, although a relay batch given up still waited for its replay. Now a history is quiescent only when
    # none waits (promise.relay_failures_kept), and the rewrite is listed under CONFLICT after the reconciler.
    # It then failed now and then in the parallel suite, whenever tests/explore/test_explore.py had run first in the
    # same process: the explorer kept the first deployment's ProducerPolicy, which names that cloud's jobs table, so
    # this module's rewrite was refused as IAM would refuse it, and never written. Each deployment's policy is now
    # kept by its ARN, and the history checks that its rewrite was written.
    # Given a request cancelled in the console and rewritten with other content, before the relay read either
    state = explorer()
    operations_0 = state.producer_enqueues(job="email", timing="now")
    state.promise_kept()
    state.console_cancels(operation=operations_0)
    state.promise_kept()
    state.producer_reputs_other_content(operation=operations_0)
    state.promise_kept()
    assert state.refused_puts == 0  # the history is the one it names: the rewrite was written
    # When the relay's batch fails until Lambda gives it up, and (at teardown) the reconciler replays it
    state.relay_batch_fails()
    state.promise_kept()
    assert promise.relay_failures_kept(state.cloud)  # the history is the one it names: the batch was given up
    queue = promise.relay_failure_queue(state.cloud)
    given_up = [json.loads(message.body) for message in list(queue._messages)]
    # Then the rewrite is listed under CONFLICT (teardown checks it), beside the cancel with the first content
    try:
        state.teardown()
        record = state.converge.operations.state.record(operations_0)
        assert record.state is OperationState.CANCELLED
        assert operations_0 in promise.listed_now(state.cloud)("CONFLICT")
    except AssertionError as exc:
        trace = (
            f"{replay_trace(state, operations_0)}\ngiven up (clock offset {state.cloud.clock.offset:.0f} s): "
            + str([(g["requestContext"]["condition"], g["timestamp"], g["DDBStreamBatchInfo"]) for g in given_up])
        )
        record_property("open break", f"{exc}\n{trace}")  # printed at the end of the run, xfail or not
        raise AssertionError(f"{exc}\n{trace}") from exc


def replay_trace(state: Explorer, operation_id: str) -> str:
    """What the reconciler's runs returned, what the relay's failure queue still holds, and the operation's record:
    the trace of an intermittent break, printed with its failure."""
    cloud = state.cloud
    runs = [
        f"{i.logical_id}: {i.result if i.error is None else repr(i.error)}"
        for i in cloud.runtime.invocations
        if i.logical_id.endswith(("ReconcilerFunction", "OutboxRelayFunction")) and (i.error or i.result)
    ]
    queue = promise.relay_failure_queue(cloud)
    waiting = [(m.body[:400], m.visible_at, m.receive_count) for m in (list(queue._messages) if queue else [])]
    record = state.converge.operations.state.record(operation_id)
    return "\n".join(
        [
            *runs[-6:],
            f"failure queue now (real ms {promise.now_ms()}): {waiting}",
            f"record: {record.state} conflicts={getattr(record, 'conflicts', None)} stuck={record.stuck_kind}",
        ]
    )[:6000]


def test_an_operation_waiting_between_steps_stays_listed_as_waiting_when_an_early_copy_is_dead_lettered(
    explorer: type[Explorer],
) -> None:
    # Found by the explorer (WaitingUnlisted, when it asked for the SCHEDULED listing alone), shrunk as printed.
    # A copy of the request delivered before its run_at is never started; it comes back until its receives are
    # exhausted and is dead-lettered. The operation runs at its time, reaches its two-day wait and waits,
    # SCHEDULED with its own schedule; the reconciler then found the early copy in the DLQ and listed the waiting
    # operation under STUCK ("redrive it"), no longer under SCHEDULED: `ops list --state SCHEDULED` and a bulk
    # cancel of SCHEDULED work no longer saw it waiting. Now a dead letter of an operation SCHEDULED for a time
    # still ahead is superseded by its own delivery: the reconciler deletes it, and the operation stays listed.
    # Given a job of steps a week ahead, and a replayed dispatch that delivers a copy at once (the history first
    # found had two days: since a hand-back lasts 11 h 40 min, as SQS allows, a copy needs more to spend its five
    # receives before its time)
    state = explorer()
    state.promise_kept()
    operations_0 = api_operations_0 = state.caller_posts_to_api(job="steps-long", timing="run_at in 1 week")  # noqa: F841
    state.promise_kept()
    state.dispatch_replayed(operation=operations_0)
    state.promise_kept()
    # When it runs at its time, waits, and the reconciler runs (teardown)
    state.teardown()
    # Then it waits listed under SCHEDULED with its time, and the early copy is no longer in the DLQ
    record = state.converge.operations.state.record(operations_0)
    assert record.state is OperationState.SCHEDULED and record.waiting == "cool-off"
    assert operations_0 in promise.listed_now(state.cloud)(OperationState.SCHEDULED)
    assert operations_0 not in promise.dead_lettered(state.cloud)


@pytest.mark.parametrize("then", ["reconciler_runs", "operator_redrives"])
def test_a_delayed_request_stays_listed_scheduled_when_an_early_copy_is_dead_lettered(
    explorer: type[Explorer], then: str
) -> None:
    # The same break before the run_at of a plain delayed request: the reconciler listed it STUCK ("redrive it"),
    # and a redrive sent the copy again (early again, bound for the DLQ again) and listed it STUCK "reopened".
    # Given an e-mail a week ahead, and a replayed dispatch that delivers a copy at once
    state = explorer()
    operations_0 = state.producer_enqueues(job="email", timing="run_at in 1 week")
    state.promise_kept()
    state.dispatch_replayed(operation=operations_0)
    # When the copy comes back until its receives are spent, before the run_at
    state.everything_drains()
    state.promise_kept()
    assert operations_0 in promise.dead_lettered(state.cloud)  # the history is the one it names
    # And the reconciler runs, or an operator redrives the DLQ
    getattr(state, then)()
    state.promise_kept()
    # Then the copy is deleted as superseded, and the operation stays listed under SCHEDULED with its time
    record = state.converge.operations.state.record(operations_0)
    assert (record.state, record.stuck_kind) == (OperationState.SCHEDULED, None)
    assert operations_0 in promise.listed_now(state.cloud)(OperationState.SCHEDULED)
    assert operations_0 not in promise.dead_lettered(state.cloud)
    # And at its run_at it runs, once (teardown checks the effects)
    state.teardown()
    assert state.converge.operations.state.record(operations_0).state is OperationState.SUCCEEDED


def test_a_long_wait_whose_schedule_cannot_be_created_is_delivered_or_listed(explorer: type[Explorer]) -> None:
    # Found by the explorer (LostScheduledAhead, then LostScheduledPastRunAt, in histories too long to shrink in
    # the time given; this is the history that explains both, written from its rules). A delivery that reached a
    # wait of two days recorded the operation SCHEDULED (waiting), then created the one-time schedule that resumes
    # it; with the schedule group missing, the creation failed and nothing marked the operation: listed under
    # SCHEDULED, with no schedule or message to deliver it, and no reconciler pass listed it STUCK before its time.
    # Now the worker lists it under STUCK (undispatched, with the error), and the reconciler sends the resumption
    # again on each run: once it is out, it is listed under SCHEDULED again, and it resumes at its time.
    # Given a job of steps relayed, and the schedule group deleted
    state = explorer()
    operations_0 = state.producer_enqueues(job="steps-long", timing="now")
    state.stream_polled_once()
    state.schedule_group_deleted()
    # When it runs to its two-day wait
    state.everything_drains()
    state.promise_kept()
    # Then it waits listed under STUCK, the reason naming the wait and the resumption not sent
    record = state.converge.operations.state.record(operations_0)
    assert (record.state, record.waiting, record.stuck_kind) == (OperationState.SCHEDULED, "cool-off", "undispatched")
    assert "its resumption could not be sent" in (record.stuck_reason or "")
    assert operations_0 not in promise.in_flight(state.cloud)
    # And a reconciler pass while the group is still missing keeps it listed so (nothing_invisible checks it)
    state.reconciler_runs()
    assert state.converge.operations.state.record(operations_0).stuck_kind == "undispatched"
    # When the group is back and the reconciler runs again
    state.schedule_group_recreated()
    state.reconciler_runs()
    # Then its resumption is a one-time schedule, and it is listed under SCHEDULED with its time, no longer STUCK
    record = state.converge.operations.state.record(operations_0)
    assert (record.state, record.stuck_kind) == (OperationState.SCHEDULED, None)
    assert operations_0 in promise.in_flight(state.cloud)
    assert operations_0 in promise.listed_now(state.cloud)(OperationState.SCHEDULED)
    # And at its time it resumes and settles, each step's effect once (teardown and steps_kept check them)
    state.teardown()
    assert state.converge.operations.state.record(operations_0).state is OperationState.SUCCEEDED


def test_a_batch_whose_children_wait_paused_at_quiescence_is_listed_with_the_reason(explorer: type[Explorer]) -> None:
    # A batch's break (it raised BatchWaitsSilently): the reconciler listed a batch for children UNKNOWN or STUCK,
    # not for children PAUSED by their job's kill switch, so a batch whose job was switched off waited unlisted
    # Given a batch of two credits whose job is switched off before they run
    # When everything drains and it is quiescent (the switch still off)
    # Then the batch is listed with the reason (and completes once the job is on)
    state = explorer()
    state.promise_kept()
    batches_0 = state.producer_admits_batch(crash=False, job="money", size=2)
    state.promise_kept()
    state.toggle_flips(job="money", on=False)
    state.promise_kept()
    state.everything_drains()
    state.promise_kept()
    state.teardown()
    listed = state.converge.require_batches().require(batches_0)
    assert "2 children PAUSED" in (listed.attention or "")


def test_a_rewrite_read_before_its_given_up_insert_does_not_become_the_first_content(
    explorer: type[Explorer],
) -> None:
    # Found by the explorer (RewriteMishandled: "runs other content than was first written"), shrunk by hand from
    # a history of 20 steps whose others changed nothing. The relay gave up the batch holding a request's INSERT
    # and its first rewrite (older than the relay's record age), and went on: it then read a second rewrite, whose
    # old image (the first rewrite) it took for the first content and pinned, as a conflict's original. The
    # reconciler's replay of the INSERT, later, met an operation pinned to a rewrite. Now a replayed INSERT restores
    # its content as the first (while nothing has started), and lists the content pinned by mistake as a conflict.
    # Given an e-mail written, then rewritten with another expiry before the relay read either
    state = explorer()
    operation = state.producer_puts_item(job="email", timing="expires in 1 hour")
    state.producer_reputs_other_options(operation=operation, timing="expires in 1 min")
    # And the relay, reading them an hour later, gives their batch up to its failure queue
    state.clock_advances(seconds=3700.0)
    state.stream_polled_once()
    assert promise.relay_failures_kept(state.cloud)
    # When the producer writes it a third time, and the relay reads that first
    state.producer_reputs_other_options(operation=operation, timing="expires in 1 hour")
    state.stream_polled_once()
    state.promise_kept()
    # And the reconciler replays the given-up batch
    state.reconciler_runs()
    state.promise_kept()
    # Then the operation holds its first content, with both rewrites listed under CONFLICT
    operation_now, _ = promise.operations_now(state.cloud)[operation]
    first = state._first_written(operation)
    assert operation_now.fingerprint in request_from_image(first).accepted_fingerprints
    assert operation in promise.invariants.attention_lister(state.cloud)("CONFLICT")
    assert len(operation_now.record.conflicts) >= 2
    state.teardown()
