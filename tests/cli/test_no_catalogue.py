"""Started outside the project, the commands that list or name jobs say why they have none, and how to point at it.

The job catalogue is found as `--catalogue`, `CONVERGE_CATALOGUE`, or what the project's template sets for its
functions (the template found from the current directory upward, or `--template`). Where none of them names one,
a command that lists jobs would otherwise answer with an empty list and exit 0.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from converge_cli.main import app

runner = CliRunner()
NOWHERE = ["--endpoint-url", "http://127.0.0.1:9"]  # nothing listens: a refusal must come before any AWS call
COMMANDS = [
    ["toggles", "list", *NOWHERE],
    ["jobs", "list"],
    ["status", *NOWHERE],
    ["enqueue", "email.password-reset.v1", "--id", "x-1", "--payload", "{}", *NOWHERE],
    ["toggles", "set", "ledger.partner-benefits", "on", *NOWHERE],
    ["ops", "list", "--state", "FAILED", "--job-type", "email.password-reset.v1", *NOWHERE],
    ["dlq", "redrive", "--dry-run", *NOWHERE],
    # an operator's decision writes what the job's binding names (a continuation) or sends it to its job's queue
    ["ops", "resolve", "op-1", "--as", "succeeded", "--reason", "the credit is in the ledger", *NOWHERE],
    ["ops", "resolve", "op-1", "--as", "failed", "--reason", "no credit in the ledger", *NOWHERE],
    ["ops", "retry", "op-1", "--reason", "fixed", "--yes", *NOWHERE],
]


@pytest.fixture
def elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A directory outside any project, with nothing in the environment naming one."""
    monkeypatch.chdir(tmp_path)
    for name in ("CONVERGE_CATALOGUE", "CONVERGE_TEMPLATE"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_outside_a_project_each_command_that_lists_or_names_jobs_says_so_and_exits_2(elsewhere: Path, command):
    # Given a directory with no template.yaml in it or above it, and no catalogue named
    # When a command that lists or names jobs runs there
    result = runner.invoke(app, command)
    # Then it refuses (exit 2, the code for refused input), before reaching AWS
    assert result.exit_code == 2, result.output
    message = result.stderr
    # And it says what it looked for, where, and how to point at the project
    assert message.startswith("error: no job catalogue found"), message
    assert str(elsewhere.resolve()) in message and "template.yaml" in message
    for way in ("cd into your project", "--template", "--catalogue", "CONVERGE_CATALOGUE"):
        assert way in message, way
    assert result.stdout == ""


def test_under_json_the_refusal_is_the_no_catalogue_error(elsewhere: Path) -> None:
    result = runner.invoke(app, ["toggles", "list", "--json", *NOWHERE])
    assert result.exit_code == 2 and result.stdout == ""
    document = json.loads(result.stderr)
    assert document["error"] == "no_catalogue" and "CONVERGE_CATALOGUE" in document["message"]


def test_a_template_that_names_no_catalogue_is_named_in_the_refusal(elsewhere: Path) -> None:
    # Given a project whose template sets no CONVERGE_CATALOGUE for its functions
    (elsewhere / "template.yaml").write_text("Resources:\n  Queue:\n    Type: AWS::SQS::Queue\n")
    # When its toggles are listed
    result = runner.invoke(app, ["toggles", "list", *NOWHERE])
    # Then the refusal names that template and where the setting goes
    assert result.exit_code == 2
    assert str(elsewhere.resolve() / "template.yaml") in result.stderr
    assert "Globals.Function.Environment.Variables" in result.stderr and "--catalogue" in result.stderr


def test_the_catalogue_named_on_the_command_line_is_used_outside_a_project(elsewhere: Path) -> None:
    # Given no project here, and the catalogue named by --catalogue (importable from the environment)
    # When the jobs are listed
    result = runner.invoke(app, ["--catalogue", "catalogue", "jobs", "list", "--json"])
    # Then they are the catalogue's; no template is here, so no queue's concurrency cap is known
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert "ledger.partner-benefits.v1" in {row["job_type"] for row in rows}
    assert {row["max_concurrency"] for row in rows} == {None}


def test_a_catalogue_that_cannot_be_imported_says_so(elsewhere: Path) -> None:
    result = runner.invoke(app, ["--catalogue", "no_such_catalogue_module", "toggles", "list", *NOWHERE])
    assert result.exit_code == 2
    assert "cannot import the job catalogue 'no_such_catalogue_module'" in result.stderr


def test_a_command_that_names_no_job_still_runs_outside_a_project(elsewhere: Path) -> None:
    # Given no project here: `ops show` reads a receipt, which needs no catalogue
    result = runner.invoke(app, ["ops", "show", "op-1", *NOWHERE])
    # Then it goes on to the deployment (here unreachable: exit 4), rather than refusing for want of a catalogue
    assert result.exit_code == 4 and "catalogue" not in result.stderr
