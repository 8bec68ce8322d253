"""An operator's writes on a concurrency cap's key, as the item records them (over moto): a pause (who and when, the
item kept while paused), its release (who, and a day to live again), and a slot freed whose holder is gone. Each
answers whether it changed anything, and a write that changes nothing leaves the item as it was."""

from __future__ import annotations

from typing import Any

import boto3
import pytest

from converge.store.concurrency import RUNNING_PK, ConcurrencyTable
from converge.store.concurrency_operator import KEPT_SECONDS
from converge.store.flow_keys import key_item

T0 = 1_800_000_000.25


@pytest.fixture
def table(tables) -> ConcurrencyTable:
    return ConcurrencyTable(tables["markers"], boto3.client("dynamodb"))


@pytest.fixture
def stored(tables):
    """The key's item as the table holds it (None when there is none)."""
    client = boto3.client("dynamodb")

    def read(cap: str, key: str) -> dict[str, Any] | None:
        found = client.get_item(TableName=tables["markers"], Key=key_item(RUNNING_PK + cap, key), ConsistentRead=True)
        return found.get("Item")

    return read


def test_a_pause_records_who_and_when_keeps_the_holders_and_the_item_while_paused(table, stored):
    # Given a key holding one slot, its item set to expire a day after it
    assert table.take("sync", "k", "op-1", T0 + 30, 2, T0).taken
    assert "expires_at" in stored("sync", "k")
    # When an operator pauses it
    assert table.pause("sync", "k", "ops@example.com", T0 + 1)
    # Then the item says who paused it and when (whole milliseconds), its holder is kept, and it no longer expires
    item = stored("sync", "k")
    assert item["paused_by"] == {"S": "ops@example.com"}
    assert item["paused_at"] == {"N": str(int((T0 + 1) * 1000))}
    assert set(item["holders"]["M"]) == {"op-1"}
    assert "expires_at" not in item
    # And the listing shows the key paused by that operator
    (running,) = table.keys("sync")
    assert running.paused_by == "ops@example.com"


def test_a_pause_of_a_key_never_used_makes_its_item_with_no_holder(table, stored):
    # Given a key no job has used
    # When an operator pauses it
    assert table.pause("sync", "new", "ops@example.com", T0)
    # Then its item holds an empty map of holders, so the first take finds the key made (and paused)
    item = stored("sync", "new")
    assert item["holders"] == {"M": {}}
    taken = table.take("sync", "new", "op-1", T0 + 30, 2, T0)
    assert (taken.taken, taken.paused_by) == (False, "ops@example.com")


def test_a_second_pause_changes_nothing_and_says_so(table, stored):
    # Given a key paused by one operator
    assert table.pause("sync", "k", "first@example.com", T0)
    before = stored("sync", "k")
    # When another pauses it again, Then the answer is False and the first pause stands as it was
    assert table.pause("sync", "k", "second@example.com", T0 + 60) is False
    assert stored("sync", "k") == before


def test_a_release_records_who_and_lets_the_item_expire_a_day_later(table, stored):
    # Given a paused key
    assert table.pause("sync", "k", "ops@example.com", T0)
    # When an operator releases it
    assert table.resume("sync", "k", "lead@example.com", T0 + 100)
    # Then the pause is gone, the release is recorded, and the item expires a day after the release
    item = stored("sync", "k")
    assert "paused_by" not in item and "paused_at" not in item
    assert item["released_by"] == {"S": "lead@example.com"}
    assert item["expires_at"] == {"N": str(int(T0) + 100 + KEPT_SECONDS)}
    # And the next take passes
    assert table.take("sync", "k", "op-1", T0 + 130, 1, T0 + 100).taken


def test_releasing_a_key_not_paused_changes_nothing_and_says_so(table, stored):
    # Given a key in use, never paused
    assert table.take("sync", "k", "op-1", T0 + 30, 1, T0).taken
    before = stored("sync", "k")
    # When an operator releases it, Then the answer is False and the item is as it was
    assert table.resume("sync", "k", "ops@example.com", T0 + 5) is False
    assert stored("sync", "k") == before
    # And a key never used is not made by a release
    assert table.resume("sync", "never", "ops@example.com", T0 + 5) is False
    assert stored("sync", "never") is None


def test_a_slot_freed_by_an_operator_is_that_operations_alone_and_only_once(table, stored):
    # Given a key whose two slots are held (one of them by a holder that is gone)
    assert table.take("sync", "k", "gone", T0 + 30, 2, T0).taken
    assert table.take("sync", "k", "live", T0 + 31, 2, T0).taken
    # When an operator frees the gone holder's slot
    assert table.release_slot("sync", "k", "gone")
    # Then only that slot is free: the other holder keeps its own
    assert set(stored("sync", "k")["holders"]["M"]) == {"live"}
    # And freeing it again, or a slot on a key never used, changes nothing and says so
    assert table.release_slot("sync", "k", "gone") is False
    assert table.release_slot("sync", "never", "gone") is False
    assert stored("sync", "never") is None
