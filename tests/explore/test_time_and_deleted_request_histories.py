"""Histories the explorer broke on its own rules, replayed: weeks passing, and a request item deleted.

The explorer's `months_pass` once moved the clock by weeks in one jump, with nothing run meanwhile. SQS then dropped
what had waited longer than its queue keeps a message (14 days), which AWS never lets happen while its event
sources poll and its schedules fire: a relay batch given up to the failure queue was gone before any reconciler
run could replay it (LostAccepted), and a batch's children sent to their queue were gone before any worker took
them (BatchWaitsSilently). Weeks now pass in steps shorter than that, with the sources and the schedules run
between them (tests/explore/machine.py). And the rules that cancel expected a cancel of an operation whose request
item was deleted to be applied: the console answers "no operation" while neither table holds it, and the API,
which knows an operation's caller from its request alone, answers 404 once the item is gone.

Each history is written with the explorer's rules, the promise checked after every step, then the effects counted
in the emulated services and the receipts read.
"""

from __future__ import annotations

import json

import pytest

from converge.model.batches import BatchState, callback_id
from converge.model.errors import OperationNotFound
from converge.model.states import OperationState

from . import promise
from .catalogue import WORLD
from .machine import API_CALLER, LONG_CLOCK_STEPS, Explorer, months_step, signed_by

_S = OperationState
DAY = 86400.0


def states(state: Explorer) -> dict[str, OperationState]:
    operations = promise.operations_now(state.cloud)
    return {operation_id: operation.state for operation_id, (operation, _) in operations.items()}


def test_weeks_pass_in_steps_shorter_than_a_queue_keeps_a_message(explorer: type[Explorer]) -> None:
    # Given the template's queues, the shortest keeping a message 14 days
    # Then the explorer's weeks pass in equal steps a day shorter: 40 days in four
    assert months_step() == 13 * DAY
    state = explorer()
    moves: list[float] = []
    advance = state.cloud.advance
    state.cloud.advance = lambda seconds: (moves.append(seconds), advance(seconds))[1]
    try:
        state.months_pass(seconds=LONG_CLOCK_STEPS[0])
    finally:
        del state.cloud.advance
    assert moves == [pytest.approx(10 * DAY, abs=60)] * 4  # (the emulated clock runs on real time between moves)


def test_a_relay_batch_given_up_is_replayed_while_weeks_pass(explorer: type[Explorer]) -> None:
    # Break (LostAccepted): 40 days passed in one jump; the failure queue dropped the given-up relay batch after 14,
    # with no reconciler run meanwhile, and the e-mail waited ACCEPTED, listed nowhere
    # Given an e-mail whose relay batch failed until Lambda gave it up (to the relay's failure queue)
    state = explorer()
    operation = state.producer_enqueues(job="email", timing="now")
    state.promise_kept()
    state.relay_batch_fails()
    state.promise_kept()
    assert promise.relay_failures_kept(state.cloud) and state._footprint(operation)["state"] is None
    # When 40 days pass
    state.months_pass(seconds=LONG_CLOCK_STEPS[0])
    state.promise_kept()
    # Then the reconciler's first run replayed it, and it was sent once
    assert states(state)[operation] is _S.SUCCEEDED
    assert not promise.relay_failures_kept(state.cloud)
    assert state.chaos.effects().emails[operation] == 1
    state.teardown()
    assert state.chaos.effects().emails[operation] == 1


def test_a_batchs_children_in_their_queue_are_taken_while_weeks_pass(explorer: type[Explorer]) -> None:
    # Break (BatchWaitsSilently): 40 days passed in one jump with five children's messages in their queue; SQS
    # dropped them after 14 days, and the batch waited with its children ACCEPTED, unlisted
    # Given a batch of five uploads posted to the API and a credit that expires in a minute, all relayed to their
    # queues
    state = explorer()
    batch = state.caller_posts_batch_to_api(job="upload", size=5)
    state.promise_kept()
    credit = state.producer_enqueues(job="money", timing="expires in 1 min")
    state.promise_kept()
    state.stream_polled_once()
    state.promise_kept()
    children = state.admitted[batch].child_ids()
    assert {states(state)[child] for child in children} == {_S.ACCEPTED}
    # When 40 days pass
    state.months_pass(seconds=40 * DAY)
    state.promise_kept()
    # Then the workers took every message before its queue dropped it (at once: the credit within its minute), the
    # uploads and the credit ran once each, and the batch completed with its callback
    assert {states(state)[child] for child in children} == {_S.SUCCEEDED}
    assert states(state)[credit] is _S.SUCCEEDED
    assert state.converge.require_batches().get(batch).state is BatchState.COMPLETE
    assert [run[0] for run in WORLD.callbacks] == [callback_id(batch)]
    assert all(sum(state.chaos.effects().for_operation(child).values()) == 1 for child in children)
    assert sum(state.chaos.effects().for_operation(credit).values()) == 1
    state.teardown()


def test_a_console_cancel_before_a_deleted_request_is_recorded_finds_no_operation(explorer: type[Explorer]) -> None:
    # Break (the rule's): the console's cancel was required to answer with the action's result, but neither table
    # holds an operation whose request item was deleted before the relay recorded it
    # Given an API caller's e-mail whose request item is deleted before the relay reads the stream
    state = explorer()
    operation = state.caller_posts_to_api(job="email", timing="expires in 1 hour")
    state.promise_kept()
    state.request_item_deleted(operation=operation)
    state.promise_kept()
    assert state.converge.operations.get(operation) is None
    # When an operator cancels it in the console (the rule checks the answer: "no operation", 404)
    state.console_cancels(operation=operation)
    state.promise_kept()
    # Then nothing was written, and the relay's copy of the request still runs it, once
    assert state.converge.operations.get(operation) is None
    state.everything_drains()
    state.promise_kept()
    assert states(state)[operation] is _S.SUCCEEDED
    assert state.chaos.effects().emails[operation] == 1
    # And once recorded, the console's cancel answers with the action's result (too late: it has run)
    state.console_cancels(operation=operation)
    state.teardown()


def test_the_api_cannot_tell_its_caller_once_the_request_item_is_deleted(explorer: type[Explorer]) -> None:
    # Break (the rule's ApiRefusedItsCaller): the caller's cancel was required to be applied or too late, but the
    # API knows an operation's caller from its request item alone
    # Given an API caller's e-mail two days ahead, recorded SCHEDULED, whose request item is then deleted
    state = explorer()
    operation = state.caller_posts_to_api(job="email", timing="run_at in 2 days")
    state.stream_polled_once()
    state.promise_kept()
    assert states(state)[operation] is _S.SCHEDULED
    state.request_item_deleted(operation=operation)
    state.promise_kept()
    # When the caller cancels it through the API (the rule checks the answer: 404)
    state.caller_cancels_through_api(operation=operation)
    state.promise_kept()
    answer = state.cloud.http(
        "POST", f"/operations/{operation}/cancel", headers=signed_by(API_CALLER), body=json.dumps({"reason": "again"})
    )
    # Then the API answered as for an operation not this caller's, and nothing changed
    assert (answer.status, json.loads(answer.body)["error"]) == (404, "not_found")
    assert states(state)[operation] is _S.SCHEDULED
    # And an operator's cancel in the console still cancels it: nothing is sent
    state.console_cancels(operation=operation)
    state.promise_kept()
    assert states(state)[operation] is _S.CANCELLED
    state.teardown()
    assert state.chaos.effects().emails[operation] == 0


def test_a_batch_whose_first_child_keeps_crashing_completes_while_weeks_pass(explorer: type[Explorer]) -> None:
    # Break (BatchWaitsSilently): between the steps of weeks only what was visible was taken, so a crashed worker
    # batch's messages came back days apart; their receives spread over weeks, they reached their DLQ older than
    # it keeps a message (a dead letter keeps its first enqueue time), and the batch waited, unlisted
    # Given a batch of three children of the job of steps, whose first crashes again and again (and whose charges'
    # answers are lost, with a provider that cannot tell)
    state = explorer()
    state.crash_between_steps()
    state.charge_provider_cannot_tell()
    state.crash_before_claimed_charge()
    state.crash_between_effect_and_marker(step="notice")
    batch = state.caller_posts_batch_to_api(job="steps", size=3)
    state.crash_between_effect_and_marker(step="file")
    for _ in range(6):
        state.charge_answer_lost()
    state.promise_kept()
    # When 40 days pass
    state.months_pass(seconds=LONG_CLOCK_STEPS[0])
    state.promise_kept()
    # Then every child ran to its charge (the first's claimed, then its process died; the others' made once, their
    # answers lost): each UNKNOWN, its on-failure continuation run, and the batch open and listed with the reason
    # (no message waited unread past its queue's retention)
    state.teardown()
    children = state.admitted[batch].child_ids()
    assert {states(state)[child] for child in children} == {_S.UNKNOWN}
    assert {states(state)[f"{child}:on-failure"] for child in children} == {_S.SUCCEEDED}
    assert WORLD.charges == {f"{child}:charge": 1 for child in children[1:]}
    # (the first's notice twice: its process died after the e-mail, before the step's marker)
    assert [state.chaos.effects().emails[child] for child in children] == [2, 1, 1]
    found = state.converge.require_batches().get(batch)
    assert found.state is BatchState.OPEN and found.listed == (
        "3 children UNKNOWN: resolve them (converge ops resolve), the callback follows"
    )


def test_an_operators_action_before_a_deleted_request_is_recorded_finds_no_operation(
    explorer: type[Explorer],
) -> None:
    # Break (the rule's): an operator's retry raised OperationNotFound out of the explorer's rule, for an operation
    # neither table held: its request item deleted before the relay recorded it
    # Given an e-mail whose request item is deleted before the relay reads the stream
    state = explorer()
    operation = state.producer_enqueues(job="email", timing="now")
    state.request_item_deleted(operation=operation)
    state.promise_kept()
    # When an operator retries it, resolves it, cancels it (the rule takes "no operation" as the answer)
    state.operator_retries(operation=operation)
    state.operator_resolves(operation=operation, if_not_done="retry")
    state.operator_cancels(operation=operation)
    state.promise_kept()
    with pytest.raises(OperationNotFound, match="no operation"):
        state.operator.retry(operation, "the provider is back")
    # Then nothing was written, and the relay's copy of the request still runs it, once
    assert state._footprint(operation) == {"state": None}
    state.everything_drains()
    state.teardown()
    assert states(state)[operation] is _S.SUCCEEDED
    assert state.chaos.effects().emails[operation] == 1


def test_a_wait_whose_schedule_went_with_its_group_is_sent_again_once_overdue(explorer: type[Explorer]) -> None:
    # Break (ScheduleLostWithGroup): quiescence moved the clock just past every wait, not past the reconciler's
    # overdue grace, so a wait whose one-time schedule was deleted with its group read as lost though its deadline
    # to be sent again had not come
    # Given a job of steps waiting two days on a one-time schedule, whose schedule group is then deleted
    state = explorer()
    operation = state.producer_enqueues(job="steps-long", timing="now")
    state.everything_drains()
    state.promise_kept()
    assert states(state)[operation] is _S.SCHEDULED
    state.schedule_group_deleted()
    state.promise_kept()
    # When the history ends (quiescence: the group back, the clock past the wait and the overdue grace)
    state.teardown()
    # Then the reconciler sent it again: it ran its last step once, and its continuation followed
    assert states(state)[operation] is _S.SUCCEEDED
    assert WORLD.charges == {f"{operation}:charge": 1} and WORLD.records == {f"{operation}:file": 1}
    assert states(state)[f"{operation}:next"] is _S.SUCCEEDED


@pytest.mark.parametrize(("job", "timing"), [("email", "run_at in 2 days"), ("steps-long", "now")])
def test_a_reconciler_run_before_the_deadline_of_a_schedule_gone_with_its_group_waits_for_it(
    explorer: type[Explorer], job: str, timing: str
) -> None:
    # Break (ScheduleLostWithGroup): a reconciler run in the middle of a history, right after the schedule group
    # was deleted, read a SCHEDULED operation whose run_at was two days ahead as lost, though it stays in the
    # schedule index, which the reconciler's overdue pass reads once its run_at and the grace have passed
    # Given a delayed job (or a job of steps waiting two days) on a one-time schedule, its group then deleted
    state = explorer()
    operation = state.producer_enqueues(job=job, timing=timing)
    state.visible_work_drains()
    assert states(state)[operation] is _S.SCHEDULED
    state.schedule_group_deleted()
    # When the reconciler runs before the operation is overdue (the promise is checked as it runs)
    state.reconciler_runs()
    # Then the operation is left SCHEDULED, in the index the overdue pass reads, and nothing delivers it yet
    assert operation in promise.invariants.attention_lister(state.cloud)(_S.SCHEDULED)
    assert operation not in promise.in_flight(state.cloud)
    # When the clock passes its run_at and the reconciler's grace, and the reconciler runs again
    state.clock_advances(seconds=2 * DAY + 60.0)
    state.clock_advances(seconds=3700.0)
    state.reconciler_runs()
    # Then it was sent again and listed STUCK as overdue until a worker takes it
    assert operation in promise.in_flight(state.cloud)
    assert operation in promise.invariants.attention_lister(state.cloud)("STUCK")
    # And the history ends with its effects made once
    state.schedule_group_recreated()
    state.everything_drains()
    state.teardown()
    assert states(state)[operation] is _S.SUCCEEDED
    effects = state.chaos.effects()
    assert (effects.emails[operation] == 1) if job == "email" else (WORLD.charges == {f"{operation}:charge": 1})


def test_quiescence_past_a_years_wait_replays_a_relay_batch_given_up_meanwhile(explorer: type[Explorer]) -> None:
    # Break (BatchWaitsSilently): quiescence moved the clock past a year's wait in one jump, and the failure queue
    # dropped the relay batch given up just before (its records older than the relay's record age): a batch's
    # children waited ACCEPTED, unrecorded, unlisted
    # Given a job of steps whose first step is due in five minutes and a batch that ran, all drained
    state = explorer()
    state.producer_batch_writes(first=("steps-year", "run_at in 5 min"), second=("email", "run_at in 5 min"))
    state.producer_admits_batch(crash=False, job="steps", size=5)
    state.everything_drains()
    # And a second batch whose stream records are older than the relay takes (an hour) when it first reads them
    batch = state.producer_admits_batch(crash=False, job="steps", size=2)
    state.clock_advances(seconds=3700.0)
    state.promise_kept()
    # When the history ends (quiescence: the reconciler runs, then the clock moves past the year's wait)
    state.teardown()
    # Then the relay batch given up was replayed: the batch completed, its callback ran once
    assert state.converge.require_batches().get(batch).state is BatchState.COMPLETE
    assert {states(state)[child] for child in state.admitted[batch].child_ids()} == {_S.SUCCEEDED}
    assert [run[0] for run in WORLD.callbacks].count(callback_id(batch)) == 1
    assert not promise.relay_failures_kept(state.cloud)
