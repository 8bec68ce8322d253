"""The explorer over a team's catalogue (converge_testing.explorer) on the team's project as it is: the promise holds,
every job is held to its clean run, and its rules and seed are the caller's to choose (tests/testing/
test_explore_breaks.py: what it finds in the same project broken)."""

from __future__ import annotations

import pytest

from converge_testing import Cloud, explore
from converge_testing.explore_machine import GROUPS
from converge_testing.explorer import SEED_VARIABLE


def test_the_team_project_keeps_the_promise(orders_cloud: Cloud) -> None:
    # Given the team's project as it is / When the explorer runs a bounded number of histories from a fixed seed
    explored = explore(orders_cloud, seed=11, histories=12, budget=600)
    # Then the promise held in each, and every job was held to its clean run, read from the effect counter
    assert explored.histories >= 12 and explored.steps >= 12 and explored.first_break is None
    assert explored.clean == {
        "hello.greeting.v1": {"GreetingsBucket": 1},
        "orders.confirm.v1": {"OrdersTable": 1, "ses": 1},
        "orders.follow-up.v1": {"FollowUpsTopic": 1},
        "orders.receipt.v1": {"ReceiptsTable": 1},
        "orders.receipts-written.v1": {"AccountingQueue": 1},
    }
    assert explored.not_held == {}
    assert {"worker_dies_after_effect", "producer_admits_batch", "producer_enqueues_orders_confirm_v1"} <= set(
        explored.rules
    )
    assert "producer_enqueues_orders_follow_up_v1" not in explored.rules  # a continuation: its parent starts it
    # And the effect counter starts from nothing again: a test after it on the same cloud counts its own effects
    assert orders_cloud.effects.made() == []


def test_its_rules_can_be_left_out_by_name_or_group_and_its_seed_comes_from_the_environment(
    orders_cloud: Cloud, monkeypatch: pytest.MonkeyPatch
) -> None:
    # When the faults and one operator's rule are left out, and the seed is the environment's
    monkeypatch.setenv(SEED_VARIABLE, "4242")
    explored = explore(orders_cloud, histories=1, leave_out=["faults", "operator_cancels"])
    # Then none of them is drawn, the rest are, and the run says its seed
    assert explored.seed == 4242
    assert not set(explored.rules) & {*GROUPS["faults"], "operator_cancels"}
    assert {"operator_retries", "clock_advances", "kill_switch_flips"} <= set(explored.rules)
    # And a name that is none is refused, naming those that are
    with pytest.raises(ValueError, match="no rule or group of the explorer's: ways in, faults"):
        explore(orders_cloud, histories=1, leave_out=["fault"])
    monkeypatch.setenv(SEED_VARIABLE, "seven")
    with pytest.raises(ValueError, match="is not an integer seed"):
        explore(orders_cloud, histories=1)
