"""A concurrency cap's slots in the markers table (over moto): taken under the limit, refused with the holders when
full, a lapsed holder's slot taken back, given back whatever the map holds."""

from __future__ import annotations

import boto3
import pytest

from converge.store.concurrency import ConcurrencyTable

from .conftest import sent

T0 = 1_800_000_000.0


@pytest.fixture
def table(tables) -> ConcurrencyTable:
    return ConcurrencyTable(tables["markers"], boto3.client("dynamodb"))


def test_slots_are_taken_up_to_the_limit_and_the_next_is_refused_with_the_holders(table):
    # Given a cap of two on a key never used
    # When three operations take a slot at once
    taken = [table.take("sync", "k", f"op-{n}", T0 + 30 + n, 2, T0) for n in range(3)]
    # Then two hold one, and the third is refused with the two holders and when each slot lapses
    assert [t.taken for t in taken] == [True, True, False]
    assert taken[2].holders == {"op-0": T0 + 30, "op-1": T0 + 31}
    # And the key is listed with both
    (running,) = table.keys("sync")
    assert (running.key, running.live(T0)) == ("k", {"op-0": T0 + 30, "op-1": T0 + 31})


def test_a_slot_costs_one_write_once_the_key_exists_and_two_on_its_first_use(tables):
    # Given the markers table, and every call to it counted
    client = boto3.client("dynamodb")
    table = ConcurrencyTable(tables["markers"], client)
    calls = sent(client)
    # When a key's first slot is taken, then given back, then taken again
    assert table.take("sync", "first", "op-1", T0 + 30, 1, T0).taken
    first = [name for name, _ in calls]
    calls.clear()
    table.give_back("sync", "first", "op-1", T0 + 30)
    assert table.take("sync", "first", "op-2", T0 + 30, 1, T0).taken
    # Then the first take made the key's item (a refused take, then the map holding its slot), and after it each
    # take and each give-back is one write; nothing is read
    assert first == ["UpdateItem", "UpdateItem"]
    assert [name for name, _ in calls] == ["UpdateItem", "UpdateItem"]


def test_a_lapsed_holders_slot_is_taken_back_and_a_live_one_of_the_same_operation_is_not_taken_twice(table):
    # Given a cap of one held by an operation whose slot lapses at T0 + 30 (its holder died)
    assert table.take("sync", "k", "dead", T0 + 30, 1, T0).taken
    # When the same operation comes again while its slot is live, Then it is told so, taking nothing
    again = table.take("sync", "k", "dead", T0 + 40, 1, T0 + 5)
    assert (again.taken, again.already) == (False, True)
    # When another comes before the slot lapses, Then it is refused
    assert not table.take("sync", "k", "next", T0 + 60, 1, T0 + 29).taken
    # When it comes once the slot has lapsed, Then it takes it back, and the dead holder is gone
    assert table.take("sync", "k", "next", T0 + 60, 1, T0 + 30).taken
    (running,) = table.keys("sync")
    assert running.holders == {"next": T0 + 60}


def test_giving_back_a_slot_not_held_or_of_a_key_never_used_changes_nothing(table):
    # Given a key with one holder
    assert table.take("sync", "k", "op-1", T0 + 30, 1, T0).taken
    # When an operation holding nothing, and one of a key never used, give back
    assert not table.give_back("sync", "k", "op-2", T0 + 30)
    assert not table.give_back("sync", "never", "op-1", T0 + 30)
    # Then the holder keeps its slot, and no item was made for the unused key
    assert [(r.key, r.holders) for r in table.keys("sync")] == [("k", {"op-1": T0 + 30})]


def test_a_delivery_taken_over_gives_back_nothing_of_its_successors_slot(table):
    # Given a cap of one held by a delivery whose lease (and slot) lapses at T0 + 30 while it still works
    assert table.take("sync", "k", "op-1", T0 + 30, 1, T0).taken
    # And another delivery of the same operation that took over once it lapsed, its slot until T0 + 70
    assert table.take("sync", "k", "op-1", T0 + 70, 1, T0 + 40).taken
    # When the first delivery ends and gives back the slot it took
    given = table.give_back("sync", "k", "op-1", T0 + 30)
    # Then nothing is given back: the delivery that runs on keeps the key's slot, and no other operation takes it
    assert not given
    assert table.keys("sync")[0].holders == {"op-1": T0 + 70}
    assert not table.take("sync", "k", "op-2", T0 + 100, 1, T0 + 45).taken
    # When the successor ends, Then its slot is free
    assert table.give_back("sync", "k", "op-1", T0 + 70)
    assert table.take("sync", "k", "op-2", T0 + 100, 1, T0 + 46).taken
