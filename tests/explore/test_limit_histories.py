"""The explorer's rules for rate limits, played by hand: what each does, and that the invariant they are checked
against catches a break (more starts in a window than the limit allows).

The limited job is tests/explore/catalogue.py's: one call a minute to a partner (an e-mail, counted in SES with its
emulated time), whose 429 the explorer can plan.
"""

from __future__ import annotations

import itertools

import pytest

from converge.model.states import OperationState

from . import promise
from .catalogue import ACCOUNT_LIMIT, PARTNER_LIMIT, PARTNER_RETRY_AFTER, WORLD
from .machine import Explorer

_S = OperationState


def states(state: Explorer) -> dict[str, OperationState]:
    return {
        operation_id: operation.state for operation_id, (operation, _) in promise.operations_now(state.cloud).items()
    }


def calls(state: Explorer) -> list[tuple[float, str]]:
    """The partner's calls as the emulated service saw them: (emulated time, operation)."""
    return sorted((seen.at, seen.operation_id) for seen in state.chaos.faults.effects_seen)


def test_a_flood_starts_one_call_a_minute_and_the_others_wait_listed(explorer: type[Explorer]) -> None:
    # Given three calls to the partner enqueued at once (one a minute allowed)
    state = explorer()
    operations = list(state.producer_floods_a_limited_partner(count=3).values)
    state.promise_kept()
    # When everything visible is delivered
    state.visible_work_drains()
    state.promise_kept()
    # Then one started, the two others wait SCHEDULED (listed, never started, never failed)
    assert sorted(states(state)[op].value for op in operations) == ["SCHEDULED", "SCHEDULED", "SUCCEEDED"]
    assert len(calls(state)) == 1
    # When the clock passes their slots and the queues drain, a minute at a time
    for _ in range(3):
        state.clock_advances(seconds=1000.0)
        state.everything_drains()
        state.promise_kept()
    state.teardown()
    # Then each ran once, a minute or more apart
    assert all(states(state)[op] is _S.SUCCEEDED for op in operations)
    times = [at for at, _ in calls(state)]
    assert len(times) == 3 and all(later - earlier >= 60 for earlier, later in itertools.pairwise(times))


def test_a_429_pauses_the_partner_and_the_job_waits_without_spending_an_attempt(explorer: type[Explorer]) -> None:
    # Given the partner will refuse the next call with a retry-after
    state = explorer()
    state.limited_partner_answers_429()
    operation = state.producer_enqueues(job="limited", timing="now")
    # When it is delivered
    state.visible_work_drains()
    state.promise_kept()
    # Then it waits SCHEDULED for the retry-after, the partner not called, nothing in a DLQ
    assert states(state)[operation] is _S.SCHEDULED and calls(state) == []
    record = promise.operations_now(state.cloud)[operation][0].record
    assert record is not None and record.run_at is not None and record.run_at >= state.now + PARTNER_RETRY_AFTER - 1
    # When its time comes, Then it runs once
    state.clock_advances(seconds=1000.0)
    state.everything_drains()
    state.promise_kept()
    state.teardown()
    assert states(state)[operation] is _S.SUCCEEDED and len(calls(state)) == 1


def test_the_invariant_catches_a_window_holding_more_starts_than_the_limit(explorer: type[Explorer]) -> None:
    # Given three of the limited job's calls the partner took in one minute (as a broken limit would let through)
    state = explorer()
    operations = list(state.producer_floods_a_limited_partner(count=3).values)
    WORLD.partner_refuses = 0
    faults = state.chaos.faults
    from localcloud.faults import EffectSeen

    allowed = PARTNER_LIMIT.limit + PARTNER_LIMIT.burst + 1  # one late return within the grace of a minute
    for index, operation in enumerate(operations[: allowed + 1]):
        faults.effects_seen.append(EffectSeen(operation, "ses", state.now + index))
    # Then the promise is broken, and says so
    with pytest.raises(promise.LimitExceeded, match="starts in 60 s"):
        promise.limits_kept(state.cloud, faults, set(operations), PARTNER_LIMIT)


def test_an_operators_pause_holds_a_flood_past_its_end_then_a_call_a_minute(explorer: type[Explorer]) -> None:
    # Given three calls to the partner, and an operator who pauses its key for ten minutes before any is delivered
    state = explorer()
    operations = list(state.producer_floods_a_limited_partner(count=3).values)
    paused_at = state.now
    state.operator_pauses_the_limited_partner(seconds=600.0)
    # When everything drains, the clock moving to each held message
    state.everything_drains()
    state.promise_kept()
    state.teardown()
    # Then each ran once, none before the pause ended, and each no earlier than its slot a minute after the one before
    # (a start may come later than its slot, on a loaded machine: the limiter's grace allows it, not an earlier one)
    assert all(states(state)[op] is _S.SUCCEEDED for op in operations)
    times = sorted(at for at, _ in calls(state))
    assert len(times) == 3
    assert all(at >= paused_at + 600 + 60 * index for index, at in enumerate(times))


def test_a_kill_switch_pauses_a_flood_the_limit_holds_and_no_call_is_made(explorer: type[Explorer]) -> None:
    # Given three calls to the partner, and its job switched off before any is delivered
    state = explorer()
    operations = list(state.producer_floods_a_limited_partner(count=3).values)
    state.toggle_flips(job="limited", on=False)
    # When everything drains
    state.everything_drains()
    state.promise_kept()
    # Then the kill switch wins: each is PAUSED (listed, for an operator), not held, and the partner never called
    assert all(states(state)[op] is _S.PAUSED for op in operations)
    assert calls(state) == []
    state.teardown()


def test_a_held_calls_replayed_dispatch_comes_to_rest_and_each_call_is_made_once(explorer: type[Explorer]) -> None:
    # Given two calls to the partner at once: one runs, the other is held for its slot a minute on
    state = explorer()
    operations = list(state.producer_floods_a_limited_partner(count=2).values)
    state.visible_work_drains()
    held = next(op for op in operations if states(state)[op] is _S.SCHEDULED)
    # When its request is dispatched again (a relay that died before its checkpoint): a second copy of its message,
    # which finds the partner's next slot a minute after the held copy's
    state.dispatch_replayed(operation=held)
    state.everything_drains()
    # Then the platform comes to rest (the copies do not put each other off), and each call was made once
    state.promise_kept()
    state.teardown()
    assert all(states(state)[op] is _S.SUCCEEDED for op in operations) and len(calls(state)) == 2


def test_a_call_held_by_the_partners_pace_starts_on_its_slot_charged_once_on_its_accounts(
    explorer: type[Explorer],
) -> None:
    # Given a call to the partner, then one under the partner's pace and its account's (one in ten minutes)
    state = explorer()
    first, both = state.producer_floods_the_partner_then_one_accounts_call(count=1).values
    enqueued_at = state.now
    # When everything visible is delivered
    state.visible_work_drains()
    state.promise_kept()
    # Then the first ran, and the second waits for the partner's next slot, a minute on (its account's unit given back)
    assert (states(state)[first], states(state)[both]) == (_S.SUCCEEDED, _S.SCHEDULED)
    record = promise.operations_now(state.cloud)[both][0].record
    assert record is not None and record.run_at is not None and record.run_at <= state.now + PARTNER_LIMIT.period
    # When it comes back on its slot
    state.clock_advances(seconds=PARTNER_LIMIT.period)
    state.everything_drains()
    state.promise_kept()
    state.teardown()
    # Then it starts there, never held by its account's pace: its only unit there is the one it took as it started
    (operation, _) = promise.operations_now(state.cloud)[both]
    assert operation.state is _S.SUCCEEDED
    assert not [entry for entry in operation.history if ACCOUNT_LIMIT.name in entry.reason]
    times = [at for at, op in calls(state) if op == both]
    assert len(times) == 1 and times[0] < enqueued_at + 2 * PARTNER_LIMIT.period  # not ten minutes on


def test_a_reservation_follows_its_key_moved_under_it_and_its_job_is_never_handed_back(
    explorer: type[Explorer],
) -> None:
    # Given the partner's key moved against each of a worker's next three writes to it: another worker reserves it
    # before a write for a key at rest, an operator releases it before one for a busy key
    state = explorer()
    state.limiter_key_raced()
    operation = state.producer_enqueues(job="limited", timing="now")
    # When its call is delivered
    state.visible_work_drains()
    state.promise_kept()
    # Then its worker followed the key (made busy, if its worker guessed it at rest, then released: the call starts
    # now), and it ran, never handed back
    assert states(state)[operation] is _S.SUCCEEDED and len(calls(state)) == 1
    faults = state.chaos.faults
    assert faults.counts["limiter_key_raced"] in (1, 2) and faults.limiter_keys_released == 1
    assert faults.races_failed == []
    state.teardown()


def test_a_copy_of_a_held_job_handed_back_early_in_a_raced_batch_is_no_failed_reservation(
    explorer: type[Explorer],
) -> None:
    # Given warm workers (a history before this one), then the partner flooded and one call of an account's, the
    # partner's next answer a 429, a copy of the account's call sent, and the limiter key raced
    warming = explorer()
    warming.producer_floods_the_partner_then_one_accounts_call(count=1)
    warming.teardown()
    state = explorer()
    _, both = state.producer_floods_the_partner_then_one_accounts_call(count=1).values
    state.limited_partner_answers_429()
    state.dispatch_replayed(operation=both)
    state.limiter_key_raced()
    # When one batch delivers them all: the call is held by the partner's pace, then its copy comes early
    state.visible_work_drains()
    # Then the race met that batch and the copy was handed back (early), yet no reservation failed
    faults = state.chaos.faults
    assert faults.counts["limiter_key_raced"] >= 1
    assert states(state)[both] is _S.SCHEDULED
    assert faults.races_failed == []
    state.promise_kept()
    state.teardown()


def test_a_held_calls_retries_take_slots_of_their_own_and_keep_the_partners_pace(explorer: type[Explorer]) -> None:
    # Given the partner paused 45 s by an operator, its next call's answer lost, and a lease that lapses under its
    # holder, then two calls written by a producer in one batch
    state = explorer()
    state.effect_response_lost()
    state.lease_expires_under_holder()
    state.operator_pauses_the_limited_partner(seconds=45.0)
    first, second = state.producer_batch_writes(first=("limited", "now"), second=("limited", "now")).values
    # When everything is delivered
    state.everything_drains()
    # Then the held call's retry did not call again on the slot it had called on: every call a minute apart
    state.promise_kept()
    times = [at for at, _ in calls(state)]
    assert len(times) >= 3 and all(later - earlier >= 60 for earlier, later in itertools.pairwise(times))
    assert {op for _, op in calls(state)} == {first, second}
    state.teardown()


def test_the_invariant_catches_a_delivery_handed_back_for_its_limiter_key_moving(explorer: type[Explorer]) -> None:
    # Given a delivery that a raced limiter key alone met, handed back by its worker (as a reservation that gave up
    # would be)
    state = explorer()
    operation = state.producer_enqueues(job="limited", timing="now")
    state.chaos.faults.races_failed.append(operation)
    # Then the promise is broken, and says so
    with pytest.raises(promise.ReservationFailed, match="its limiter key moved"):
        promise.reservations_kept(state.chaos.faults)


def test_a_call_whose_receipt_outgrew_its_history_is_not_taken_for_one_held_before_it_started(
    explorer: type[Explorer],
) -> None:
    # Break (an invariant's false alarm, ChargedTwice): a call paced by its account too met three 429s; each retry
    # was held by its own run's units on the account's key (as documented), and its receipt, past ten entries, kept
    # its first and latest ones only: the first run's start was gone, and the hold after ACCEPTED read as one met
    # before it ever started
    # Given a call to the partner and one paced by its account too, the partner answering 429 three times
    state = explorer()
    partner_call, account_call = state.producer_floods_the_partner_then_one_accounts_call(count=1).values
    for _ in range(3):
        state.limited_partner_answers_429()
    # And the first's job switched off (the account's call meets every 429)
    state.operations_job_switched_off(operation=partner_call)
    # When everything comes to rest
    state.teardown()
    # Then the account's call ran once to its end, its 429s each waited and retried, and its receipt is bounded
    assert states(state)[account_call] is _S.SUCCEEDED
    history = state.converge.operations.require(account_call).history
    assert len(history) == 10 and history[0].state == _S.ACCEPTED
    assert [entry.state for entry in history[1:]].count(_S.IN_PROGRESS) == 3  # the first run's start is trimmed
    assert [seen[1] for seen in calls(state)] == [account_call] and state.chaos.effects().emails[account_call] == 1
