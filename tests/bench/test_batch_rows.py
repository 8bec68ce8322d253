"""The batch rows' arithmetic: the hottest item's write units in any one second, with the children placed at a given
rate in the order the meter logged their first writes, and each row's two targets (figures given here; nothing is
run)."""

from __future__ import annotations

from converge_bench.batches import EXTRA_NOTE, peak_item_rate, targets

SHARD_0, SHARD_1, RECORD = "batches {'pk': 'b#s0'}", "batches {'pk': 'b#s1'}", "batches {'pk': 'b'}"


def child(index: int) -> str:
    return f'state {{"operation_id": {{"S": "b::0:c{index}"}}}}'


def test_children_begun_at_the_rate_place_the_writes_between_them() -> None:
    # Given 4,000 children, each written twice (its lease, its settle), and a shard write after every 100 of them
    writes: list[tuple[str, float]] = []
    for index in range(4_000):
        writes += [(child(index), 1.0), (child(index), 1.0)]
        if index % 100 == 99:
            writes.append((SHARD_0 if index % 200 == 99 else SHARD_1, 1.0))
    # When the children begin at 1,000 a second (4 s in all)
    item, units = peak_item_rate(writes, '"b::', rate=1_000)
    # Then the hottest item is a shard written 5 times in a second (1,000 children, every other 100 on it)
    assert item in (SHARD_0, SHARD_1)
    assert units == 5


def test_a_childs_second_write_and_the_callbacks_do_not_move_the_clock() -> None:
    # Given one child written twice, the callback's record written 3,000 times, and the batch's record twice
    writes = [(child(0), 1.0), (RECORD, 1.0), (child(0), 1.0), *[('state {"S": "b::callback"}', 1.0)] * 3_000]
    writes.append((RECORD, 4.0))
    # When children begin at 5,000 a second
    item, units = peak_item_rate(writes, '"b::', rate=5_000)
    # Then all of it falls at the first child's time: the callback's record is the hottest, with all its writes
    assert (item, units) == ('state {"S": "b::callback"}', 3_000)


def test_writes_a_second_apart_are_not_in_one_window() -> None:
    # Given a shard written, then 2,000 children begun (one write each), then the shard again
    writes = [(SHARD_0, 2.0), *[(child(index), 1.0) for index in range(2_000)], (SHARD_0, 2.0)]
    # When children begin at 1,000 a second (the shard's two writes 2 s apart)
    item, units = peak_item_rate(writes, '"b::', rate=1_000)
    # Then the shard never takes more than 2 units in a second; no child's record more than 1
    assert (item, units) == (SHARD_0, 2.0)


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
        ("batch of 1,000: write units per child over a plain job", 3.03, 1.0, False),
        (
            "batch of 1,000: peak write units a second on one item, children final at 5,000 a second",
            501.0,
            1000.0,
            True,
        ),
    ]
    assert "stream" in found[0]["note"]
    assert targets(None) == []
