"""Every kept break in tests/explore/breaks/ still applies to today's code, and says what the explorer must raise.

`make explore-power` brings each back in a copy of the tree and lets the explorer find it; a refactor that moves
the lines a patch reverts would silently drop that break from the measurement, so it fails here first, by name.
"""

from __future__ import annotations

import inspect

import pytest

from . import power, promise

KEPT = power.patches()
BREAK_KINDS = {name for name, kind in inspect.getmembers(promise, inspect.isclass) if issubclass(kind, promise.Broken)}


def test_the_kept_breaks_are_there() -> None:
    # Given the breaks directory / Then it holds every break fixed so far, each by its own name
    assert len(KEPT) >= 15
    assert len({patch.name for patch in KEPT}) == len(KEPT)


@pytest.mark.parametrize("patch", KEPT, ids=[patch.name for patch in KEPT])
def test_a_kept_break_applies_to_the_current_tree(patch: power.Patch) -> None:
    # Given a kept break / When `git apply --check` tries it against the working tree (nothing is changed)
    applied = power.apply(patch, power.ROOT, check=True)
    # Then it applies: its lines are still where it reverts them (else re-make it from the fix, see
    # docs/explorer-power.md)
    assert applied.returncode == 0, f"{patch.path.name} no longer applies to the tree:\n{applied.stderr}"


@pytest.mark.parametrize("patch", KEPT, ids=[patch.name for patch in KEPT])
def test_a_kept_break_names_kinds_the_explorer_raises(patch: power.Patch) -> None:
    # Given a kept break's header / Then every kind it expects is a break of tests/explore/promise.py
    assert patch.expect
    assert set(patch.expect) <= BREAK_KINDS, f"{patch.path.name}: no such break kind {set(patch.expect) - BREAK_KINDS}"
