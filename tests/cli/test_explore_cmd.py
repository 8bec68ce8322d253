"""`converge explore` in a team's project (one `converge init` makes): what it runs, what it prints while it runs and
after, and how it refuses what it cannot do (exit 2, one line naming what is wrong) before deploying anything.

What it finds in a broken project (exit 1, the shrunk history as steps, the seed) is tests/testing/
test_explore_breaks.py's: that needs a project with the orders' jobs and a few dozen histories."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from converge_cli.commands.init import scaffold
from converge_cli.main import app
from tests.conftest import local_aws

runner = CliRunner()
PACKAGE = "explore_cli_shop"
"""The scaffolded catalogue's package: a name no other test's project imports in this process."""


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    made = tmp_path_factory.mktemp("explore-cli") / "shop"
    scaffold(made, PACKAGE)
    return made


@pytest.fixture
def in_project(project: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    local_aws(monkeypatch)
    monkeypatch.chdir(project)
    for name in ("CONVERGE_CATALOGUE", "CONVERGE_TEMPLATE", "CONVERGE_EXPLORE_SEED"):
        monkeypatch.delenv(name, raising=False)
    return project


def broken_project(tmp_path: Path, package: str, line: str) -> Path:
    """A project made by `converge init` whose catalogue no longer imports: a line added to its greeting module (a
    package of its own: a catalogue once imported stays imported in this process)."""
    made = tmp_path / "shop"
    scaffold(made, package)
    greeting = made / "shared" / package / "greeting.py"
    greeting.write_text(greeting.read_text() + line + "\n")
    return made


def test_help_says_what_it_does_its_options_and_its_exit_codes() -> None:
    # When a team asks for the command's help
    result = runner.invoke(app, ["explore", "--help"])
    # Then it says what is explored and how, with examples, and what each exit code means
    assert result.exit_code == 0, result.output
    text = " ".join(result.stdout.split())
    for said in ("faults, kill switches, operators' actions and the clock", "its clean run", "shrunk",
                 "converge explore --seed 7 --examples 200", "Exit codes: 0 the promise held; 1 a break",
                 "2 a refused request"):  # fmt: skip
        assert said in text, said
    for option in ("--seed", "--examples", "--histories", "--budget", "--steps", "--job", "--leave-out", "--json"):
        assert option in text, option
    # And the command's list names it
    assert "explore" in runner.invoke(app, ["--help"]).stdout


def test_a_bounded_run_prints_its_progress_and_the_histories_it_ran(in_project: Path) -> None:
    # Given a project made by `converge init` / When the explorer runs 3 histories from seed 5
    result = runner.invoke(app, ["explore", "--seed", "5", "--examples", "3", "--steps", "8"])
    # Then the promise held: exit 0, and stdout says how many histories, in how long, from which seed
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("✓ the promise held: 3 histories (")
    assert " s from seed 5; 1 job held to its clean run" in result.stdout
    # And stderr told of each stage while it ran: the deployment, the clean runs, each batch
    progress = result.stderr.splitlines()
    assert "deploying template.yaml on the local cloud (catalogue explore_cli_shop)" in progress[0]
    assert "clean runs: 1 job, each once with no fault" in progress[1]
    assert "3 histories (" in progress[-1] and "the promise held (batch 1, seed 5)" in progress[-1]


def test_under_json_it_prints_the_run_alone(in_project: Path) -> None:
    # When the explorer runs 2 histories of the greeting job, faults left out, under --json
    command = ["explore", "--seed", "9", "-n", "2", "--job", "hello.greeting.v1", "--leave-out", "faults", "--json"]
    result = runner.invoke(app, command)
    # Then stdout is one JSON object saying what ran, with no progress around it
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["held"] is True and report["break"] is None and report["first_break"] is None
    assert report["seed"] == 9 and report["histories"] == 2 and report["steps"] >= 2
    assert report["clean_runs"] == {"hello.greeting.v1": {"GreetingsBucket": 1}}
    assert result.stderr == ""


@pytest.mark.parametrize(
    ("options", "says"),
    [
        (["--job", "nope.v1"], "no job 'nope.v1' in the catalogue; the jobs a producer starts: hello.greeting.v1"),
        (["--leave-out", "fault"], "'fault' is no rule or group of the explorer's: ways in, faults"),
        (["--leave-out", "producer_enqueues_nope_v1"], "'producer_enqueues_nope_v1' is no rule or group"),
    ],
    ids=["unknown job", "unknown group", "unknown job's rule"],
)
def test_a_name_that_is_none_is_refused_before_anything_is_deployed(in_project: Path, options, says) -> None:
    # When the explorer is asked for a job or a rule the project does not have
    result = runner.invoke(app, ["explore", *options])
    # Then it refuses: exit 2, one line naming what is wrong and what there is, nothing deployed or run
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("error: ") and says in result.stderr, result.stderr
    assert result.stdout == "" and "deploying" not in result.stderr


@pytest.mark.parametrize(
    ("package", "line", "says"),
    [
        (
            "shop_missing_module",
            "import a_module_no_one_installed",
            "ModuleNotFoundError: No module named 'a_module_no_one_installed' at ",
        ),
        ("shop_syntax_error", "def half_written(:", "SyntaxError: "),
        ("shop_raises", "raise RuntimeError('the settings are missing')", "RuntimeError: the settings are missing at "),
    ],
    ids=["import error", "syntax error", "error at import"],
)
def test_a_catalogue_that_does_not_import_is_refused_naming_why(
    in_project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, package: str, line: str, says: str
) -> None:
    # Given a project whose catalogue is broken by one line
    monkeypatch.chdir(broken_project(tmp_path, package, line))
    # When the explorer runs in it
    result = runner.invoke(app, ["explore", "-n", "1"])
    # Then it refuses: exit 2, naming the catalogue and what it raised (where, for the team's own code)
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(f"error: the job catalogue '{package}' does not import: "), result.stderr
    assert says in result.stderr and "greeting.py" in result.stderr, result.stderr
    # And under --json the refusal is the project's error
    refused = runner.invoke(app, ["explore", "-n", "1", "--json"])
    assert refused.exit_code == 2 and json.loads(refused.stderr)["error"] == "no_project"


def test_outside_a_project_it_says_where_it_looked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Given a directory with no template.yaml in it or above it
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CONVERGE_TEMPLATE", raising=False)
    # When the explorer runs there / Then it refuses, saying how to point at the project
    result = runner.invoke(app, ["explore", "-n", "1"])
    assert result.exit_code == 2, result.output
    assert f"no template.yaml in {tmp_path.resolve()}" in result.stderr and "converge init DIR" in result.stderr


def test_out_of_range_counts_are_refused_as_usage(in_project: Path) -> None:
    # When a count is zero or a budget below a second / Then each is refused as usage (exit 2) by its option's name
    for options, option in ((["--examples", "0"], "--examples"), (["--budget", "0.5"], "--budget"),
                            (["--steps", "201"], "--steps"), (["--seed", "seven"], "--seed")):  # fmt: skip
        result = runner.invoke(app, ["explore", *options])
        assert result.exit_code == 2, (options, result.output)
        assert option in result.output, (options, result.output)


def test_a_number_of_histories_asked_for_is_run_whatever_the_time_unless_a_budget_is_given() -> None:
    # Given the command's budget for each combination of --examples and --budget
    from converge_cli.commands.explore import DEFAULT_BUDGET, _seconds

    # Then a number of histories alone runs them all; a budget alone or with it is kept; neither is a minute
    assert _seconds(None, 200) == float("inf")
    assert _seconds(300.0, 200) == 300.0 and _seconds(300.0, None) == 300.0
    assert _seconds(None, None) == DEFAULT_BUDGET == 60.0
