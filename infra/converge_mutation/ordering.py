"""A pytest plugin for the mutation run: the fast tiers' tests in tier order, unit first.

mutmut runs the tests that reach a mutated function with `-x`, in no particular order. A mutant a
unit test kills should not first wait for a local-cloud deployment, so unit tests go first; the
order within a tier is the collection order.
"""

from __future__ import annotations

from typing import Any

TIERS = ("tests/unit/", "tests/integration/")


def _tier(nodeid: str) -> int:
    for index, prefix in enumerate(TIERS):
        if nodeid.startswith(prefix):
            return index
    return len(TIERS)


def pytest_collection_modifyitems(session: Any, config: Any, items: list[Any]) -> None:
    items.sort(key=lambda item: _tier(item.nodeid))  # stable: collection order within a tier
