"""The batch rows' arithmetic: the hottest item's write units in any one second, with the counts placed at a given
rate in the order the meter logged them, and each row's two targets (figures given here; nothing is run)."""

from __future__ import annotations

from converge_bench.batches import EXTRA_NOTE, peak_item_rate, targets

SHARD_0, SHARD_1, RECORD = "batches {'pk': 'b#s0'}", "batches {'pk': 'b#s1'}", "batches {'pk': 'b'}"


def test_counts_spread_over_two_shards_at_the_rate_take_half_each() -> None:
    # Given 4,000 counts alternating over two shards, 2 write units each
    writes = [(SHARD_0 if index % 2 == 0 else SHARD_1, 2.0) for index in range(4_000)]
    # When they are placed at 1,000 counts a second (4 s in all)
    item, units = peak_item_rate(writes, "#s", rate=1_000)
    # Then the hottest shard takes 500 counts in a second: 1,000 write units
    assert item in (SHARD_0, SHARD_1)
    assert units == 1_000


def test_a_whole_shards_life_inside_one_second_is_its_total() -> None:
    # Given one shard made (1 unit) and counting 250 children (2 each), and the record written twice
    writes = [(SHARD_0, 1.0), (RECORD, 1.0), *[(SHARD_0, 2.0)] * 250, (RECORD, 4.0)]
    # When the counts come at 5,000 a second (250 in 0.05 s)
    item, units = peak_item_rate(writes, "#s", rate=5_000)
    # Then the shard's whole life falls in one second: 501 units, and it is the hottest item
    assert (item, units) == (SHARD_0, 501)


def test_writes_a_second_apart_are_not_in_one_window() -> None:
    # Given a shard counted once, then 2,000 counts on another shard, then the first shard again
    writes = [(SHARD_0, 2.0), *[(SHARD_1, 2.0)] * 2_000, (SHARD_0, 2.0)]
    # When the counts come at 1,000 a second (the first shard's two writes 2 s apart)
    item, units = peak_item_rate(writes, "#s", rate=1_000)
    # Then the first shard never takes more than 2 units in a second; the other takes 1,000 counts' worth
    assert (item, units) == (SHARD_1, 2_000)


def test_each_row_has_its_two_targets_and_a_failed_one_says_why() -> None:
    # Given a row at +3 write units a child, its hottest item at 501 units a second
    row = {
        "children": 1_000,
        "extra_write_units_per_child": 3.03,
        "extra_write_units_pass": False,
        "extra_write_units_note": EXTRA_NOTE,
        "peak_item_write_units_per_second": 501.0,
        "peak_item_pass": True,
    }
    found = targets({"rows": [row]})
    # Then the cost target fails with its reason, and the hot-item target passes, each with its limit
    assert [(t["name"], t["value"], t["limit"], t["pass"]) for t in found] == [
        ("batch of 1,000: write units per child over a plain job", 3.03, 2.0, False),
        (
            "batch of 1,000: peak write units a second on one item, children final at 5,000 a second",
            501.0,
            1000.0,
            True,
        ),
    ]
    assert "transaction" in found[0]["note"]
    assert targets(None) == []
