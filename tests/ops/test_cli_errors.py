"""The operator commands fail with one line and a non-zero status when the deployment cannot be reached."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from converge_cli.main import app as cli

runner = CliRunner()

COMMANDS = [
    ("ops", "show", "op-1"),
    ("ops", "list", "--state", "UNKNOWN"),
    ("toggles", "list"),
    ("dlq", "list"),
    ("dlq", "redrive", "--dry-run"),
]


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_an_unreachable_endpoint_is_one_line_and_exit_4(command, monkeypatch):
    # Given an endpoint nothing listens on
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    # When a command runs against it
    result = runner.invoke(cli, [*command, "--endpoint-url", "http://127.0.0.1:9"])
    # Then it says it cannot reach it, in one line, without a traceback
    assert result.exit_code == 4
    assert result.stderr.startswith("error: cannot reach http://127.0.0.1:9")
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.output


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_no_credentials_is_one_line_and_exit_3(command, monkeypatch, tmp_path):
    # Given no credentials anywhere: no environment keys, empty config files, no metadata service, no endpoint
    for name in (
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_SECURITY_TOKEN",
        "AWS_PROFILE",
        "AWS_ENDPOINT_URL",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
    ):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "config").write_text("")
    (tmp_path / "credentials").write_text("")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    # When a command runs
    result = runner.invoke(cli, list(command))
    # Then it says so, in one line, without a traceback
    assert result.exit_code == 3, result.output
    assert result.stderr.startswith("error: no AWS credentials found")
    assert "Traceback" not in result.output
