"""A limiter key's reservations in the markers table (over moto): their pace, their writes, and two workers racing.

Every start a reservation allows is counted in windows of one period: none holds more than `limit + burst`.
"""

from __future__ import annotations

import random
from typing import Any

import boto3
import pytest

from converge.model.limits import KeyState, Limiter
from converge.store import limits as limits_store
from converge.store.limits import LimiterTable

from .conftest import ClientProxy

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


def stored(tables, limiter: str, key: str) -> dict[str, Any]:
    """A key's item as the markers table holds it."""
    key_item = {"pk": {"S": f"limit#{limiter}"}, "sk": {"S": f"key#{key}"}}
    return boto3.client("dynamodb").get_item(TableName=tables["markers"], Key=key_item)["Item"]


def test_a_keys_item_lives_a_day_past_its_free_time_and_its_time_to_live_moves_with_it(tables, table):
    # Given a key's first reservation, half a second into a second
    table.reserve("partner", "short", T0 + 0.5, 0.2)
    # Then its item holds its free time in whole milliseconds, and lives a day past that second
    item = stored(tables, "partner", "short")
    assert (item["free"], item["expires_at"]) == ({"N": str(1_800_000_000_700)}, {"N": str(1_800_086_400)})
    # When the busy key takes two more units of 0.2 s, Then each moves its time to live a whole second on
    table.reserve("partner", "short", T0 + 0.5, 0.2)
    table.reserve("partner", "short", T0 + 0.5, 0.2)
    assert stored(tables, "partner", "short")["expires_at"] == {"N": str(1_800_086_402)}
    # And units of a second and a millisecond move it two whole seconds each (rounded up)
    for _ in range(3):
        table.reserve("partner", "long", T0, 1.001)
    assert stored(tables, "partner", "long")["expires_at"] == {"N": str(1_800_086_404)}


def test_a_pushed_back_key_lives_a_day_past_the_pause(tables, table):
    # Given a key paused until half a second into a second, 30 s from now, and one unit of 1 s taken after it
    assert table.push_back("partner", "k", T0 + 30.5, 1.0)
    # Then it is free a unit after the pause, and lives a day past the pause's second
    item = stored(tables, "partner", "k")
    assert (item["free"], item["expires_at"]) == ({"N": str(1_800_000_031_500)}, {"N": str(1_800_086_430)})


def test_a_key_paused_or_released_takes_its_next_reservation_in_one_write(table):
    # Given a key at rest that an upstream pauses for 30 s
    assert table.push_back("partner", "paused", T0 + 30, 0.0)
    # When the next job reserves, Then it takes the slot after the pause with one write (the ADD of a busy key)
    after_pause = table.reserve("partner", "paused", T0 + 1, 1.0)
    assert (after_pause.free_before, after_pause.writes) == (T0 + 30, 1)
    # Given a busy key that an operator releases
    for _ in range(3):
        table.reserve("partner", "released", T0, 1.0)
    assert table.release("partner", "released")
    # When the next job reserves, Then it starts now, with one write (the key at rest)
    after_release = table.reserve("partner", "released", T0, 1.0)
    assert (after_release.free_before, after_release.writes) == (T0, 1)


def test_a_busy_key_come_to_rest_is_paced_from_now_not_from_its_old_free_time(table):
    # Given a key busy for two seconds from T0 (its last answer: busy)
    table.reserve("partner", "k", T0, 1.0)
    table.reserve("partner", "k", T0, 1.0)
    # When jobs come long after it came to rest
    later = [table.reserve("partner", "k", T0 + 100, 1.0) for _ in range(2)]
    # Then the first starts now (the guess "busy" refused: two writes), the next one unit after it (the guess "at
    # rest" refused, as the key's last answer was)
    assert [(r.free_before, r.writes) for r in later] == [(T0 + 100, 2), (T0 + 101, 2)]


def test_a_unit_costs_at_least_a_millisecond_of_the_keys_pace(table):
    # Given a limiter of a thousand a second (a millisecond a unit), and a cost rounded to none
    # When three jobs reserve at once, Then each takes its millisecond, whatever the cost asked
    assert [table.reserve("partner", "k", T0, 0.001).free_before for _ in range(3)] == [T0, T0 + 0.001, T0 + 0.002]
    assert [table.reserve("partner", "tiny", T0, 0.0004).free_before for _ in range(2)] == [T0, T0 + 0.001]


def test_each_process_keeps_the_last_answers_of_a_bounded_number_of_keys(table, monkeypatch):
    # Given a process that keeps at most two answers, and a busy key whose next reservation is one write (its last
    # answer: busy)
    monkeypatch.setattr(limits_store, "HINTS_KEPT", 2)
    for _ in range(2):
        table.reserve("partner", "a", T0, 1.0)
    assert table.reserve("partner", "a", T0, 1.0).writes == 1
    # When another key answers twice (at rest, then busy), the second answer finding two kept
    for _ in range(2):
        table.reserve("partner", "b", T0, 1.0)
    # Then the answers kept were forgotten: the first key's next guess is wrong, one write more
    assert table.reserve("partner", "a", T0, 1.0).writes == 2


class Interfering(ClientProxy):
    """Before each of its writes, another worker's or an operator's write to the same key (in order)."""

    def __init__(self, client: Any, meanwhile: list[Any]) -> None:
        super().__init__(client)
        self.meanwhile = meanwhile

    def update_item(self, **params: Any) -> Any:
        if self.meanwhile:
            self.meanwhile.pop(0)()
        return self._client.update_item(**params)


def test_a_key_released_between_two_writes_of_a_reservation_starts_its_job_now(tables):
    # Given another worker and an operator writing to the key between this worker's writes: the key made busy before
    # its first (at rest) write, released by the operator before its second (the add to a busy key)
    other = LimiterTable(tables["markers"], boto3.client("dynamodb"))
    meanwhile = [lambda: other.reserve("partner", "k", T0, 1.0), lambda: other.release("partner", "k")]
    table = LimiterTable(tables["markers"], Interfering(boto3.client("dynamodb"), meanwhile))
    # When it reserves
    reservation = table.reserve("partner", "k", T0, 1.0)
    # Then the second write makes the key gone afresh: its job starts now, in two writes, and nothing is raised
    assert (reservation.free_before, reservation.writes) == (T0, 2)
    # And the key is paced from it: the next reservation starts one unit later
    assert other.reserve("partner", "k", T0, 1.0).free_before == T0 + 1


def test_a_reservation_follows_its_key_through_every_change_between_its_writes(tables):
    # Given another worker writing to the key before each of this worker's first three writes: a reservation (the key
    # busy), its give-back (at rest again), a reservation again (busy)
    other = LimiterTable(tables["markers"], boto3.client("dynamodb"))
    taken: list[Any] = []
    meanwhile = [
        lambda: taken.append(other.reserve("partner", "k", T0, 1.0)),
        lambda: other.give_back("partner", "k", taken[0]),
        lambda: other.reserve("partner", "k", T0, 1.0),
    ]
    table = LimiterTable(tables["markers"], Interfering(boto3.client("dynamodb"), meanwhile))
    # When it reserves
    reservation = table.reserve("partner", "k", T0, 1.0)
    # Then each refused write is followed by the other one, and the fourth takes the unit after the other worker's
    assert (reservation.free_before, reservation.writes) == (T0 + 1, 4)


def test_a_reservation_given_back_leaves_the_key_as_it_found_it_unless_another_came_after(table):
    # Given a key at rest, and a job's reservation of it
    first = table.reserve("partner", "k", T0, 1.0)
    # When it is given back, Then the next reservation starts where the first did
    assert table.give_back("partner", "k", first)
    second = table.reserve("partner", "k", T0, 1.0)
    assert second.free_before == T0
    # Given another reservation after the second
    table.reserve("partner", "k", T0, 1.0)
    # When the second is given back, Then it is refused: a job behind it holds its start, the units stay spent
    assert not table.give_back("partner", "k", second)
    assert table.reserve("partner", "k", T0, 1.0).free_before == T0 + 2


def test_a_reservation_given_back_on_a_busy_key_leaves_its_slot_to_the_next(table):
    # Given a busy key (one reservation ahead) and a job's reservation behind it
    table.reserve("partner", "k", T0, 1.0)
    mine = table.reserve("partner", "k", T0, 1.0)
    assert mine.free_before == T0 + 1
    # When it is given back, Then the next reservation takes the same slot, a unit after the first
    assert table.give_back("partner", "k", mine)
    assert table.reserve("partner", "k", T0, 1.0).free_before == T0 + 1


def test_a_key_at_rest_given_back_lets_a_job_start_within_the_same_millisecond(table):
    # Given a key at rest reserved, and given back, part way into a millisecond
    now = T0 + 0.0004
    assert table.give_back("partner", "k", table.reserve("partner", "k", now, 1.0))
    # When another job comes in that same millisecond, Then it starts now: the key is at rest, not busy till the
    # millisecond's end
    assert table.reserve("partner", "k", now, 1.0).free_before == now


def test_a_key_released_in_this_process_is_guessed_at_rest_and_found_so_takes_one_write(tables, table):
    # Given a busy key (its last answer here: busy), which this process's operator releases
    for _ in range(2):
        table.reserve("partner", "k", T0, 1.0)
    assert table.release("partner", "k")
    # And another worker's reservation on it since, whose unit is spent by the time the next job comes
    LimiterTable(tables["markers"], boto3.client("dynamodb")).reserve("partner", "k", T0, 1.0)
    # When the next job reserves here, 10 s later
    reservation = table.reserve("partner", "k", T0 + 10, 1.0)
    # Then the key is at rest, as the release left it, and one write takes it: no refused ADD of a busy key first
    assert (reservation.free_before, reservation.writes) == (T0 + 10, 1)


def test_a_key_released_by_another_process_is_made_afresh_to_live_a_day_and_its_reservation_given_back(tables, table):
    # Given a key busy in this process's eyes, released by an operator's own process (this process still guesses busy)
    for _ in range(2):
        table.reserve("partner", "k", T0, 1.0)
    assert LimiterTable(tables["markers"], boto3.client("dynamodb")).release("partner", "k")
    # When a job reserves it half a second into a later second
    reservation = table.reserve("partner", "k", T0 + 0.5, 1.0)
    # Then its ADD made the key afresh: the job starts now, in one write, the key free one unit later, and its item
    # lives a day past that unit's whole second (a time to live: whole epoch seconds)
    assert (reservation.free_before, reservation.writes) == (T0 + 0.5, 1)
    item = stored(tables, "partner", "k")
    assert (item["free"], item["expires_at"]) == ({"N": str(1_800_000_001_500)}, {"N": str(1_800_086_401)})
    # And the reservation, given back (its job held by another limiter), leaves the key as it found it: at rest
    assert table.give_back("partner", "k", reservation)
    assert table.reserve("partner", "k", T0 + 0.5, 1.0).free_before == T0 + 0.5
