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


def test_a_batch_ended_by_a_history_drawn_differently_is_no_break_and_is_counted() -> None:
    from hypothesis.errors import FlakyFailure, FlakyStrategyDefinition

    from .report import batches_drawn_differently
    from .test_explore import _generation_only

    # Given what Hypothesis raises when a history's draws differ between two runs of it, alone or grouped, and what
    # it raises for a break that did not replay (a failure, then a pass)
    drawn = FlakyStrategyDefinition("Inconsistent data generation!")
    unreplayed = FlakyFailure("a break that passed when run again", [promise.WokenBeforeItsTime("h1-1 PAUSED")])
    # Then only the first is the explorer's own (the run goes on with its next batch); a break that did not replay
    # is still a break
    assert _generation_only(drawn) and _generation_only(ExceptionGroup("batch", [drawn, drawn]))
    assert not _generation_only(unreplayed)
    assert not _generation_only(ExceptionGroup("batch", [drawn, promise.WokenBeforeItsTime("h1-1 PAUSED")]))
    # And the power report counts the batches so ended from a run's output
    output = (
        "explore: batch 0, seed 1\nexplore: batch 0 ended by a history drawn differently twice\n"
        "explore: batch 1, seed 2\n"
    )
    assert batches_drawn_differently(output) == 1 and batches_drawn_differently("explore: batch 0, seed 1\n") == 0
