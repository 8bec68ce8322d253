"""The explorer's rules for per-key concurrency, played by hand: what they do, and that the invariant they are checked
against catches a break (a sync started while another of its account was in progress).

The capped job is tests/explore/catalogue.py's: one sync per account at a time, each seen as one e-mail.
"""

from __future__ import annotations

import pytest

from converge.model.states import OperationState

from . import promise
from .catalogue import STEPS_TYPES, WORLD, StepEffect
from .machine import Explorer

_S = OperationState


def states(state: Explorer) -> dict[str, OperationState]:
    return {
        operation_id: operation.state for operation_id, (operation, _) in promise.operations_now(state.cloud).items()
    }


def test_a_sync_whose_holder_crashed_waits_for_its_lease_then_each_runs_once(explorer: type[Explorer]) -> None:
    # Given a sync of an account whose holder dies after its effect (its lease, and its slot, held)
    state = explorer()
    state.holder_crashes_after_effect()
    first = state.producer_enqueues(job="singleton", timing="now")
    state.visible_work_drains()
    # When a second sync of the account is delivered while the dead holder's lease is live
    second = state.producer_enqueues(job="singleton", timing="now")
    state.visible_work_drains()
    state.promise_kept()
    # Then the first is in progress (its holder dead) and the second waits SCHEDULED, listed, never started
    now = states(state)
    assert (now[first], now[second]) == (_S.IN_PROGRESS, _S.SCHEDULED)
    record = promise.operations_now(state.cloud)[second][0].record
    assert record is not None and record.attempts == 0 and "concurrency explore-sync" in record.history[-1].reason
    # When the clock passes the dead holder's lease and the queues drain
    state.everything_drains()
    state.promise_kept()
    state.teardown()
    # Then both ended SUCCEEDED, and no start found the other in progress
    assert all(states(state)[op] is _S.SUCCEEDED for op in (first, second))
    assert WORLD.crowded == []


def test_a_holder_taken_over_when_its_lease_lapsed_leaves_the_key_to_the_delivery_that_took_over(
    explorer: type[Explorer],
) -> None:
    # Found by the explorer (CapExceeded): the holder of an account's sync outlives its lease after its effect,
    # another delivery of the sync takes over (its lease, and the key's slot taken back) and dies after its effect;
    # the first, ending (settled by the other), gave back the slot, which was no longer its own: the account's next
    # sync started while the one that took over still held a live lease
    state = explorer()
    state.holder_crashes_after_effect()
    state.lease_expires_under_holder()
    first, second = state.producer_floods_one_accounts_sync(count=2, job="singleton").values
    # When everything visible is delivered
    state.visible_work_drains()
    # Then no sync of the account started while another held a live lease: the second waits SCHEDULED, listed
    state.promise_kept()
    assert WORLD.crowded == []
    now = states(state)
    assert (now[first], now[second]) == (_S.IN_PROGRESS, _S.SCHEDULED)
    # And once the dead delivery's lease has lapsed, the second runs
    state.clock_advances(seconds=120.0)
    state.everything_drains()
    state.promise_kept()
    assert states(state)[second] is _S.SUCCEEDED and WORLD.crowded == []


def test_syncs_of_an_account_one_after_another_are_never_held(explorer: type[Explorer]) -> None:
    # Given three syncs of one account, When they are delivered one after another
    state = explorer()
    operations = list(state.producer_floods_one_accounts_sync(count=3).values)
    state.visible_work_drains()
    state.promise_kept()
    state.teardown()
    # Then each ran when the one before had ended: none was held
    assert all(states(state)[op] is _S.SUCCEEDED for op in operations)
    history = [entry.reason for op in operations for entry in promise.operations_now(state.cloud)[op][0].history]
    assert not [reason for reason in history if reason.startswith("concurrency ")]


def test_the_invariant_catches_a_start_while_the_cap_was_full(explorer: type[Explorer]) -> None:
    # Given a start that found its account's cap full (as a broken cap would let through)
    state = explorer()
    WORLD.crowded.append("h1-2 started at 0 while ['h1-1'] ran (account acct-6)")
    # Then the promise is broken, and says so
    with pytest.raises(promise.CapExceeded, match="while"):
        state.promise_kept()
    WORLD.crowded.clear()


def test_a_refresh_while_a_dead_holder_holds_its_key_ends_noop_naming_it(explorer: type[Explorer]) -> None:
    # Given a refresh (skip mode) whose holder dies after its effect, its slot held until its lease lapses
    state = explorer()
    state.holder_crashes_after_effect()
    first = state.producer_enqueues(job="refresh", timing="now")
    state.visible_work_drains()
    # When a second refresh of the account is delivered meanwhile
    second = state.producer_enqueues(job="refresh", timing="now")
    state.visible_work_drains()
    state.promise_kept()
    # Then it ended NOOP at once, naming the holder; it never waited, never ran
    operation = promise.operations_now(state.cloud)[second][0]
    assert operation.state is _S.NOOP and operation.history[-1].reason.endswith(f"held by {first}")
    # And the invariant holds it to that: counted without its holder, its NOOP names no refresh of its key
    with pytest.raises(promise.SkippedWithoutReason, match="NOOP without a holder of its key named"):
        promise.modes_kept(state.cloud, {second}, set())
    # And once the dead holder's lease lapses, the first is delivered again and ends SUCCEEDED
    state.everything_drains()
    state.teardown()
    assert states(state)[first] is _S.SUCCEEDED and WORLD.crowded == []


def test_renders_while_a_dead_holder_holds_their_key_keep_only_the_newest(explorer: type[Explorer]) -> None:
    # Given a render (replace mode) whose holder dies after its effect, its slot held until its lease lapses
    state = explorer()
    state.holder_crashes_after_effect()
    first = state.producer_enqueues(job="render", timing="now")
    state.visible_work_drains()
    # When two more renders of the account are delivered meanwhile, one after the other
    older = state.producer_enqueues(job="render", timing="now")
    state.visible_work_drains()
    newer = state.producer_enqueues(job="render", timing="now")
    state.visible_work_drains()
    state.promise_kept()
    # Then both wait SCHEDULED (the older until its message comes back), never started
    assert (states(state)[older], states(state)[newer]) == (_S.SCHEDULED, _S.SCHEDULED)
    # When everything drains and settles
    state.everything_drains()
    state.promise_kept()
    state.teardown()
    # Then the newest ran; the older ended NOOP "replaced by" it; none ran beside another
    final = states(state)
    assert final[newer] is _S.SUCCEEDED and final[older] is _S.NOOP
    assert promise.operations_now(state.cloud)[older][0].history[-1].reason.startswith(f"replaced by {newer}")
    assert final[first] in (_S.SUCCEEDED, _S.NOOP) and WORLD.crowded == []
    # And the invariant holds the older to that: counted without the newer, it was replaced by no render of its key
    with pytest.raises(promise.OlderReplacedNewer, match=f"replaced by {newer}, not a request of its key"):
        promise.modes_kept(state.cloud, set(), {older})


def test_a_paused_key_starts_none_of_its_jobs_until_an_operator_releases_it(explorer: type[Explorer]) -> None:
    # Given an account's sync key paused by an operator
    state = explorer()
    state.operator_pauses_a_capped_key(job="singleton")
    # When two syncs of the account are delivered
    operations = list(state.producer_floods_one_accounts_sync(count=2).values)
    state.visible_work_drains()
    state.promise_kept()
    # Then both wait SCHEDULED, listed with who paused the key, never started
    for op in operations:
        operation = promise.operations_now(state.cloud)[op][0]
        assert operation.state is _S.SCHEDULED and "paused by explorer:operator" in operation.history[-1].reason
    # When the operator releases it and the queues drain, Then each ran, one at a time
    state.operator_releases_a_capped_key(job="singleton")
    state.everything_drains()
    state.promise_kept()
    state.teardown()
    assert all(states(state)[op] is _S.SUCCEEDED for op in operations) and WORLD.crowded == []


def test_a_key_paused_for_weeks_costs_its_held_jobs_a_few_tries_and_the_release_wakes_them(
    explorer: type[Explorer],
) -> None:
    # Given two syncs of an account held on its paused key
    state = explorer()
    state.operator_pauses_a_capped_key(job="singleton")
    operations = list(state.producer_floods_one_accounts_sync(count=2).values)
    state.visible_work_drains()
    # When forty days pass (the platform polling and firing its schedules all along)
    runs = state.cloud.runtime.invocation_counts
    before = sum(runs.values())
    state.months_pass(seconds=40 * 24 * 3600.0)
    state.promise_kept()
    # Then each tried again after as long as the key had been paused (five minutes, then twice that, up to a day): a
    # few dozen invocations in all, the template's schedules' included, not a try every five minutes (over 11,000);
    # both still wait, listed, never started
    assert sum(runs.values()) - before < 60
    for op in operations:
        operation = promise.operations_now(state.cloud)[op][0]
        assert operation.state is _S.SCHEDULED and "paused by explorer:operator" in operation.history[-1].reason
        assert operation.record is not None and operation.record.run_at is not None
        assert operation.record.run_at > state.now + 12 * 3600
    # When the operator releases the key, and what is due now is delivered (the clock not moved)
    state.operator_releases_a_capped_key(job="singleton")
    released = state.released
    assert (
        released is not None
        and sorted(released.woken) == sorted(operations)
        and (released.unsent, released.missed) == ((), ())
    )
    state.visible_work_drains()
    # Then the first ran at once, and the other after it (the cap's one at a time), none beside another
    started = [promise.operations_now(state.cloud)[op][0] for op in operations]
    assert _S.SUCCEEDED in [operation.state for operation in started]
    state.everything_drains()
    state.promise_kept()
    state.teardown()
    assert all(states(state)[op] is _S.SUCCEEDED for op in operations) and WORLD.crowded == []


def test_an_operator_frees_a_slot_its_ended_holder_left_behind(explorer: type[Explorer]) -> None:
    # Given a sync that ran and ended, whose slot was left on its key (giving it back failed), its lease far off
    state = explorer()
    first = state.producer_enqueues(job="singleton", timing="now")
    state.visible_work_drains()
    assert states(state)[first] is _S.SUCCEEDED
    caps = state.converge.concurrency_caps
    assert caps._table.take("explore-sync", "acct-6", first, state.now + 900, 1, state.now).taken
    # When an operator frees the slots whose holders ended, and a second sync of the account is delivered
    state.operator_frees_slots_left_behind()
    second = state.producer_enqueues(job="singleton", timing="now")
    state.visible_work_drains()
    state.promise_kept()
    # Then it ran at once: nothing held it
    assert states(state)[second] is _S.SUCCEEDED
    history = promise.operations_now(state.cloud)[second][0].history
    assert not [entry for entry in history if entry.reason.startswith("concurrency ")]
    state.teardown()


def test_an_early_copy_of_a_capped_job_waiting_on_a_paused_key_leaves_its_wait_as_it_was(
    explorer: type[Explorer],
) -> None:
    # Given a capped job of steps waiting two days between its charge and its filing
    state = explorer()
    operation = state.producer_enqueues(job="steps-capped", timing="now")
    state.visible_work_drains()
    record = state.converge.operations.state.record(operation)
    assert (record.state, record.waiting) == (_S.SCHEDULED, "cool-off")
    ends = record.run_at
    # (the job's reading of the clock and the store's are a few apart: the explorer's clock ticks a ms a reading)
    assert ends is not None and WORLD.waits[operation] == (172800.0, pytest.approx(ends, abs=0.01))
    # And an operator pauses its account's key
    state.operator_pauses_a_capped_key(job="steps-capped")
    # When an early copy of its message arrives (a replayed dispatch) and is delivered
    state.dispatch_replayed(operation=operation)
    state.visible_work_drains()
    state.promise_kept()
    # Then the wait stands: still SCHEDULED at its wait, for the wait's end, not the paused key's next try
    record = state.converge.operations.state.record(operation)
    assert (record.state, record.waiting, record.run_at) == (_S.SCHEDULED, "cool-off", ends)
    assert not any(entry.reason.startswith("concurrency ") for entry in record.history)
    # And once released and past its wait, it files once, two days after its charge, and no start met the pause
    state.operator_releases_a_capped_key(job="steps-capped")
    state.teardown()
    assert states(state)[operation] is _S.SUCCEEDED and WORLD.records[f"{operation}:file"] == 1
    (charged,) = [e.at for e in WORLD.effects_of(operation) if e.step == "charge"]
    (filed,) = [e.at for e in WORLD.effects_of(operation) if e.step == "file"]
    assert filed >= charged + 172800 and WORLD.crowded == []


def test_the_invariants_catch_a_wait_brought_forward_or_cut_short(
    explorer: type[Explorer], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(promise, "NOTICE", [])  # the breaks made here are not the explorer's findings
    # Given a capped job of steps waiting two days after its charge
    state = explorer()
    operation = state.producer_enqueues(job="steps-capped", timing="now")
    state.visible_work_drains()
    check = lambda: promise.steps_kept(state.cloud, state.chaos.faults, WORLD, STEPS_TYPES, {})  # noqa: E731
    check()
    # When its record is moved to a paused key's next try (as a hold that ignores the wait's time writes it)
    table, key = state.cloud.outputs["StateTableName"], {"operation_id": {"S": operation}}
    ends = state.converge.operations.state.record(operation).run_at
    moved = {":at": {"N": str(state.now + 300)}}
    dynamodb = state.cloud.client("dynamodb")
    dynamodb.update_item(TableName=table, Key=key, UpdateExpression="SET run_at = :at", ExpressionAttributeValues=moved)
    # Then WaitBroughtForward, naming the wait's end
    with pytest.raises(promise.WaitBroughtForward, match=f"its wait ends {ends:.0f}"):
        check()
    back = {":at": {"N": str(ends)}}
    dynamodb.update_item(TableName=table, Key=key, UpdateExpression="SET run_at = :at", ExpressionAttributeValues=back)
    check()
    # When its record is filed a minute after its charge / Then WaitCutShort
    (charged,) = [effect.at for effect in WORLD.effects_of(operation) if effect.step == "charge"]
    WORLD.effects.append(StepEffect(operation, "file", f"{operation}:file", charged + 60))
    with pytest.raises(promise.WaitCutShort, match="its wait 172800 s"):
        check()


@pytest.mark.parametrize("job", ["singleton", "refresh"])
def test_a_job_that_loses_its_keys_first_use_to_another_of_its_batch_takes_the_slot_left(
    explorer: type[Explorer], job: str
) -> None:
    # Given two jobs of an account's cap (queue mode, skip mode) in one batch, and a second instance of the worker
    # handed the second one just as the first makes the key's item: the second takes the key's first slot, runs, ends
    state = explorer()
    first, second = state.producer_floods_two_workers_at_once(count=2, job=job).values
    # When everything visible is delivered
    state.visible_work_drains()
    # Then the race was run, and the first took the slot the second had left free: both ran, neither was held or
    # skipped, none beside the other
    assert state.chaos.faults.counts["first_use_raced"] == 1
    state.promise_kept()
    assert (states(state)[first], states(state)[second]) == (_S.SUCCEEDED, _S.SUCCEEDED)
    history = [entry.reason for op in (first, second) for entry in promise.operations_now(state.cloud)[op][0].history]
    assert not [reason for reason in history if "concurrency " in reason] and WORLD.crowded == []
    state.teardown()


def test_a_render_resumed_after_its_kill_switch_on_a_key_paused_before_any_render_waits_on_the_pause(
    explorer: type[Explorer],
) -> None:
    # Given a render paused by its kill switch before it took any slot, and its account's key then paused by an
    # operator (the key has no newest request)
    state = explorer()
    state.toggle_flips(job="render", on=False)
    render = state.producer_enqueues(job="render", timing="now")
    state.visible_work_drains()
    assert states(state)[render] is _S.PAUSED
    state.operator_pauses_a_capped_key(job="render")
    # When its kill switch is back on and the resumer sends its message again (no acceptance time with it)
    state.toggle_flips(job="render", on=True)
    state.resumer_runs()
    state.visible_work_drains()
    # Then it waits SCHEDULED on the pause, naming who paused the key, for the paused key's next try
    state.promise_kept()
    operation = promise.operations_now(state.cloud)[render][0]
    assert operation.state is _S.SCHEDULED and "paused by explorer:operator" in operation.history[-1].reason
    assert operation.record is not None and operation.record.run_at is not None
    assert operation.record.run_at > state.now + 290  # (five minutes from the hold, not a second)
    # And once released it runs, once
    state.operator_releases_a_capped_key(job="render")
    state.everything_drains()
    state.promise_kept()
    state.teardown()
    assert states(state)[render] is _S.SUCCEEDED and WORLD.crowded == []


def test_a_newer_render_resumed_after_its_kill_switch_takes_its_place_from_its_record_and_runs(
    explorer: type[Explorer],
) -> None:
    # Given a render of an account run (the key's newest), then a newer one delivered while renders are switched off
    # (PAUSED: its record keeps when it was accepted); converge sends again only an operation it has recorded
    state = explorer()
    older = state.producer_enqueues(job="render", timing="now")
    state.visible_work_drains()
    assert states(state)[older] is _S.SUCCEEDED
    state.clock_advances(seconds=1.0)
    newer = state.producer_enqueues(job="render", timing="now")
    state.capped_jobs_message_sent_again(operation=newer)
    assert state.chaos.faults.counts["dispatch_replay"] == 0  # (before its first delivery: nothing sent)
    state.toggle_flips(job="render", on=False)
    state.visible_work_drains()
    assert states(state)[newer] is _S.PAUSED
    # When renders are on again and the resumer sends its message again (no acceptance time on it)
    state.toggle_flips(job="render", on=True)
    state.resumer_runs()
    state.visible_work_drains()
    # Then it is not taken for older than the render that ran: it runs
    state.promise_kept()
    assert states(state)[newer] is _S.SUCCEEDED
    state.teardown()


def test_a_render_cancelled_before_it_was_accepted_and_sent_again_replaces_none_of_the_newer_ones(
    explorer: type[Explorer],
) -> None:
    # Break (OlderReplacedNewer): a render cancelled before the relay accepted it has a record that begins CANCELLED;
    # its message sent again (no acceptance on it) took the cancel's time for its acceptance, newer than the renders
    # written after it, and the next of them ended NOOP "replaced by" the cancelled one: the newest data unrendered
    # Given three renders of an account written at once, the first cancelled at once (before the relay ran)
    state = explorer()
    first, second, third = state.producer_floods_one_accounts_sync(count=3, job="render").values
    state.console_cancels(operation=first)
    # When an hour passes and the cancelled one's message is sent again, then everything is delivered
    state.clock_advances(seconds=3700.0)
    state.capped_jobs_message_sent_again(operation=first)
    state.teardown()
    # Then the cancelled one replaced nothing: the two written after it each rendered, the newest last
    found = promise.operations_now(state.cloud)
    assert [states(state)[op] for op in (first, second, third)] == [_S.CANCELLED, _S.SUCCEEDED, _S.SUCCEEDED]
    assert not any(f"replaced by {first}" in entry.reason for op in (second, third) for entry in found[op][0].history)


def test_a_render_cancelled_before_it_ran_replaces_nothing_and_the_older_render_runs(explorer: type[Explorer]) -> None:
    # Found by the explorer (OlderReplacedNewer: "replaced by the older ... ()"), shrunk by Hypothesis: the newer of
    # two renders of an account, cancelled before the relay accepted it, became the key's newest when its copy was
    # held, and the older one's retry (its first answer lost) ended NOOP "replaced by" it; neither rendered
    # Given two renders of one account, the first's answer lost, the newer cancelled before the relay ran
    state = explorer()
    state.providers_met(charges="can tell", ledger="can tell", first_answers="lost")
    older, newer = state.producer_floods_one_accounts_sync(count=2, job="render")
    state.operator_cancels(operation=newer)
    # When everything drains / Then the older one rendered, the newer stayed cancelled, and the promise holds
    state.everything_drains()
    state.promise_kept()
    assert (states(state)[older], states(state)[newer]) == (OperationState.SUCCEEDED, OperationState.CANCELLED)
    state.teardown()
