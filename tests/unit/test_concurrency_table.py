"""A concurrency cap's slots in the markers table (over moto): taken under the limit, refused with the holders when
full, a lapsed holder's slot taken back, given back whatever the map holds."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from converge.store.concurrency import ConcurrencyTable
from converge.store.concurrency_order import Newest

from .conftest import ClientProxy, Racing, sent

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


def test_every_lapsed_holder_is_removed_in_one_write_and_the_slot_taken(tables):
    # Given a cap of two whose both holders' slots lapsed (their processes died), and every call counted
    client = boto3.client("dynamodb")
    table = ConcurrencyTable(tables["markers"], client)
    assert table.take("sync", "k", "dead-1", T0 + 30, 2, T0).taken
    assert table.take("sync", "k", "dead-2", T0 + 31, 2, T0).taken
    calls = sent(client)
    # When another takes a slot once both lapsed
    assert table.take("sync", "k", "next", T0 + 90, 2, T0 + 40).taken
    # Then both were removed in one write between the refused take and the take: the key holds the new one alone
    assert [name for name, _ in calls] == ["UpdateItem", "UpdateItem", "UpdateItem"]
    assert [r.holders for r in table.keys("sync")] == [{"next": T0 + 90}]


def test_a_lapsed_holder_given_back_by_its_own_delivery_meanwhile_still_lets_the_slot_be_taken(tables):
    # Given a cap of one whose holder's slot lapsed at T0 + 30, its delivery still finishing
    raw = ConcurrencyTable(tables["markers"], boto3.client("dynamodb"))
    assert raw.take("sync", "k", "slow", T0 + 30, 1, T0).taken
    # And that delivery giving its slot back just as another operation removes it as lapsed
    racing = Racing(boto3.client("dynamodb"), "REMOVE", lambda: raw.give_back("sync", "k", "slow", T0 + 30))
    table = ConcurrencyTable(tables["markers"], racing)
    # When the other takes a slot, Then the removal that found the holder gone is no error: it takes the slot
    assert table.take("sync", "k", "next", T0 + 90, 1, T0 + 31).taken
    assert [r.holders for r in table.keys("sync")] == [{"next": T0 + 90}]


def test_in_replace_mode_a_request_refused_a_slot_becomes_the_keys_newest_in_one_more_write(tables):
    # Given a key of a replace-mode cap of one, running the request accepted at T0
    client = boto3.client("dynamodb")
    table = ConcurrencyTable(tables["markers"], client)
    assert table.take("render", "k", "op-1", T0 + 30, 1, T0, Newest("op-1", 1_800_000_000_000)).taken
    calls = sent(client)
    # When a request accepted a millisecond later asks for a slot
    newer = table.take("render", "k", "op-2", T0 + 31, 1, T0 + 1, Newest("op-2", 1_800_000_000_001))
    # Then it is refused with the holder, and made the key's newest: two writes, its refused take and that one
    assert (newer.taken, newer.replaced_by, newer.holders) == (False, None, {"op-1": T0 + 30})
    assert [name for name, _ in calls] == ["UpdateItem", "UpdateItem"]
    assert [r.newest for r in table.keys("render")] == ["op-2"]


def test_in_replace_mode_a_request_that_a_newer_one_overtakes_as_it_waits_ends_replaced_by_it(tables):
    # Given a key of a replace-mode cap of one, running the request accepted at T0
    raw = ConcurrencyTable(tables["markers"], boto3.client("dynamodb"))
    assert raw.take("render", "k", "op-1", T0 + 30, 1, T0, Newest("op-1", 1_800_000_000_000)).taken

    # And a request accepted at T0 + 2 that becomes the key's newest just before an older one, refused its slot, does
    def newer_waits() -> None:
        assert not raw.take("render", "k", "op-3", T0 + 32, 1, T0 + 2, Newest("op-3", 1_800_000_002_000)).taken

    racing = Racing(boto3.client("dynamodb"), "SET #n", newer_waits)
    table = ConcurrencyTable(tables["markers"], racing)
    # When the older asks for a slot, Then it is told it was replaced by the newer, which stays the key's newest
    older = table.take("render", "k", "op-2", T0 + 31, 1, T0 + 1, Newest("op-2", 1_800_000_001_000))
    assert (older.taken, older.replaced_by) == (False, "op-3")
    assert [r.newest for r in raw.keys("render")] == ["op-3"]


def item_of(tables, cap: str, key: str) -> dict[str, Any]:
    """The key's item as stored in the markers table."""
    found = boto3.client("dynamodb").get_item(
        TableName=tables["markers"], Key={"pk": {"S": f"running#{cap}"}, "sk": {"S": f"key#{key}"}}
    )
    return found["Item"]


def test_a_keys_item_lives_a_day_past_its_last_slot_taken(table, tables):
    # Given a key's first slot taken, until T0 + 30.5
    assert table.take("sync", "k", "op-1", T0 + 30.5, 2, T0).taken
    # Then its item expires a day past that slot's end (whole seconds), and the slot lapses at its very millisecond
    item = item_of(tables, "sync", "k")
    assert (item["expires_at"], item["holders"]) == (
        {"N": str(int(T0) + 30 + 86_400)},
        {"M": {"op-1": {"N": "1800000030500"}}},
    )
    # When a later slot is taken on it, until T0 + 90, Then the item lives a day past that one
    assert table.take("sync", "k", "op-2", T0 + 90, 2, T0 + 60).taken
    assert item_of(tables, "sync", "k")["expires_at"] == {"N": str(int(T0) + 90 + 86_400)}


class RefusedWithoutItem(ClientProxy):
    """An emulator whose refused writes do not return the item (ReturnValuesOnConditionCheckFailure ignored)."""

    def update_item(self, **request: Any) -> Any:
        try:
            return self._client.update_item(**request)
        except ClientError as exc:
            exc.response.pop("Item", None)
            raise


def test_where_a_refusal_returns_no_item_a_refused_take_reads_the_key_once(tables):
    # Given a cap of one held, over a table whose refusals carry no item, and every call counted
    client = boto3.client("dynamodb")
    table = ConcurrencyTable(tables["markers"], RefusedWithoutItem(client))
    assert table.take("sync", "k", "op-1", T0 + 30, 1, T0).taken
    calls = sent(client)
    # When another operation asks for a slot
    refused = table.take("sync", "k", "op-2", T0 + 40, 1, T0 + 1)
    # Then it is refused with the holder, found by the key's item made already and one consistent read of it
    assert (refused.taken, refused.holders) == (False, {"op-1": T0 + 30})
    assert [name for name, _ in calls] == ["UpdateItem", "UpdateItem", "GetItem"]


def test_a_waiter_noted_forgets_the_stale_ones_it_is_given_but_never_itself(table):
    # Given a key with a holder, and two operations noted waiting on it
    assert table.take("sync", "k", "op-1", T0 + 30, 1, T0).taken
    table.note_waiting("sync", "k", "stale-1", T0 + 10, [])
    table.note_waiting("sync", "k", "stale-2", T0 + 11, [])
    # When a third is noted, given both as stale, Then both are forgotten and it is noted
    table.note_waiting("sync", "k", "op-3", T0 + 100, ["stale-1", "stale-2"])
    assert table.waiting_on("sync", "k") == {"op-3": T0 + 100}
    # When it is noted again, given itself among the stale, Then it stays noted, with its new time
    table.note_waiting("sync", "k", "op-3", T0 + 200.5, ["op-3"])
    assert table.waiting_on("sync", "k") == {"op-3": T0 + 200.5}


def test_in_replace_mode_a_request_that_loses_a_keys_first_use_to_another_takes_the_slot_left(tables):
    # Given a replace-mode cap of two on a key never used, and a request accepted at T0 making its item just before
    # a newer one, accepted a millisecond later, would
    raw = ConcurrencyTable(tables["markers"], boto3.client("dynamodb"))

    def older_first() -> None:
        assert raw.take("render", "k", "op-1", T0 + 30, 2, T0, Newest("op-1", 1_800_000_000_000)).taken

    table = ConcurrencyTable(tables["markers"], Racing(boto3.client("dynamodb"), "SET #h = :holders", older_first))
    # When the newer asks for a slot, Then it takes the one left, and is the key's newest
    assert table.take("render", "k", "op-2", T0 + 31, 2, T0, Newest("op-2", 1_800_000_000_001)).taken
    (running,) = raw.keys("render")
    assert (running.holders, running.newest) == ({"op-1": T0 + 30, "op-2": T0 + 31}, "op-2")


def test_in_replace_mode_a_request_sent_again_passes_only_as_the_keys_newest(table):
    # Given a replace-mode key whose newest request (accepted at T0) held its slot and gave it back
    assert table.take("render", "k", "op-1", T0 + 30, 1, T0, Newest("op-1", 1_800_000_000_000)).taken
    table.give_back("render", "k", "op-1", T0 + 30)
    # When another request whose acceptance is unknown (a message sent again) asks for the free slot
    # Then it is refused: it is not the key's newest
    assert not table.take("render", "k", "op-2", T0 + 31, 1, T0 + 1, Newest("op-2", 0)).taken
    # And the newest's own message sent again (its acceptance unknown too) takes the slot
    assert table.take("render", "k", "op-1", T0 + 32, 1, T0 + 2, Newest("op-1", 0)).taken
    # And so does the newest itself, asking again with its acceptance known, once the slot is free
    table.give_back("render", "k", "op-1", T0 + 32)
    assert table.take("render", "k", "op-1", T0 + 33, 1, T0 + 3, Newest("op-1", 1_800_000_000_000)).taken
    assert [r.newest for r in table.keys("render")] == ["op-1"]


def test_a_request_that_loses_a_keys_first_use_to_another_takes_the_slot_left(tables):
    # Given a cap of two on a key never used, another request making its item just before this one would, and every
    # call of this one counted
    raw = ConcurrencyTable(tables["markers"], boto3.client("dynamodb"))

    def other_first() -> None:
        assert raw.take("sync", "k", "op-1", T0 + 30, 2, T0).taken

    client = boto3.client("dynamodb")
    table = ConcurrencyTable(tables["markers"], Racing(client, "SET #h = :holders", other_first))
    calls = sent(client)
    # When this one asks for a slot, Then it takes the one left: both hold one
    assert table.take("sync", "k", "op-2", T0 + 31, 2, T0).taken
    assert [r.holders for r in raw.keys("sync")] == [{"op-1": T0 + 30, "op-2": T0 + 31}]
    # And it cost its refused take, its refused making of the item, one read of the item and the take
    assert [name for name, _ in calls] == ["UpdateItem", "UpdateItem", "GetItem", "UpdateItem"]


def test_in_replace_mode_a_request_sent_again_on_a_paused_key_with_no_newest_waits_on_the_pause_in_one_write(tables):
    # Given a replace-mode cap's key an operator paused before any request came (it has no newest), one request
    # noted waiting on it, and every call counted
    client = boto3.client("dynamodb")
    table = ConcurrencyTable(tables["markers"], client)
    assert table.pause("render", "k", "ops@example.com", T0)
    table.note_waiting("render", "k", "op-0", T0 + 300, [])
    calls = sent(client)
    # When a request whose acceptance is unknown (its message sent again) asks for a slot
    refused = table.take("render", "k", "op-1", T0 + 30, 1, T0 + 5, Newest("op-1", 0))
    # Then it is refused by the pause, told since when and who waits, in its one refused take; it is not the newest
    assert (refused.taken, refused.replaced_by, refused.paused_by) == (False, None, "ops@example.com")
    assert (refused.paused_at, refused.waiting) == (T0, {"op-0": T0 + 300})
    assert [name for name, _ in calls] == ["UpdateItem"]
    assert [r.newest for r in table.keys("render")] == [None]


class EveryTakeRaced(ClientProxy):
    """The markers table as a key raced by other writers at every write: each take is refused, the item it returns
    showing one holder of a cap of two (a slot free again by the time the refusal is read)."""

    def __init__(self, client: Any, holder_until_ms: int) -> None:
        super().__init__(client)
        self.takes = 0
        self._item = {"holders": {"M": {"op-other": {"N": str(holder_until_ms)}}}}

    def update_item(self, **request: Any) -> Any:
        self.takes += 1
        error = {"Error": {"Code": "ConditionalCheckFailedException", "Message": "The conditional request failed"}}
        raise ClientError({**error, "Item": self._item}, "UpdateItem")


def test_a_take_whose_key_keeps_moving_under_it_gives_up_after_five_tries_with_the_holders_it_last_saw(tables):
    # Given a key other writers move at each of this taker's writes: each refusal shows a slot free again
    racing = EveryTakeRaced(boto3.client("dynamodb"), holder_until_ms=int((T0 + 30) * 1000))
    table = ConcurrencyTable(tables["markers"], racing)
    # When a request asks for a slot
    taken = table.take("sync", "k", "op-1", T0 + 60, 2, T0)
    # Then it stops after five tries, bounded whatever the others do, refused with the live holder it last saw (its
    # slot's end in seconds), to be held and try again later
    assert racing.takes == 5
    assert (taken.taken, taken.holders) == (False, {"op-other": T0 + 30})


def test_an_operations_own_slot_ending_this_millisecond_is_lapsed_and_taken_again(table):
    # Given an operation's slot that ends at T0 + 30 (its delivery died)
    assert table.take("sync", "k", "op-1", T0 + 30, 1, T0).taken
    # When the operation asks again at that very millisecond, Then its slot is not live: it is taken back and taken
    again = table.take("sync", "k", "op-1", T0 + 60, 1, T0 + 30)
    assert (again.taken, again.already) == (True, False)
    (running,) = table.keys("sync")
    assert running.live(T0 + 30) == {"op-1": T0 + 60}


def test_a_paused_keys_refusal_lists_only_the_slots_still_live(table):
    # Given a key whose holder's slot ends at T0 + 30, paused by an operator
    assert table.take("sync", "k", "op-1", T0 + 30, 1, T0).taken
    assert table.pause("sync", "k", "ops@example.com", T0 + 1)
    # When another operation asks at the millisecond that slot ends, Then it is refused by the pause, and the slot
    # that ends now is not listed among the holders (a paused key's lapsed slots are left as they are)
    refused = table.take("sync", "k", "op-2", T0 + 60, 1, T0 + 30)
    assert (refused.taken, refused.paused_by, refused.holders) == (False, "ops@example.com", {})


def test_a_take_that_gives_up_lists_no_slot_ending_at_that_very_millisecond(tables):
    # Given a key whose one holder's slot ends at T0, raced at every write (its removal refused too, each time)
    racing = EveryTakeRaced(boto3.client("dynamodb"), holder_until_ms=int(T0 * 1000))
    table = ConcurrencyTable(tables["markers"], racing)
    # When a request asks for a slot at T0
    taken = table.take("sync", "k", "op-1", T0 + 60, 2, T0)
    # Then it gives up refused, and the slot ending now is not listed among the live holders
    assert (taken.taken, taken.holders) == (False, {})
