"""A batch id, a child key or a batch name: what is accepted, and what the error says of one that is not."""

from __future__ import annotations

import pytest

from converge.model.batches import check_name
from converge.model.errors import InvalidMessage

RULE = "use 1-12 characters from letters, digits and . _ - starting with a letter or digit"


def test_a_name_of_exactly_the_limit_is_accepted_and_one_longer_is_not():
    assert check_name("batch id", "a" * 12, 12) == "a" * 12
    with pytest.raises(InvalidMessage) as refused:
        check_name("batch id", "a" * 13, 12)
    assert str(refused.value) == f"batch id {'a' * 13!r} is invalid: {RULE}"


@pytest.mark.parametrize("value", [123, ["a"], None, b"ab"])
def test_a_name_that_is_not_text_is_invalid_not_an_error_of_its_own(value):
    with pytest.raises(InvalidMessage) as refused:
        check_name("child key", value, 12)
    assert str(refused.value) == f"child key {str(value)!r} is invalid: {RULE}"


def test_the_error_shows_forty_characters_of_a_long_value_and_says_it_was_cut():
    forty = "x:" * 20
    with pytest.raises(InvalidMessage) as refused:
        check_name("batch id", forty, 12)
    assert str(refused.value) == f"batch id {forty!r} is invalid: {RULE}"
    with pytest.raises(InvalidMessage) as refused:
        check_name("batch id", forty + "y", 12)
    assert str(refused.value) == f"batch id {forty + '…'!r} is invalid: {RULE}"
