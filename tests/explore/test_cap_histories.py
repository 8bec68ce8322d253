"""The explorer's rules for per-key concurrency, played by hand: what they do, and that the invariant they are checked
against catches a break (a sync started while another of its account was in progress).

The capped job is tests/explore/catalogue.py's: one sync per account at a time, each seen as one e-mail.
"""

from __future__ import annotations

import pytest

from converge.model.states import OperationState

from . import promise
from .catalogue import WORLD
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
