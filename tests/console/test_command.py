"""`converge console` as a command: loopback only, and the CLI's errors before any server starts."""

from __future__ import annotations

import re
import socket
from pathlib import Path

from typer.testing import CliRunner

from converge_cli.main import app

runner = CliRunner()


def test_a_non_loopback_host_is_refused():
    # When the console is asked to listen on every interface, or on a LAN address
    for host in ("0.0.0.0", "192.168.1.5", "example.com"):
        result = runner.invoke(app, ["console", "--host", host, "--endpoint-url", "http://127.0.0.1:9"])
        # Then it refuses, saying it serves loopback only, and serves nothing
        assert result.exit_code == 2, result.output
        assert "loopback" in result.stderr


def test_an_unreachable_target_is_the_clis_error_and_no_server_starts():
    # Given an endpoint nothing listens on
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    # When the console is started against it
    result = runner.invoke(app, ["console", "--endpoint-url", f"http://127.0.0.1:{port}"])
    # Then it fails as every command does (exit 4, one line), before printing any console URL
    assert result.exit_code == 4, result.output
    assert "console http" not in result.stdout and result.stderr.startswith("error: ")


def test_the_readme_shows_every_screenshot_the_browser_test_takes():
    # Given the pages the browser test photographs, and the images the README shows
    root = Path(__file__).resolve().parents[2]
    taken = set(re.findall(r'shot\(browser, "(\w+)"\)', (root / "tests/console/test_browser.py").read_text()))
    shown = set(re.findall(r"\(docs/console/(\w+)\.png\)", (root / "README.md").read_text()))
    # Then they are the same pages, and each image is a PNG in docs/console
    assert taken and taken == shown
    for name in shown:
        assert (root / "docs/console" / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
