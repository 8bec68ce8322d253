"""EventBridge pattern matching, shared by Lambda FilterCriteria and EventBridge rules."""

from __future__ import annotations

import pytest

from localcloud.patterns import PatternError, matches, matches_any

EVENT = {
    "source": "aws.ssm",
    "detail": {"name": "/converge/dev/toggles/a", "operation": "Update", "size": 42, "tags": ["x", "y"]},
    "dynamodb": {"NewImage": {"state": {"S": "ACCEPTED"}, "redispatch": {"S": "t"}}},
}


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        ({"source": ["aws.ssm"]}, True),
        ({"source": ["aws.events"]}, False),
        ({"detail": {"name": [{"prefix": "/converge/dev/toggles/"}]}}, True),
        ({"detail": {"name": [{"prefix": "/converge/prod/"}]}}, False),
        ({"detail": {"name": [{"suffix": "/a"}]}}, True),
        ({"detail": {"operation": [{"equals-ignore-case": "update"}]}}, True),
        ({"detail": {"operation": [{"anything-but": ["Delete"]}]}}, True),
        ({"detail": {"operation": [{"anything-but": "Update"}]}}, False),
        ({"detail": {"name": [{"anything-but": {"prefix": "/converge/"}}]}}, False),
        ({"detail": {"size": [{"numeric": [">", 40, "<=", 42]}]}}, True),
        ({"detail": {"size": [{"numeric": ["<", 10]}]}}, False),
        ({"detail": {"size": [42]}}, True),
        ({"detail": {"tags": ["y"]}}, True),
        ({"detail": {"missing": [{"exists": False}]}}, True),
        ({"detail": {"missing": [{"exists": True}]}}, False),
        ({"detail": {"name": [{"exists": True}]}}, True),
        ({"detail": {"missing": ["x"]}}, False),
        ({"nested": {"absent": [{"exists": False}]}}, True),
        ({"nested": {"absent": ["x"]}}, False),
        ({"dynamodb": {"NewImage": {"redispatch": {"S": [{"exists": True}]}}}}, True),
        ({"dynamodb": {"NewImage": {"state": {"S": ["ACCEPTED"]}, "other": {"S": [{"exists": True}]}}}}, False),
        ({"detail": {"name": [{"wildcard": "/converge/*/toggles/*"}]}}, True),
    ],
)
def test_pattern_matching(pattern: dict, expected: bool) -> None:
    # Given a pattern, when it is matched against the event, then it matches exactly as EventBridge would
    assert matches(pattern, EVENT) is expected


def test_filters_are_ored() -> None:
    assert matches_any([{"source": ["nope"]}, {"source": ["aws.ssm"]}], EVENT)
    assert not matches_any([{"source": ["nope"]}], EVENT)


def test_unsupported_syntax_is_an_error_not_a_silent_mismatch() -> None:
    with pytest.raises(PatternError):
        matches({"$or": [{"source": ["aws.ssm"]}]}, EVENT)
    with pytest.raises(PatternError):
        matches({"source": [{"cidr": "10.0.0.0/24"}]}, EVENT)
