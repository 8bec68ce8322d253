"""Item sizes and capacity units, checked against hand-computed cases from AWS's sizing rules."""

from __future__ import annotations

import pytest

from converge_bench import capacity


@pytest.mark.parametrize(
    ("item", "size"),
    [
        # a string: name bytes + UTF-8 bytes
        ({"name": {"S": "abc"}}, 4 + 3),
        ({"é": {"S": "ü"}}, 2 + 2),
        # numbers: ceil(significant digits / 2) + 1, +1 when negative; zeros trimmed
        ({"n": {"N": "123"}}, 1 + 3),
        ({"n": {"N": "1000"}}, 1 + 2),
        ({"n": {"N": "-1.50"}}, 1 + 3),
        ({"n": {"N": "12345678901234567890"}}, 1 + 11),
        # booleans and nulls: one byte
        ({"ok": {"BOOL": True}, "none": {"NULL": True}}, 2 + 1 + 4 + 1),
        # binary: raw bytes (the wire form is base64)
        ({"b": {"B": b"\x00\x01\x02"}}, 1 + 3),
        ({"b": {"B": "AAEC"}}, 1 + 3),
        # a map: 3 bytes + per element (1 + key + value)
        ({"m": {"M": {"a": {"S": "xy"}}}}, 1 + 3 + (1 + 1 + 2)),
        # a list: 3 bytes + per element (1 + value)
        ({"l": {"L": [{"S": "a"}, {"N": "1"}]}}, 1 + 3 + (1 + 1) + (1 + 2)),
        ({"empty": {"M": {}}}, 5 + 3),
        # sets: the sum of their elements
        ({"ss": {"SS": ["ab", "c"]}}, 2 + 3),
    ],
)
def test_item_sizes_follow_the_published_rules(item: dict, size: int) -> None:
    assert capacity.item_size(item) == size


def test_a_write_costs_one_unit_per_started_kilobyte_of_the_larger_image() -> None:
    # Given items before and after a write
    # Then the larger one decides, rounded up to whole KB, at least one unit
    assert capacity.write_units(0, 1) == 1
    assert capacity.write_units(0, 1024) == 1
    assert capacity.write_units(0, 1025) == 2
    assert capacity.write_units(2_000, 100) == 2  # an update that shrinks the item
    assert capacity.write_units(0, 0) == 1  # a delete of nothing, or a failed condition on no item
    assert capacity.write_units(500, 900, transactional=True) == 2


def test_reads_cost_per_started_4_kb_and_eventual_consistency_halves_them() -> None:
    assert capacity.read_units(0) == 1.0  # an item that is not there still costs a read
    assert capacity.read_units(4_096) == 1.0
    assert capacity.read_units(4_097) == 2.0
    assert capacity.read_units(4_097, consistent=False) == 1.0
    assert capacity.read_units(100, transactional=True) == 2.0


def test_a_query_rounds_the_sum_of_its_items_once() -> None:
    # Two 3,000-byte items: 6,000 bytes -> two 4 KB blocks -> one unit eventually consistent
    assert capacity.query_read_units([3_000, 3_000], consistent=False) == 1.0
    # Fifty 150-byte index entries: 7,500 bytes -> two blocks
    assert capacity.query_read_units([150] * 50, consistent=True) == 2.0
