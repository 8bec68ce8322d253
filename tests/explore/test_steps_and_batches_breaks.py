"""Six breaks in steps, waits, continuations and batches, each replayed as a history of the explorer's rules.

Each history is the shortest story that broke a promise, written with the explorer's own rules, so that the
promise is checked after every step as in an explored history (a regression raises the kind of break named in its
comment; tests/explore/breaks/ keeps the patch that brings each back). Each then counts the effects in the emulated
services (e-mails in SES, charges and records with the steps' provider) and reads the stored receipts.
"""

from __future__ import annotations

from typing import Any

from converge.model.batches import BatchState, callback_id
from converge.model.states import OperationState

from . import promise
from .catalogue import STEPS_JOB, WORLD
from .machine import FORGED_KEY, LONG_CLOCK_STEPS, Explorer

_S = OperationState
DAY = 86400.0


def states(state: Explorer) -> dict[str, OperationState]:
    operations = promise.operations_now(state.cloud)
    return {operation_id: operation.state for operation_id, (operation, _) in operations.items()}


def counted(state: Explorer, batch: str) -> dict[str, int]:
    """The batch's counts by final state (those not zero), once the batch counter has read the state table's stream
    (its stream source polled until it has nothing left)."""
    for source in state.cloud.stream_sources:
        if "BatchCounter" in source.mapping.function_id:
            while source.poll(flush=True).progressed:
                pass
    return {name: number for name, number in state.converge.require_batches().get(batch).counts.items() if number}


def receipt(state: Explorer, operation_id: str) -> Any:
    return state.converge.operations.with_steps(state.converge.operations.require(operation_id))


def unknown_child_resolved_and_waiting(state: Explorer) -> tuple[str, str, str]:
    """A batch of two children of the job of steps; the first's charge is made, its answer lost, and the provider
    cannot tell (UNKNOWN, counted so); an operator finds the charge and resolves it as succeeded: it is reopened,
    carries on, and waits between its steps. The other waits too."""
    state.charge_provider_cannot_tell()
    state.charge_answer_lost()
    batch = state.producer_admits_batch(job="steps", size=2, crash=False)
    first, second = state.admitted[batch].child_ids()
    state.visible_work_drains()
    state.promise_kept()
    assert states(state)[first] is _S.UNKNOWN and states(state)[second] is _S.SCHEDULED
    assert counted(state, batch) == {"UNKNOWN": 1}
    state.operator_resolves_child(batch=batch, which=0, if_not_done="retry")
    state.visible_work_drains()
    state.promise_kept()
    assert states(state)[first] is _S.SCHEDULED and receipt(state, first).state_record.reopened_from is _S.UNKNOWN
    return batch, first, second


def test_a_reopened_child_cancelled_while_it_waits_moves_its_count(explorer: type[Explorer]) -> None:
    # Break (BatchCountsWrong): the cancel's settle did not carry what a reopened child was counted as, so the batch
    # counted it UNKNOWN and CANCELLED, and listed "1 children UNKNOWN" when none was
    # Given a reopened child waiting between its steps
    state = explorer()
    batch, first, second = unknown_child_resolved_and_waiting(state)
    # When an operator cancels it while it waits
    state.operator_cancels_child(batch=batch, which=0)
    state.promise_kept()
    # Then its count moved from UNKNOWN to CANCELLED: one child counted, once
    assert states(state)[first] is _S.CANCELLED
    assert "while waiting at 'cool-off'" in receipt(state, first).history[-1].reason
    assert counted(state, batch) == {"CANCELLED": 1}
    state.teardown()
    # And once the other child ends, the callback runs once with both, and nothing was made twice
    table = state.converge.require_batches()
    assert table.get(batch).state is BatchState.COMPLETE and counted(state, batch) == {"CANCELLED": 1, "SUCCEEDED": 1}
    assert [run[0] for run in WORLD.callbacks] == [callback_id(batch)]
    assert WORLD.callbacks[0][1]["batch_cancelled"] == 1 and WORLD.callbacks[0][1]["batch_succeeded"] == 1
    emails = state.chaos.effects().emails
    assert (emails[first], emails[second], emails[callback_id(batch)]) == (1, 1, 1)
    assert WORLD.charges == {f"{first}:charge": 1, f"{second}:charge": 1}
    assert WORLD.records == {f"{second}:file": 1}


def test_a_batch_cancelled_while_a_reopened_child_waits_counts_each_child_once(explorer: type[Explorer]) -> None:
    # Break (BatchCountsWrong): through `converge batches cancel`, the reopened child was counted twice as well
    # Given a reopened child waiting between its steps, and another child waiting
    state = explorer()
    batch, first, second = unknown_child_resolved_and_waiting(state)
    # When an operator cancels the batch
    state.operator_cancels_batch(batch=batch)
    state.promise_kept()
    # Then both waiting children are CANCELLED, each counted once, and the callback follows with two cancelled
    assert (states(state)[first], states(state)[second]) == (_S.CANCELLED, _S.CANCELLED)
    table = state.converge.require_batches()
    assert counted(state, batch) == {"CANCELLED": 2} and table.get(batch).state is BatchState.COMPLETE
    state.teardown()
    assert [(run[0], run[1]["batch_cancelled"], run[1]["batch_total"]) for run in WORLD.callbacks] == [
        (callback_id(batch), 2, 2)
    ]
    assert not WORLD.records  # no step after the wait ran


def test_a_producers_writes_under_a_batchs_ids_are_refused_and_count_nothing(explorer: type[Explorer]) -> None:
    # Break (BatchCountsWrong, BatchCallbackWrong): a producer's PutItem of `<batch>::0:zz` was run, counted, and
    # completed the batch early; one of `<batch>::callback` ran as its callback before any child was final
    # Given a batch of two e-mail children, PAUSED (their job switched off)
    state = explorer()
    state.toggle_flips(job="email", on=False)
    batch = state.producer_admits_batch(job="email", size=2, crash=False)
    state.everything_drains()
    state.promise_kept()
    children = state.admitted[batch].child_ids()
    assert {states(state)[child] for child in children} == {_S.PAUSED}
    # When a producer holding ProducerPolicy writes under the batch's ids: a child it lacks and the callback, each
    # with a PutItem and a BatchWriteItem
    for form in ("child", "callback"):
        for via in ("put_item", "batch_write"):
            state.producer_writes_under_batch_id(batch=batch, form=form, via=via)
            state.everything_drains()
            state.promise_kept()
    # Then IAM refuses three (a plain put under "::", any write of a callback); the child written by BatchWriteItem
    # is REJECTED by the relay, says why, and is counted on no batch; no callback exists, nothing was sent
    assert state.refused_puts == 3
    forged = f"{batch}::0:{FORGED_KEY}"
    assert states(state)[forged] is _S.REJECTED
    assert f"admitted no child {FORGED_KEY!r}" in receipt(state, forged).history[-1].reason
    assert callback_id(batch) not in states(state)
    table = state.converge.require_batches()
    assert counted(state, batch) == {} and table.get(batch).state is BatchState.OPEN
    assert sum(state.chaos.effects().emails.values()) == 0
    # And once the job is on again, the two children run and the callback comes once, counting them alone
    state.toggle_flips(job="email", on=True)
    state.resumer_runs()
    state.teardown()
    assert counted(state, batch) == {"SUCCEEDED": 2}
    assert [run[1]["batch_total"] for run in WORLD.callbacks] == [2]


def test_an_early_copy_while_the_job_is_off_leaves_the_wait_scheduled(explorer: type[Explorer]) -> None:
    # Break (WokenBeforeItsTime): a copy of a waiting operation's message, arriving early while its job was off,
    # paused it (the pause ignored the wake time); the resumer made it ACCEPTED days early, listed nowhere, and a
    # cancel then answered "too late"
    # Given a job of steps waiting two days after its charge, and its job switched off
    state = explorer()
    operation = state.producer_enqueues(job="steps-long", timing="now")
    state.everything_drains()
    state.promise_kept()
    waited_until = receipt(state, operation).state_record.run_at
    state.toggle_flips(job="steps-long", on=False)
    # When a copy of its message arrives early (a replayed dispatch), and the resumer runs
    state.dispatch_replayed(operation=operation)
    state.visible_work_drains()
    state.promise_kept()
    state.resumer_runs()
    state.promise_kept()
    # Then it still waits, SCHEDULED for its time and listed so
    record = receipt(state, operation).state_record
    assert (record.state, record.run_at, record.waiting) == (_S.SCHEDULED, waited_until, "cool-off")
    listed = state.converge.operations.listings.list_attention(_S.SCHEDULED, None, 100).operations
    assert operation in {row["operation_id"] for row in listed}
    # And once the job is on and its time comes, it carries on once
    state.toggle_flips(job="steps-long", on=True)
    state.teardown()
    assert states(state)[operation] is _S.SUCCEEDED
    assert state.chaos.effects().emails[operation] == 1
    assert WORLD.charges == {f"{operation}:charge": 1} and WORLD.records == {f"{operation}:file": 1}


def test_an_early_copy_during_an_incident_switches_its_job_off_and_meets_the_switch_before_its_time(
    explorer: type[Explorer],
) -> None:
    # The same break, reached by the explorer's one rule: a copy during an incident switches the job off first
    # Given a job of steps waiting two days after its charge, its job on
    state = explorer()
    operation = state.producer_enqueues(job="steps-long", timing="now")
    state.everything_drains()
    state.promise_kept()
    waited_until = receipt(state, operation).state_record.run_at
    # When a copy of its message arrives early during an incident, and what is visible is delivered
    state.early_copy_while_waiting(operation=operation, during_an_incident=True)
    state.visible_work_drains()
    state.promise_kept()
    # Then its job is switched off, and the wait is as it was: SCHEDULED for its time, no step run again
    assert state.switched_off == {STEPS_JOB}
    record = receipt(state, operation).state_record
    assert (record.state, record.run_at, record.waiting) == (_S.SCHEDULED, waited_until, "cool-off")
    assert WORLD.charges == {f"{operation}:charge": 1} and not WORLD.records
    state.toggle_flips(job="steps-long", on=True)
    state.teardown()
    assert states(state)[operation] is _S.SUCCEEDED


def test_a_years_wait_then_a_long_pause_keeps_every_steps_marker(explorer: type[Explorer]) -> None:
    # Break (StepEffectTwice, EmailsOutOfBounds): step markers expired 400 days after their writing (DynamoDB's time to
    # live), so after a 364-day wait and 40 days PAUSED the run repeated its notice and its charge
    # Given a job of steps waiting nearly a year after its charge, and its job switched off
    state = explorer()
    operation = state.producer_enqueues(job="steps-year", timing="now")
    state.everything_drains()
    state.promise_kept()
    written = {step.name: step.at for step in receipt(state, operation).steps}
    state.toggle_flips(job="steps-year", on=False)
    # When the year passes (its resumption arrives and is paused), and then 40 more days
    state.months_pass(seconds=LONG_CLOCK_STEPS[2])
    state.everything_drains()
    state.promise_kept()
    assert states(state)[operation] is _S.PAUSED
    state.months_pass(seconds=LONG_CLOCK_STEPS[0])
    state.promise_kept()
    # And its job is on again
    state.toggle_flips(job="steps-year", on=True)
    state.resumer_runs()
    state.everything_drains()
    state.promise_kept()
    state.teardown()
    # Then it carried on after the wait, on the markers written a year and more before (the local cloud deletes
    # what a time to live has passed): one notice, one charge, one record, and its continuation
    steps = receipt(state, operation).steps
    assert {step.name: step.at for step in steps if step.name in written} == written
    assert [step.name for step in steps] == ["notice", "charge", "cool-off", "file"]
    assert states(state)[operation] is _S.SUCCEEDED
    assert state.chaos.effects().emails[operation] == 1
    assert WORLD.charges == {f"{operation}:charge": 1} and WORLD.records == {f"{operation}:file": 1}
    assert states(state)[f"{operation}:next"] is _S.SUCCEEDED


def unknown_at_its_charge(explorer: type[Explorer]) -> tuple[Explorer, str]:
    """A history whose job of steps is UNKNOWN at its charge: made, its answer lost, the provider unable to tell."""
    state = explorer()
    state.charge_provider_cannot_tell()
    state.charge_answer_lost()
    operation = state.producer_enqueues(job="steps", timing="now")
    state.everything_drains()
    state.promise_kept()
    assert states(state)[operation] is _S.UNKNOWN
    return state, operation


def test_a_refused_resolve_leaves_the_step_as_it_was(explorer: type[Explorer]) -> None:
    # Break (RefusedActionChangedSomething, then StepEffectLost): a resolve refused for want of the request still
    # moved the step's marker to done; the same resolve again found no pending step and settled the whole operation
    # SUCCEEDED, its last step never run
    # Given a job of steps UNKNOWN at its charge (made, its answer lost, the provider unable to tell)
    state, operation = unknown_at_its_charge(explorer)
    # And its request item deleted
    state.request_item_deleted(operation=operation)
    state.promise_kept()
    # When an operator resolves it as succeeded, twice
    for _ in range(2):
        state.operator_resolves_pending_step(operation=operation, if_not_done="retry")
        state.everything_drains()
        state.promise_kept()
    # Then each is refused and changes nothing: UNKNOWN, its charge still claimed, nothing after it run
    found = receipt(state, operation)
    assert found.state is _S.UNKNOWN
    assert [(step.name, step.state.value) for step in found.steps] == [("notice", "done"), ("charge", "claimed")]
    assert not any("resolved" in entry.reason for entry in found.history)
    state.teardown()
    assert state.chaos.effects().emails[operation] == 1
    assert WORLD.charges == {f"{operation}:charge": 1} and not WORLD.records
    assert f"{operation}:next" not in states(state)


def test_a_resolve_that_finds_the_request_gone_is_refused_in_one_rule(explorer: type[Explorer]) -> None:
    # The same break, reached by the explorer's one rule: an operator who comes to the step after the producer's
    # clean-up deleted its request
    # Given a job of steps UNKNOWN at its charge (made, its answer lost, the provider unable to tell)
    state, operation = unknown_at_its_charge(explorer)
    # When an operator resolves it as succeeded, its request gone by then
    state.operator_resolves_pending_step(operation=operation, if_not_done="retry", request_gone=True)
    state.everything_drains()
    state.promise_kept()
    # Then the request item is gone, the resolve refused, and nothing changed: UNKNOWN, its charge still claimed
    assert state._stored(operation) is None
    found = receipt(state, operation)
    assert found.state is _S.UNKNOWN
    assert [(step.name, step.state.value) for step in found.steps] == [("notice", "done"), ("charge", "claimed")]
    state.teardown()
    assert WORLD.charges == {f"{operation}:charge": 1} and not WORLD.records


def test_a_resolve_outside_the_project_is_refused_and_inside_writes_the_continuation(explorer: type[Explorer]) -> None:
    # Break (ContinuationBroken): resolved as succeeded from a directory without the project (no catalogue loaded),
    # an UNKNOWN credit SUCCEEDED without the continuation its binding names (the partner's notice), and nothing said so
    # Given a credit whose ledger answer is lost, from a ledger that can neither deduplicate nor be asked: UNKNOWN
    state = explorer()
    state.ledger_provider_misbehaves()
    state.effect_response_lost()
    operation = state.producer_enqueues(job="money", timing="now")
    state.everything_drains()
    state.promise_kept()
    assert states(state)[operation] is _S.UNKNOWN
    # When an operator resolves it (as succeeded: the ledger has the credit) from outside the project, and retries it
    state.operator_acts_outside_the_project(operation=operation, action="resolve")
    state.operator_acts_outside_the_project(operation=operation, action="retry")
    state.everything_drains()
    state.promise_kept()
    # Then both are refused, saying why, and nothing changed
    assert states(state)[operation] is _S.UNKNOWN and f"{operation}:next" not in states(state)
    refused = state._elsewhere().resolve(operation, "succeeded", "once more, to read the answer")
    assert not refused.applied and "not in the job catalogue loaded here" in refused.message
    # When it is resolved from inside the project / Then it SUCCEEDED, and the partner's notice follows once
    state.operator_resolves(operation=operation, if_not_done="failed")
    state.everything_drains()
    state.promise_kept()
    state.teardown()
    assert states(state)[operation] is _S.SUCCEEDED and states(state)[f"{operation}:next"] is _S.SUCCEEDED
    counted_effects = state.chaos.effects()
    assert sum(counted_effects.for_operation(operation).values()) == 1  # the one credit in the ledger
    assert counted_effects.emails[f"{operation}:next"] == 1
    assert "resolved as succeeded by explorer:operator" in receipt(state, operation).history[-1].reason
