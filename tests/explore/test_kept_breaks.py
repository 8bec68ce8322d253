"""Every kept break in tests/explore/breaks/ still applies to today's code, and says what the explorer must raise.

`make explore-power` brings each back in a copy of the tree and lets the explorer find it; a refactor that moves
the lines a patch reverts would silently drop that break from the measurement, so it fails here first, by name.
"""

from __future__ import annotations

import inspect
import json

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, precondition, rule

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


class _DependsOnTheOutside(RuleBasedStateMachine):
    """A machine whose precondition reads a counter outside the history: its draws differ from run to run."""

    calls = 0

    @rule()
    def steady(self) -> None:
        pass

    @precondition(lambda self: _counted() % 3 != 0)
    @rule(x=st.integers(0, 10))
    def outside(self, x: int) -> None:
        pass


def _counted() -> int:
    _DependsOnTheOutside.calls += 1
    return _DependsOnTheOutside.calls


def test_what_hypothesis_said_of_a_history_drawn_differently_is_kept_for_the_report(capsys) -> None:
    import traceback

    from hypothesis import HealthCheck, settings
    from hypothesis.errors import FlakyStrategyDefinition
    from hypothesis.stateful import get_state_machine_test

    from .report import drawn_differently

    # Given a batch whose machine's precondition depends on something outside the history, run as the explorer runs
    # a batch (its failure printed, then the explorer's line saying how it ended)
    print("explore: batch 0, seed 1")
    _DependsOnTheOutside.calls = 0
    test = get_state_machine_test(
        _DependsOnTheOutside,
        settings=settings(
            max_examples=50, database=None, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck)
        ),
    )
    with pytest.raises(FlakyStrategyDefinition) as raised:
        test()
    print("".join(traceback.format_exception(raised.value)))
    print("explore: batch 0 ended by a history drawn differently twice\nexplore: batch 1, seed 2")
    # When the report reads the run's output
    said = drawn_differently(capsys.readouterr().out)
    # Then it keeps, for that batch, the steps leading up to the draw and the rule selection it was drawn in
    assert len(said) == 1
    assert said[0].startswith("Steps leading up to this error:\n  state = _DependsOnTheOutside()")
    assert "while drawing from RuleStrategy(machine=_DependsOnTheOutside(" in said[0]
    assert "The second test case drew a different type of value than the first." in said[0]
    assert len(said[0].splitlines()) <= 40
    # And a run with no batch so ended keeps nothing
    assert drawn_differently("explore: batch 0, seed 1\nexplored 3 histories\n") == []


class Stopped(Exception):
    """A run stopped part way (as a sitting that runs out of time is)."""


@pytest.fixture
def written(tmp_path, monkeypatch):
    """The report's files in a scratch directory, and measurements that only say what they were asked."""
    page = tmp_path / "explorer-power.md"
    page.write_text(f"# The explorer's power\n\n{power.report.BEGIN}\n{power.report.END}\n")
    monkeypatch.setattr(power, "REPORT_JSON", tmp_path / "explorer-power.json")
    monkeypatch.setattr(power, "REPORT_PAGE", page)
    monkeypatch.setattr(power, "tree_digest", lambda: "tree-1")
    asked: list[tuple[str, int]] = []

    def measure(patch, budget, seed, log, shrink):
        asked.append((patch.name, seed))
        if patch.name == stop_at[0]:
            raise Stopped(patch.name)
        outcome = power.Outcome(patch.name, patch.title, list(patch.expect), seed, budget, patch_sha=patch.digest())
        if patch.name == KEPT[0].name:  # the first is found, the others not
            outcome.found, outcome.kind, outcome.expected_kind = True, patch.expect[0], True
            outcome.seconds_to_find, outcome.histories = 3.0, 5
        return outcome

    stop_at = [""]
    monkeypatch.setattr(power, "measure", measure)
    return asked, stop_at


def test_a_run_stopped_part_way_keeps_what_it_measured_and_a_resumed_one_measures_only_the_rest(written) -> None:
    asked, stop_at = written
    names = [patch.name for patch in KEPT[:3]]
    # Given a run of three breaks, one at a time, stopped while it measures the third
    stop_at[0] = names[2]
    with pytest.raises(Stopped):
        power.main(["--only", *names, "--budget", "60", "-j", "1", "--seed", "100"])
    # Then the report holds the two it measured, each as it ended, and says the rest is still to measure
    run = json.loads(power.REPORT_JSON.read_text())
    assert [b["name"] for b in run["breaks"]] == names[:2] and run["asked"] == 3 and run["tree"] == "tree-1"
    assert "Measured 2 of the 3 breaks asked for so far" in power.REPORT_PAGE.read_text()
    # When it is resumed, on the same tree and budget
    stop_at[0] = ""
    assert power.main(["--only", *names, "--budget", "60", "-j", "1", "--resume"]) == 1  # two of three not found
    # Then only the third is measured, from the seed it would have had in one sitting, and the report holds all three
    assert asked[-1] == (names[2], 102) and [name for name, _ in asked].count(names[0]) == 1
    run = json.loads(power.REPORT_JSON.read_text())
    assert [b["name"] for b in run["breaks"]] == names and [b["sitting"] for b in run["breaks"]] == [1, 1, 2]
    page = power.REPORT_PAGE.read_text()
    assert "In 2 sittings on the same tree (tree-1)" in page and "Measured" not in page


def test_a_run_is_resumed_only_on_its_own_tree_and_budget(written, monkeypatch) -> None:
    names = [patch.name for patch in KEPT[:2]]
    power.main(["--only", *names, "--budget", "60", "-j", "1", "--seed", "7"])
    # When the budget differs, or the code the explorer runs changed, Then it says so and measures nothing
    with pytest.raises(SystemExit, match="resume it with the same budget"):
        power.main(["--only", *names, "--budget", "120", "--resume"])
    monkeypatch.setattr(power, "tree_digest", lambda: "tree-2")
    with pytest.raises(SystemExit, match="the tree changed since the run"):
        power.main(["--only", *names, "--budget", "60", "--resume"])
    # And with nothing written before, there is nothing to resume
    power.REPORT_JSON.unlink()
    with pytest.raises(SystemExit, match="nothing to resume"):
        power.main(["--only", *names, "--budget", "60", "--resume"])


def test_a_break_whose_patch_changed_since_it_was_measured_is_measured_again(written, monkeypatch) -> None:
    asked, _ = written
    names = [patch.name for patch in KEPT[:2]]
    power.main(["--only", *names, "--budget", "60", "-j", "1", "--seed", "7"])
    # Given the second patch changed since (its digest is another)
    real = power.Patch.digest
    monkeypatch.setattr(power.Patch, "digest", lambda patch: "new" if patch.name == names[1] else real(patch))
    # When the run is resumed / Then only that break is measured again
    asked.clear()
    power.main(["--only", *names, "--budget", "60", "-j", "1", "--resume"])
    assert asked == [(names[1], 8)]


def test_the_tree_the_explorer_runs_is_named_by_its_code_not_by_the_docs_a_run_writes() -> None:
    # Given the working tree / Then its digest is stable
    assert power.tree_digest() == power.tree_digest()
    # And it names what the explorer runs: converge, the tools, the explorer and the modules it imports from tests/
    runs = [
        "shared/converge/flow/pipeline.py",
        "infra/localcloud/cloud.py",
        "template.yaml",
        "tests/explore/machine.py",
        "tests/chaos.py",
        "tests/conftest.py",
    ]
    assert all(power._explorer_runs(name) for name in runs)
    # Not the docs a run writes, the kept patches (each outcome has its own's digest), nor the other parts' tests
    others = [
        "docs/explorer-power.json",
        "docs/mutation-results.jsonl",
        "README.md",
        "tests/explore/breaks/early-copy-while-switched-off.patch",
        "tests/unit/test_rate_limits.py",
        "tests/mutation.toml",
    ]
    assert not any(power._explorer_runs(name) for name in others)
