"""A limiter key's reservations in the markers table (over moto): their pace, their writes, and two workers racing.

Every start a reservation allows is counted in windows of one period: none holds more than `limit + burst`.
"""

from __future__ import annotations

import random

import boto3
import pytest

from converge.model.limits import KeyState, Limiter
from converge.store.limits import LimiterTable

T0 = 1_800_000_000.0


@pytest.fixture
def table(tables) -> LimiterTable:
    return LimiterTable(tables["markers"], boto3.client("dynamodb"))


def starts_of(table: LimiterTable, limiter: Limiter, arrivals: list[float], units: int = 1) -> list[float]:
    """Each arrival's start, as the hold before the lease computes it."""
    return [limiter.start(table.reserve(limiter.name, "k", at, limiter.cost(units)).free_before, at) for at in arrivals]


def most_in_a_window(starts: list[float], period: float) -> int:
    ordered = sorted(starts)
    return max(sum(1 for later in ordered[i:] if later < at + period - 1e-6) for i, at in enumerate(ordered))


@pytest.mark.parametrize(("limit", "period", "burst"), [(1, 60, 0), (5, 10, 0), (5, 10, 3), (50, 60, 10)])
def test_no_window_of_one_period_holds_more_starts_than_the_limit_and_its_burst(table, limit, period, burst):
    # Given a limiter, and arrivals in bursts and lulls over several periods
    limiter = Limiter("partner", limit=limit, period=period, burst=burst)
    rng = random.Random(limit * 1000 + burst)
    arrivals, at = [], T0
    for _ in range(120):
        at += rng.choice([0.0, 0.0, 0.0, period / limit / 3, period / 2, 2 * period])
        arrivals.append(at)
    # When each reserves its slot
    starts = starts_of(table, limiter, arrivals)
    # Then no job starts before it arrived, and no window of one period holds more than limit + burst starts
    assert all(start >= arrival for start, arrival in zip(starts, arrivals, strict=True))
    assert most_in_a_window(starts, period) <= limit + burst
    # And the pace is reached: a flood of 3 periods' worth, at once, fills each window to it
    flood = starts_of(table, limiter, [at + 10 * period] * (3 * limit + burst))
    assert most_in_a_window(flood, period) == limit + burst


def test_a_key_at_rest_costs_one_write_and_a_busy_key_one_add_once_the_guess_is_right(table):
    # Given a limiter of one a second
    limiter = Limiter("partner", limit=1, period=1)
    # When three jobs arrive at once on a key at rest
    first, second, third = (table.reserve(limiter.name, "k", T0, 1.0) for _ in range(3))
    # Then the first took one write (the key at rest), the second two (its guess "at rest" was wrong), the third
    # one (the ADD): never more, and each a slot one second after the last
    assert [r.writes for r in (first, second, third)] == [1, 2, 1]
    assert [r.free_before for r in (first, second, third)] == [T0, T0 + 1, T0 + 2]


def test_two_workers_racing_on_one_key_never_share_a_slot(tables):
    # Given two workers' tables (each with its own guesses) on one key
    one = LimiterTable(tables["markers"], boto3.client("dynamodb"))
    two = LimiterTable(tables["markers"], boto3.client("dynamodb"))
    limiter = Limiter("partner", limit=2, period=2)
    # When they reserve alternately at the same instant
    slots = [(one if n % 2 else two).reserve(limiter.name, "k", T0, limiter.cost()) for n in range(6)]
    # Then every reservation has its own slot, one interval apart, and none took more than two writes
    assert sorted(r.free_before for r in slots) == [T0 + n for n in range(6)]
    assert max(r.writes for r in slots) <= 2


def test_a_push_back_pauses_the_key_and_takes_the_first_slot_after_it(table):
    # Given a key with a burst of two
    limiter = Limiter("partner", limit=1, period=1, burst=2)
    table.reserve(limiter.name, "k", T0, 1.0)
    # When its upstream asks to wait 30 s (the burst spent too), as RateLimits.push_back does
    assert table.push_back(limiter.name, "k", T0 + 30 + limiter.tolerance, 1.0)
    # Then the next job starts a whole interval after the pause's own slot, never within it
    assert starts_of(table, limiter, [T0 + 1]) == [T0 + 31]
    # And a push back to an earlier time than the key is busy for changes nothing
    assert not table.push_back(limiter.name, "k", T0 + 5, 1.0)


def test_the_keys_list_their_free_time_and_their_queue(table):
    # Given two keys, one busy for five units ahead
    limiter = Limiter("partner", limit=1, period=1, key="tenant_id")
    for _ in range(6):
        table.reserve(limiter.name, "busy", T0, 1.0)
    table.reserve(limiter.name, "quiet", T0 - 100, 1.0)
    # When the keys are listed
    keys = {state.key: state for state in table.keys(limiter.name)}
    # Then the busy one waits with five units queued (one starts now), the quiet one does not
    assert keys["busy"] == KeyState("partner", "busy", T0 + 6)
    assert keys["busy"].waiting(limiter, T0) and keys["busy"].queued(limiter, T0) == 5
    assert not keys["quiet"].waiting(limiter, T0)
    # And a released key is gone
    assert table.release(limiter.name, "busy") and not table.release(limiter.name, "busy")
    assert {state.key for state in table.keys(limiter.name)} == {"quiet"}
