"""The explorer's rules for debounce, played by hand: what they do, and that the invariant they are checked against
catches a break (an older payload run after a newer one, a NOOP naming nothing newer).

The debounced job is tests/explore/catalogue.py's: an account's refresh, 30 s quiet, at most two minutes, each run
seen as one e-mail naming its version.
"""

from __future__ import annotations

import pytest

from converge.model.states import OperationState

from . import promise
from .catalogue import EDIT_TIMES, REFRESH, WORLD
from .machine import Explorer

_S = OperationState


def states(state: Explorer) -> dict[str, OperationState]:
    return {
        operation_id: operation.state for operation_id, (operation, _) in promise.operations_now(state.cloud).items()
    }


def reason(state: Explorer, operation_id: str) -> str:
    return promise.operations_now(state.cloud)[operation_id][0].history[-1].reason


def test_a_burst_of_changes_runs_once_from_the_newest_and_the_others_name_it(explorer: type[Explorer]) -> None:
    # Given changes of one account at versions 2, 4, 1 and 4 again (an equal one), in one burst
    state = explorer()
    operations = list(state.producer_bursts_one_accounts_changes(versions=[2, 4, 1, 4]).values)
    # When the relay and the workers meet them, Then each waits SCHEDULED for the burst, listed, never started
    state.visible_work_drains()
    state.promise_kept()
    assert {states(state)[op] for op in operations} == {_S.SCHEDULED}
    # When the clock passes the burst's quiet period and everything drains
    state.everything_drains()
    state.promise_kept()
    state.teardown()
    # Then one run, from a version 4 (the larger operation id of the two), and the other three NOOP naming it
    (ran,) = [op for op in operations if states(state)[op] is _S.SUCCEEDED]
    assert ran == max(operations[1], operations[3])
    assert [(op, version) for op, version, _, _ in WORLD.refreshes] == [(ran, 4)]
    for other in set(operations) - {ran}:
        assert (states(state)[other], reason(state, other)) == (_S.NOOP, f"debounced into {ran}")


def test_a_change_after_the_run_is_a_new_burst_and_an_older_one_ends_at_once(explorer: type[Explorer]) -> None:
    # Given a burst of one account's changes (two at version 3) run to its end
    state = explorer()
    burst = state.producer_bursts_one_accounts_changes(versions=[3, 3]).values
    state.everything_drains()
    (ran,) = [op for op, _, _, _ in WORLD.refreshes]
    # When a newer change comes, and one older than the burst's run after it
    newer, older = state.producer_bursts_one_accounts_changes(versions=[5, 2]).values
    state.everything_drains()
    state.promise_kept()
    state.teardown()
    # Then the newer ran as the next burst's run, and the older ended NOOP into the run newer than it that had run
    # when it came (never run after either)
    assert ran == max(burst) and states(state)[newer] is _S.SUCCEEDED
    assert (states(state)[older], reason(state, older)) == (_S.NOOP, f"debounced into {ran}")
    assert [version for _, version, _, _ in WORLD.refreshes] == [3, 5]


def test_the_invariant_catches_an_older_payload_run_after_a_newer_one(explorer: type[Explorer]) -> None:
    # Given two changes of an account, the newer started first, then the older (as a broken debounce would let)
    state = explorer()
    newer, older = state.producer_bursts_one_accounts_changes(versions=[2, 1]).values
    WORLD.refreshes.extend([(newer, 2, 1, 10.0), (older, 1, 1, 20.0)])
    # Then the promise is broken, and says so
    with pytest.raises(promise.OlderPayloadRan, match="started after"):
        state.promise_kept()
    WORLD.refreshes.clear()


def test_the_invariant_catches_a_hold_past_max_wait(explorer: type[Explorer]) -> None:
    # Given the receipt's line for a hold (since when its burst runs, and by when the request starts)
    assert REFRESH.max_wait == 120
    held = (
        "debounced (key acct-7: a burst since 2027-01-15T08:00:00.000Z, newest h1-2); "
        "starts by 2027-01-15T08:02:01.000Z"
    )
    match = promise._BURST.match(held)
    assert match is not None and match.group(2) == "2027-01-15T08:02:01.000Z"
    # And a burst of an account's changes held SCHEDULED for its quiet period (30 s after its first request)
    state = explorer()
    state.producer_bursts_one_accounts_changes(versions=[1, 2])
    state.visible_work_drains()
    debounced = state._debounced()
    assert len(debounced) == 2 and {states(state)[op] for op in debounced} == {_S.SCHEDULED}
    # Then the hold is within the debounce's max_wait, and one bound tighter than the quiet period is broken by it
    promise.debounce_kept(state.cloud, debounced, WORLD.refreshes, REFRESH.max_wait)
    with pytest.raises(promise.DebounceLate, match="its burst's first at"):
        promise.debounce_kept(state.cloud, debounced, WORLD.refreshes, REFRESH.period - 1)


def test_a_refused_rewrite_of_a_bursts_run_leaves_the_burst_as_it_was_accepted(explorer: type[Explorer]) -> None:
    # Found by the explorer (it raised DebouncedIntoNothing): the invariant read each request's key and version from
    # the request item, which a producer's rewrite with other content changes though it is refused and never runs
    # Given a burst of two changes of one account, settled: one ran, the other ended NOOP "debounced into" it
    state = explorer()
    state.promise_kept()
    first, run = state.producer_bursts_one_accounts_changes(versions=[1, 1]).values
    state.promise_kept()
    state.everything_drains()
    state.promise_kept()
    # When a producer writes the run's request again with other content (another account, a newer version)
    state.producer_reputs_other_content(operation=run)
    state.promise_kept()
    state.teardown()
    # Then the burst is as it was accepted: the run's key and version, and the other debounced into it
    assert state._debounced() == {first: ("acct-7", 1), run: ("acct-7", 1)}
    operation = promise.operations_now(state.cloud)[first][0]
    assert operation.state is _S.NOOP and operation.history[-1].reason == f"debounced into {run}"


def test_a_bursts_request_written_again_with_other_times_keeps_its_version_and_its_listing(
    explorer: type[Explorer],
) -> None:
    # Found by the explorer (it raised DebouncedJobUnlisted, then RewriteMishandled): the explorer took a burst's
    # request as first written with the job's example version, so its rewrite with other times wrote other content
    # Given a burst of two changes of one account, at versions 1 and 2
    state = explorer()
    state.promise_kept()
    older, newer = state.producer_bursts_one_accounts_changes(versions=[1, 2]).values
    state.promise_kept()
    # When the producer writes the newer request again with other times (now)
    state.producer_reputs_other_options(operation=newer, timing="now")
    state.promise_kept()
    state.teardown()
    # Then it ran at the version first written, and the older ended NOOP debounced into it
    assert {version for operation, version, _, _ in WORLD.refreshes if operation == newer} == {2}
    operation = promise.operations_now(state.cloud)[older][0]
    assert operation.state is _S.NOOP and operation.history[-1].reason == f"debounced into {newer}"


def test_a_request_delayed_past_a_day_after_its_bursts_run_still_meets_the_run(explorer: type[Explorer]) -> None:
    # Found by the explorer (OlderPayloadRan, in two runs of `make explore-power`): a producer writes, in one
    # transaction, two changes of an account, one to run in 5 minutes and one in 2 days, then a third in 5 minutes
    # (all version 1: the larger id is the newer). The first burst ran the third; the key's item lived a day past its
    # last use, so the delayed one, arriving two days on, found no last run and opened a burst of its own: an older
    # request ran after a newer one
    state = explorer()
    first, delayed = state.producer_batch_writes(
        first=("debounced", "run_at in 5 min"), second=("debounced", "run_at in 2 days")
    ).values
    third = state.producer_enqueues(job="debounced", timing="run_at in 5 min")
    # When everything runs, the delayed request two days on
    state.teardown()
    # Then the burst ran once, as its newest; the delayed one, older, ended NOOP naming that run
    now = states(state)
    assert (now[first], now[delayed], now[third]) == (_S.NOOP, _S.NOOP, _S.SUCCEEDED)
    receipt = promise.operations_now(state.cloud)[delayed][0].history[-1].reason
    assert receipt == f"debounced into {third}"
    assert [operation for operation, *_ in WORLD.refreshes] == [third]


def test_a_burst_of_edits_by_time_runs_the_latest_readable_and_a_malformed_time_counts_as_oldest(
    explorer: type[Explorer],
) -> None:
    # Given edits of one account told apart by their times: a malformed one that would read as 09:00 with its Z taken
    # for a zone (2027-01-15T09Z:00:00), and a readable one at 08:00:00Z
    state = explorer()
    malformed, readable = state.producer_bursts_one_accounts_changes(versions=[3, 1], by_time=True).values
    # When the burst runs
    state.visible_work_drains()
    state.promise_kept()
    state.everything_drains()
    state.promise_kept()
    state.teardown()
    # Then the readable one ran, and the malformed one, the oldest, ended NOOP naming it
    assert [(op, edited_at) for op, edited_at, _, _ in WORLD.refreshes] == [(readable, EDIT_TIMES[0][0])]
    assert (states(state)[malformed], reason(state, malformed)) == (_S.NOOP, f"debounced into {readable}")
    assert state._debounced()[malformed] == ("acct-11", EDIT_TIMES[2][1])


def test_a_request_debounced_into_a_newer_one_whose_batch_mate_keeps_crashing_is_no_held_job_dead_lettered(
    explorer: type[Explorer],
) -> None:
    # Break (an invariant's false alarm, DebouncedJobDeadLettered): two requests of a burst in one SQS batch; the
    # older ended NOOP (debounced into the newer), while the newer's holder died after its effect five times, each
    # death taking the whole invocation: the older's message, skipped as settled each time, came back with it and
    # was dead-lettered with it, and read as a held job the DLQ took before it started
    # Given five deaths after an effect planned, and a burst of two requests written in one BatchWriteItem
    state = explorer()
    for _ in range(5):
        state.holder_crashes_after_effect()
    older, newer = state.producer_batch_writes(first=("debounced", "now"), second=("debounced", "now")).values
    # When everything is delivered
    state.everything_drains()
    state.promise_kept()
    # Then the older ended, debounced into the newer, and its copy in the DLQ is a settled operation's
    assert states(state)[older] is _S.NOOP and f"debounced into {newer}" in reason(state, older)
    assert older in promise.dead_lettered_on_time(state.cloud)
    # And the newer, its receives spent by its own deaths, waits in the DLQ with it for an operator (IN_PROGRESS,
    # its lease gone): every operation final or listed at rest
    state.teardown()
    assert states(state)[newer] is _S.IN_PROGRESS and newer in promise.dead_lettered_on_time(state.cloud)
