"""What every command shares: --version, -h, completion, --profile/--region, errors as JSON, exit codes."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer.main
from botocore.exceptions import EndpointConnectionError
from typer.testing import CliRunner

from converge_cli.main import app
from converge_cli.support.errors import ExitCode, explain
from converge_cli.support.options import on_deployment
from converge_cli.support.target import Target
from localcloud.server import catalogue_seeder, running

runner = CliRunner()
CONVERGE = Path(sys.executable).with_name("converge")
# Every command that talks to AWS, with arguments it can run with.
AWS_COMMANDS = [
    ("enqueue", "email.password-reset.v1", "--id", "x", "--payload", "{}"),
    ("ops", "show", "op-1"),
    ("ops", "list", "--state", "UNKNOWN"),
    ("ops", "resolve", "op-1", "--as", "failed", "--reason", "r"),
    ("toggles", "list"),
    ("toggles", "set", "pdf.cv", "on"),
    ("dlq", "list"),
    ("dlq", "show", "m-1"),
    ("dlq", "delete", "m-1"),
    ("dlq", "purge"),
    ("dlq", "redrive"),
]


def test_version_and_short_help():
    version = runner.invoke(app, ["--version"])
    assert version.exit_code == 0 and version.stdout.startswith("converge ")
    for args in (["-h"], ["ops", "-h"], ["dlq", "purge", "-h"]):
        helped = runner.invoke(app, args)
        assert helped.exit_code == 0 and "Usage:" in helped.stdout, args


def test_shell_completion_completes_commands():
    # Given the shell's completion protocol (what the installed completion script sends)
    completed = subprocess.run(
        [str(CONVERGE)],
        env={"_CONVERGE_COMPLETE": "complete_bash", "COMP_WORDS": "converge dl", "COMP_CWORD": "1", "PATH": ""},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert completed.stdout.split() == ["dlq"]
    assert "--install-completion" in runner.invoke(app, ["-h"]).stdout


def test_the_command_line_starts_without_the_local_cloud():
    # Given a fresh interpreter that loads the command line, as `converge status` or `converge --help` does
    heavy = "('moto', 'samtranslator.translator')"
    probe = f"import sys, converge_cli.main; print(' '.join(m for m in {heavy} if m in sys.modules))"
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    # Then neither moto nor the SAM translator is imported (seconds of start-up; only the local commands need them)
    assert loaded.stdout.split() == []
    # And the local cloud's entry points are still there for those who name them
    import localcloud

    assert localcloud.LocalCloud.__name__ == "LocalCloud"
    assert localcloud.LambdaTimeoutError.__name__ == "LambdaTimeoutError"
    with pytest.raises(AttributeError, match="no attribute 'Cloud'"):
        localcloud.Cloud  # noqa: B018


@pytest.mark.parametrize("command", AWS_COMMANDS, ids=" ".join)
def test_every_aws_command_takes_profile_and_region(command):
    helped = runner.invoke(app, [*command[:2], "-h"] if command[0] != "enqueue" else ["enqueue", "-h"])
    assert "--profile" in helped.stdout and "--region" in helped.stdout and "--endpoint-url" in helped.stdout


def test_an_unknown_profile_is_a_one_line_credentials_error(monkeypatch, tmp_path):
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    result = runner.invoke(app, ["toggles", "list", "--profile", "nobody", "--json"])
    assert result.exit_code == ExitCode.CREDENTIALS
    assert json.loads(result.stderr)["error"] == "no_credentials" and "nobody" in result.stderr


def test_errors_under_json_are_json_on_stderr_with_the_same_exit_codes():
    # A usage error (missing argument), a malformed endpoint, an unreachable endpoint
    for args, code, error in [
        (["ops", "show", "--json"], 2, "usage"),
        (["ops", "show", "x", "--endpoint-url", "localhost:4566", "--json"], 2, "invalid_endpoint"),
        (["ops", "show", "x", "--endpoint-url", "http://127.0.0.1:9", "--json"], 4, "unreachable"),
    ]:
        plain = runner.invoke(app, [arg for arg in args if arg != "--json"])
        result = runner.invoke(app, args)
        assert (result.exit_code, plain.exit_code) == (code, code), (args, result.output)
        document = json.loads(result.stderr)
        assert set(document) == {"error", "message"} and document["error"] == error
        assert result.stdout == ""


def test_a_malformed_endpoint_says_what_to_write():
    result = runner.invoke(app, ["ops", "show", "x", "--endpoint-url", "localhost:4566"])
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        "error: --endpoint-url 'localhost:4566' is not an http:// or https:// URL; did you mean http://localhost:4566?"
    )


def test_an_unreachable_aws_endpoint_does_not_suggest_the_local_cloud():
    aws = EndpointConnectionError(endpoint_url="https://cloudformation.eu-west-1.amazonaws.com/")
    assert "local cloud" not in explain(aws, local=False).message
    assert "check the network" in explain(aws, local=False).message
    assert "local cloud" in explain(aws, local=True).message


def test_aws_proper_unreachable_end_to_end(monkeypatch):
    # Given AWS proper (no endpoint) behind a proxy nothing listens on: no connection can be made
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    for name, value in {
        "AWS_ACCESS_KEY_ID": "x",
        "AWS_SECRET_ACCESS_KEY": "y",
        "HTTPS_PROXY": "http://127.0.0.1:9",
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("NO_PROXY", "")
    result = runner.invoke(app, ["toggles", "list", "--region", "eu-west-1"])
    # Then one line, exit 4, naming what could not be reached, and no local-cloud advice
    assert result.exit_code == 4, result.output
    assert result.stderr.startswith("error: cannot reach") and "local cloud" not in result.stderr


@pytest.fixture(scope="module")
def server() -> Iterator[Any]:
    with running(seeders=[catalogue_seeder], poll_interval=0.05) as cloud:
        yield cloud


def test_a_region_mismatch_with_the_local_cloud_names_both_regions(server, monkeypatch):
    # Given the local cloud's stack in its region, and a command asking another one
    monkeypatch.delenv("AWS_REGION", raising=False)
    result = runner.invoke(
        app, ["toggles", "list", "--endpoint-url", server.clients.endpoint_url, "--region", "eu-west-1"]
    )
    # Then it says where it looked and where the stack is
    assert result.exit_code == 4
    assert "in region eu-west-1" in result.stderr and f"--region {server.clients.region}" in result.stderr


def test_unknown_job_types_get_a_suggestion_end_to_end(server):
    endpoint = ["--endpoint-url", server.clients.endpoint_url]
    for args in (
        ["enqueue", "email.pasword-reset.v1", "--id", "x", "--payload", "{}", *endpoint],
        ["toggles", "set", "email.pasword-reset", "on", *endpoint],
        ["ops", "list", "--state", "FAILED", "--job-type", "email.password-reset", *endpoint],
    ):
        result = runner.invoke(app, args)
        assert result.exit_code == 2, result.output
        assert "did you mean 'email.password-reset" in result.stderr, result.stderr


def settle(server: Any, seconds: float = 10.0) -> None:
    """Wait for the resumer that a parameter change triggers: the functions run in this process, and
    while one runs, sys.stdout is its log capture (process-wide), not the command's output."""
    before = server.runtime.invocation_counts["ResumerFunction"]
    deadline = time.monotonic() + seconds
    while server.runtime.invocation_counts["ResumerFunction"] == before and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)


def test_framework_logs_stay_off_stdout(server):
    # Given a toggle whose value is not a boolean: reading it logs a framework warning
    ssm = server.client("ssm")
    ssm.put_parameter(Name=f"{server.outputs['TogglePrefix']}/pdf.cv", Value="maybe", Type="String", Overwrite=True)
    settle(server)
    try:
        # When the toggles are listed (no in-process function swaps sys.stdout meanwhile: see settle)
        with server.runtime.held():
            result = runner.invoke(app, ["toggles", "list", "--json", "--endpoint-url", server.clients.endpoint_url])
        # Then stdout is exactly the JSON document; the warning went to stderr
        assert result.exit_code == 0, result.output
        rows = {row["job_type"]: row for row in json.loads(result.stdout)}
        assert rows["pdf.cv.v1"]["note"] == "value is not a boolean"
        assert "toggle value is not a boolean" in result.stderr
    finally:
        ssm.put_parameter(Name=f"{server.outputs['TogglePrefix']}/pdf.cv", Value="on", Type="String", Overwrite=True)
        settle(server)


def test_the_benchmark_command_comes_from_the_distributions_entry_points_not_an_import():
    # Given the installed distribution, which declares `converge bench` among its converge.commands entry points
    from converge_cli.main import declared_commands

    declared = dict(declared_commands())
    # Then the converge command registers the benchmark's command from there
    assert declared["bench"].__module__ == "converge_bench.command"
    assert "bench" in runner.invoke(app, ["--help"]).stdout
    # (that the command line imports nothing of the benchmarks is an import contract: pyproject.toml)


def test_every_command_that_names_a_deployment_takes_the_same_four_options_and_passes_one_target():
    # Given every command of the command line, as click sees them
    def commands(group: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
        for name, command in getattr(group, "commands", {}).items():
            yield from commands(command, (*path, name)) if hasattr(command, "commands") else [((*path, name), command)]

    naming = {"--endpoint-url", "--stack", "--region", "--profile"}
    taking = {path: command for path, command in commands(typer.main.get_command(app)) if "--stack" in _flags(command)}
    # Then those that take one of the options take all four, spelled and explained alike
    assert len(taking) >= 20
    helps = {tuple(sorted((p.opts[0], p.help) for p in c.params if p.opts[0] in naming)) for c in taking.values()}
    assert len(helps) == 1 and {flag for flag, _ in next(iter(helps))} == naming
    # And a command written with a `deployment` gets the Target its options name, and one without is refused
    got: list[Target] = []

    @on_deployment
    def command(name: str, *, deployment: Target, as_json: bool = False) -> None:
        got.append(deployment)

    assert list(inspect.signature(command).parameters) == [
        "name", "endpoint_url", "stack", "region", "profile", "as_json"
    ]  # fmt: skip
    command(name="x", endpoint_url="http://localhost:4566", stack="s", region="eu-west-1", profile=None)
    assert got == [Target(stack="s", endpoint_url="http://localhost:4566", region="eu-west-1", profile=None)]
    with pytest.raises(TypeError, match="no `deployment` parameter"):
        on_deployment(lambda name: None)


def _flags(command: Any) -> set[str]:
    return {flag for parameter in command.params for flag in parameter.opts}
