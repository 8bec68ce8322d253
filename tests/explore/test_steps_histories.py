"""The explorer's rules for steps, waits and continuations, played by hand: what each does, and that the
invariants they are checked against catch a break (a doubled charge, a missing continuation).

The job of steps is tests/explore/catalogue.py's: notice (an e-mail, effect_then_claim), charge
(claim_then_effect), a wait, file (keyed_effect); `<id>:next` follows it on success, `<id>:on-failure` on
failure or UNKNOWN.
"""

from __future__ import annotations

import pytest

from converge.model.states import OperationState

from . import promise
from .catalogue import STEPS_TYPES, WORLD
from .machine import Explorer

_S = OperationState


def states(state: Explorer) -> dict[str, OperationState]:
    return {
        operation_id: operation.state for operation_id, (operation, _) in promise.operations_now(state.cloud).items()
    }


def test_a_crash_between_a_steps_effect_and_its_marker_repeats_nothing_claimed_and_the_next_job_runs_once(
    explorer: type[Explorer],
) -> None:
    # Given a job of steps, and the next step's effect followed by a crash before its marker
    state = explorer()
    operation = state.producer_enqueues(job="steps", timing="now")
    state.crash_between_effect_and_marker(step="notice")
    state.promise_kept()
    # When it is delivered (the notice is sent, then the process dies), retried, waits, and resumes
    state.visible_work_drains()
    state.promise_kept()
    assert states(state)[operation] is _S.IN_PROGRESS
    state.everything_drains()
    state.promise_kept()
    state.teardown()
    # Then it SUCCEEDED: the notice twice (the crash was in its window), the charge and the record once,
    # and its continuation exists once and ran (one e-mail)
    assert states(state)[operation] is _S.SUCCEEDED
    assert state.chaos.effects().emails[operation] == 2
    assert WORLD.charges == {f"{operation}:charge": 1} and WORLD.records == {f"{operation}:file": 1}
    assert states(state)[f"{operation}:next"] is _S.SUCCEEDED
    assert state.chaos.effects().emails[f"{operation}:next"] == 1
    assert f"{operation}:on-failure" not in states(state)


def test_a_cancel_while_waiting_runs_no_later_step_and_starts_nothing(explorer: type[Explorer]) -> None:
    # Given a job of steps waiting two days after its charge (on a one-time schedule)
    state = explorer()
    operation = state.producer_enqueues(job="steps-long", timing="now")
    state.everything_drains()
    state.promise_kept()
    assert states(state)[operation] is _S.SCHEDULED
    # When an operator cancels it while it waits, and the clock passes the wait
    state.operator_cancels_while_waiting(operation=operation)
    state.promise_kept()
    state.clock_advances(seconds=2 * 86400.0 + 60)
    state.everything_drains()
    state.promise_kept()
    state.teardown()
    # Then it is CANCELLED, charged once, never filed, and no continuation was written
    assert states(state)[operation] is _S.CANCELLED
    assert WORLD.charges == {f"{operation}:charge": 1} and not WORLD.records
    assert set(states(state)) == {operation}


def test_an_early_copy_while_waiting_runs_nothing_and_leaves_the_wait_as_it_was(explorer: type[Explorer]) -> None:
    # Given a job of steps waiting two days after its charge
    state = explorer()
    operation = state.producer_enqueues(job="steps-long", timing="now")
    state.everything_drains()
    record = promise.operations_now(state.cloud)[operation][0].record
    assert states(state)[operation] is _S.SCHEDULED and record is not None and record.waiting
    # When a copy of its request arrives days early, and what is visible is delivered
    state.early_copy_while_waiting(operation=operation)
    state.visible_work_drains()
    state.promise_kept()
    # Then it still waits for the same time, and no step ran again
    again = promise.operations_now(state.cloud)[operation][0].record
    assert states(state)[operation] is _S.SCHEDULED and again is not None and again.run_at == record.run_at
    assert WORLD.charges == {f"{operation}:charge": 1} and not WORLD.records
    # When the wait ends, Then it files once
    state.clock_advances(seconds=2 * 86400.0 + 60)
    state.everything_drains()
    state.promise_kept()
    state.teardown()
    assert states(state)[operation] is _S.SUCCEEDED and WORLD.records == {f"{operation}:file": 1}


def test_an_unknown_charge_resolved_as_made_carries_on_after_it(explorer: type[Explorer]) -> None:
    # Given a provider that cannot tell what it did, a job of steps, and a crash after its notice
    state = explorer()
    state.charge_provider_cannot_tell()
    other = state.producer_enqueues(job="steps", timing="now")
    state.crash_between_steps()
    state.visible_work_drains()
    state.promise_kept()
    # And on the retry (the notice skipped), a crash after the charge, before its marker
    state.crash_between_effect_and_marker(step="charge")
    state.everything_drains()
    state.promise_kept()
    # When the retry finds the claim and the provider cannot say: UNKNOWN, naming the charge, on-failure written
    assert states(state)[other] is _S.UNKNOWN
    assert "charge" in state.converge.operations.require(other).history[-1].reason
    assert f"{other}:on-failure" in states(state)
    # And the operator, finding the charge in the provider, resolves it as succeeded
    state.operator_resolves_pending_step(operation=other, if_not_done="failed")
    state.everything_drains()
    state.promise_kept()
    state.teardown()
    # Then it carried on after the charge (charged once, filed) and SUCCEEDED, followed by its next job too
    assert states(state)[other] is _S.SUCCEEDED
    assert state.chaos.effects().emails[other] == 1
    assert WORLD.charges[f"{other}:charge"] == 1 and WORLD.records[f"{other}:file"] == 1
    assert states(state)[f"{other}:next"] is _S.SUCCEEDED


def test_an_unknown_claim_never_charged_resolved_as_failed_runs_nothing_after_and_is_followed_on_failure(
    explorer: type[Explorer],
) -> None:
    # Given a provider that cannot tell what it did, and a crash after the charge's claim, before the charge
    state = explorer()
    state.charge_provider_cannot_tell()
    state.crash_before_claimed_charge()
    operation = state.producer_enqueues(job="steps", timing="now")
    # When it is delivered and retried: the claim is found, and the provider cannot say
    state.everything_drains()
    state.promise_kept()
    assert states(state)[operation] is _S.UNKNOWN
    # And the operator, finding no charge in the provider, resolves it as failed
    state.operator_resolves_pending_step(operation=operation, if_not_done="failed")
    state.everything_drains()
    state.promise_kept()
    state.teardown()
    # Then it is FAILED, never charged nor filed; its on-failure continuation ran once, and no next
    assert states(state)[operation] is _S.FAILED
    assert not WORLD.charges and not WORLD.records
    assert states(state)[f"{operation}:on-failure"] is _S.SUCCEEDED
    assert state.chaos.effects().emails[f"{operation}:on-failure"] == 1
    assert f"{operation}:next" not in states(state)


def test_the_invariants_catch_a_doubled_charge_and_a_missing_continuation(
    explorer: type[Explorer], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(promise, "NOTICE", [])  # the breaks made here are not the explorer's findings
    # Given a job of steps that SUCCEEDED
    state = explorer()
    operation = state.producer_enqueues(job="steps", timing="now")
    state.everything_drains()
    state.teardown()
    assert states(state)[operation] is _S.SUCCEEDED
    check = lambda: promise.steps_kept(state.cloud, state.chaos.faults, WORLD, STEPS_TYPES, {})  # noqa: E731
    check()
    # When its charge is counted twice / Then StepEffectTwice
    WORLD.charges[f"{operation}:charge"] += 1
    with pytest.raises(promise.StepEffectTwice):
        check()
    WORLD.charges[f"{operation}:charge"] -= 1
    # When its continuation's request is gone / Then ContinuationBroken
    state.cloud.client("dynamodb").delete_item(
        TableName=state.cloud.outputs["JobsTableName"], Key={"operation_id": {"S": f"{operation}:next"}}
    )
    state.cloud.client("dynamodb").delete_item(
        TableName=state.cloud.outputs["StateTableName"], Key={"operation_id": {"S": f"{operation}:next"}}
    )
    with pytest.raises(promise.ContinuationBroken):
        check()


def test_a_wait_whose_job_is_switched_off_is_an_abstract_state_of_its_own(explorer: type[Explorer]) -> None:
    # Given a job of steps waiting two days after its charge, its kill switch still on
    state = explorer()
    operation = state.producer_enqueues(job="steps-long", timing="now")
    state.everything_drains()
    state.promise_kept()
    waiting_off = "SCHEDULED waiting, switched off"
    assert states(state)[operation] is _S.SCHEDULED and not {s for s, _ in state.visited} & {waiting_off}
    # When an operator switches its job off while it waits
    state.operations_job_switched_off(operation=operation)
    state.promise_kept()
    # Then the targeted phase's coverage counts it waiting while switched off (its notice e-mail already sent)
    assert (waiting_off, True) in state.visited
    # And once the switch is on again, a wait no longer counts as switched off
    state.visited.clear()
    state.toggle_flips(job="steps-long", on=True)
    state.promise_kept()
    assert not {s for s, _ in state.visited} & {waiting_off}
