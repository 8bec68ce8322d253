"""The explorer finds, on its own and within a bounded run, what breaks a team's project: a runner that breaks its
policy's promise (the receipt keyed by a fresh id on every run, its binding still promising keyed_effect), and a grant
the template lacks. Each test prints when the break was first seen (histories, seconds, before shrinking): the figures
docs/testing.md quotes. Bounded by histories, never by the machine's speed."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from converge_cli.commands.init import scaffold
from converge_testing import Broken, Cloud, explore, local_cloud
from converge_testing.explore_machine import RULES
from converge_testing.explorer import STEPS
from tests.conftest import ROOT
from tests.readme.blocks import blocks
from tests.testing.project import add_orders, make_receipts_non_idempotent, remove_grant

BIN = Path(sys.executable).parent
FIND_WITHIN = 120
"""Histories the explorer is given to find the non-idempotent receipt (it needs a few dozen at most)."""


def copy_of(project: Path, tmp_path: Path) -> Path:
    copied = tmp_path / project.name
    shutil.copytree(project, copied, symlinks=True)
    return copied


def explore_command(project: Path, *options: str) -> subprocess.CompletedProcess[str]:
    command = [str(BIN / "converge"), "explore", *options]
    return subprocess.run(command, cwd=project, capture_output=True, text=True, timeout=900)


@pytest.fixture(scope="module")
def non_idempotent(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The page's project with the receipt's runner planted, its catalogue a package of its own: the unplanted
    project's, once imported in this process, would be the one its functions run."""
    project = tmp_path_factory.mktemp("planted") / "planted-orders"
    scaffold(project, "planted_orders")
    make_receipts_non_idempotent(add_orders(project))
    return project


@pytest.fixture(scope="module")
def planted_cloud(non_idempotent: Path) -> Iterator[Cloud]:
    with local_cloud(non_idempotent / "template.yaml") as cloud:
        yield cloud


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_it_finds_a_runner_that_breaks_its_policys_promise(planted_cloud: Cloud, seed: int) -> None:
    # Given the receipt's runner writing a new row on every run, its binding still promising keyed_effect
    # When the explorer runs, bounded by histories
    with pytest.raises(Broken) as found:
        explore(planted_cloud, seed=seed, histories=FIND_WITHIN, budget=600, shrink_seconds=20)
    broken = found.value
    # Then it finds the break on its own: the receipt's effect made twice, in a history shrunk to a few steps
    assert broken.kind == "EffectTwice" and "orders.receipt.v1, keyed_effect" in broken.detail
    assert "ReceiptsTable, its clean run makes 1" in broken.detail
    assert any("orders_receipt_v1" in step or "orders.receipt.v1" in step for step in broken.steps), broken.history
    # (shrinking stops at its time limit: on a loaded machine it may leave no-op steps in, never more than a history's)
    assert 1 <= len(broken.steps) <= STEPS + 1, broken.history  # the history's steps and its teardown
    assert all(is_rule(step) for step in broken.steps), broken.history
    first = broken.exploration.first_break
    assert first is not None and first[0] <= FIND_WITHIN
    # And the report says how to find it again
    assert f"seed {broken.seed}" in broken.report() and broken.seed >= seed
    print(f"seed {seed}: first seen in history {first[0]} after {first[1]:.1f} s", file=sys.stderr)


def test_it_finds_a_grant_the_template_lacks(orders_project: Path, tmp_path: Path) -> None:
    # Given the orders' e-mail grant taken out of the template
    project = copy_of(orders_project, tmp_path)
    remove_grant(project, "SendOrderEmail")
    # When `converge explore` runs in the project
    done = explore_command(project, "--seed", "0", "--histories", "1", "--json")
    # Then its clean runs already fail: exit 1, naming the action and where the grant belongs
    assert done.returncode == 1, done.stderr[-2000:]
    found = json.loads(done.stdout)["break"]
    assert found["kind"] == "MissingGrant"
    assert "ses:SendEmail" in found["detail"] and "DefaultRunnerPolicy" in found["detail"]


def test_the_command_exits_1_on_a_break_printing_its_shrunk_history_as_steps(non_idempotent: Path) -> None:
    # Given the command the testing page shows, and what it shows it printing (the page's project, its receipt
    # runner writing a new row on every run)
    command, printed = page_blocks()
    # When `converge explore` runs in that project as written
    done = explore_command(non_idempotent, *shlex.split(command)[2:])
    # Then it exits 1, printing the kind of break, the shrunk history as numbered steps and the seed that replays it
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    report = shape(done.stdout)
    assert report.kind == "EffectTwice" and report.job == "orders.receipt.v1" and report.resource == "ReceiptsTable"
    assert report.seed == 1 and 1 <= len(report.steps) <= 15, done.stdout
    assert all(is_rule(step) for step in report.steps), done.stdout
    # And what the page shows is that output's shape: the same kind of break, job and resource, numbered steps
    # of the explorer's rules, when it was first seen and how to replay it (its figures are one run's)
    shown = shape(printed)
    assert (shown.kind, shown.job, shown.policy, shown.resource, shown.seed) == (
        report.kind, report.job, report.policy, report.resource, report.seed)  # fmt: skip
    assert all(is_rule(step) for step in shown.steps), printed
    # And stderr told of each stage while it ran, the break before its shrinking
    told = done.stderr
    assert "deploying template.yaml" in told and "clean runs: 5 jobs" in told, told
    assert "EffectTwice after " in told and "shrinking its history (at most 60 s)" in told, told


TEAM_TEST = """
def test_the_receipts_keep_their_promise(converge_explore):
    converge_explore(histories=120, budget=600, shrink_seconds=20)
"""


def test_the_fixture_fails_the_teams_test_with_the_break_replayed_from_the_seed_it_is_given(
    non_idempotent: Path,
) -> None:
    # Given a test of the team's own that runs the explorer through the fixture
    (non_idempotent / "tests" / "test_explored_receipts.py").write_text(TEAM_TEST)
    # When the project's pytest runs it from the seed a report named
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_explored_receipts.py",
         "--converge-seed", "1"],
        cwd=non_idempotent, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    # Then the test fails with the break, its shrunk history as numbered steps, and that seed to replay it
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-2000:]
    assert "EffectTwice: " in done.stdout and "(orders.receipt.v1, keyed_effect)" in done.stdout, done.stdout[-3000:]
    assert re.search(r"the history, shrunk to \d+ steps?:\n +1\. ", done.stdout), done.stdout[-3000:]
    assert "replay: seed 1 (" in done.stdout and "1 failed" in done.stdout, done.stdout[-3000:]


PAGE = ROOT / "docs" / "testing.md"
PAGE_HEADING = "From the command line"
"""The testing page's section whose two blocks, the command and what it prints, the test above runs and compares."""


def page_blocks() -> tuple[str, str]:
    """The page's command (a bash block) and its report (the text block after it), under PAGE_HEADING."""
    found = [block for block in blocks(PAGE) if block.heading == PAGE_HEADING]
    assert [block.language for block in found] == ["bash", "text"], found
    return found[0].text.strip(), found[1].text


def is_rule(step: str) -> bool:
    """A step is one of the explorer's rules (a job's own enqueue among them), or the quiet end of the history."""
    name = step.split("(", 1)[0]
    return name in RULES or name.startswith("producer_enqueues_") or name == "teardown"


@dataclass
class Shape:
    kind: str
    job: str
    policy: str
    resource: str
    steps: list[str]
    seed: int


BREAK_LINE = re.compile(
    r"^✗ (?P<kind>\w+): \S+ [A-Z_]+ \((?P<job>[\w.-]+), (?P<policy>\w+)\): \d+ (?P<resource>\w+), "
    r"its clean run makes \d+$"
)
STEP_LINE = re.compile(r"^ +(?P<number>\d+)\. (?P<step>\w+\(.*)$")
FIGURES_LINE = re.compile(r"^first seen in history \d+ after [\d.]+ s; \d+ histories in [\d.]+ s with shrinking$")
REPLAY_LINE = re.compile(
    r"^replay: seed (?P<seed>\d+) \(`converge explore --seed (?P=seed)`, `pytest --converge-seed (?P=seed)`, "
    r"explore\(cloud, seed=(?P=seed)\) or CONVERGE_EXPLORE_SEED=(?P=seed)\)$"
)


def shape(printed: str) -> Shape:
    """What a break's report says, read line by line as `converge explore` prints it (each line must be one of its
    lines: the kind of break, the history's header, its numbered steps, the figures, the replay)."""
    lines = [line for line in printed.splitlines() if line.strip()]
    kind = BREAK_LINE.match(lines[0])
    assert kind is not None, lines[0]
    header = re.match(r"^the history, shrunk to (\d+) steps?:$", lines[1])
    assert header is not None, lines[1]
    steps = [STEP_LINE.match(line) for line in lines[2:-2]]
    assert all(steps) and [int(s["number"]) for s in steps if s] == list(range(1, int(header[1]) + 1)), lines
    assert FIGURES_LINE.match(lines[-2]), lines[-2]
    replay = REPLAY_LINE.match(lines[-1])
    assert replay is not None, lines[-1]
    return Shape(kind["kind"], kind["job"], kind["policy"], kind["resource"], [s["step"] for s in steps if s],
                 int(replay["seed"]))  # fmt: skip
