"""`converge console` as a command: loopback only, and the CLI's errors before any server starts."""

from __future__ import annotations

import contextlib
import http.client
import os
import re
import socket
import stat
import subprocess
import sys
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

from typer.testing import CliRunner

from converge_cli.commands.console import opener
from converge_cli.main import app
from tests.conftest import WITH_STACKS, as_a_shell_starts_it, stopped_with_ctrl_c

runner = CliRunner()
CONVERGE = Path(sys.executable).with_name("converge")


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


def test_the_console_page_shows_every_screenshot_the_browser_test_takes():
    # Given the pages the browser test photographs, and the images the docs' console page shows
    root = Path(__file__).resolve().parents[2]
    taken = set(re.findall(r'shot\(browser, "(\w+)"\)', (root / "tests/console/test_browser.py").read_text()))
    shown = set(re.findall(r"\(console/(\w+)\.png\)", (root / "docs/console.md").read_text()))
    # Then they are the same pages, and each image is a PNG in docs/console
    assert taken and taken == shown
    for name in shown:
        assert (root / "docs/console" / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name


def test_the_browser_is_opened_on_a_private_file_so_the_key_is_on_no_command_line():
    # Given the URL with this start's key
    url = "http://127.0.0.1:8123/?token=" + "k" * 43
    # When the page the browser is opened on exists (while the console runs)
    with opener(url) as page:
        path = Path(page.removeprefix("file://"))
        # Then only this user can read it, and it sends the browser on to the URL
        assert page.startswith("file://") and "token" not in page
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert f'content="0;url={url}"' in path.read_text()
    # And it is gone once the console stops
    assert not path.exists()


def test_each_start_prints_its_own_key_and_an_earlier_starts_key_and_session_are_refused(cloud, deployment):
    # Given a console started on a port, signed in through the URL it printed, then stopped
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with started_console(cloud, port) as first:
        exchange = get(first, "/?" + urllib.parse.urlsplit(first).query)
        assert exchange.status == 303 and exchange.getheader("Location") == "/"
        cookie = exchange.getheader("Set-Cookie").split(";")[0]
        assert cookie.startswith(f"converge_console_{port}=")
        assert get(first, "/toggles", cookie).status == 200
    # When it is started again on the same port
    with started_console(cloud, port) as second:
        # Then it prints another key, and the first start's key and session are refused
        assert second != first
        assert get(second, "/?" + urllib.parse.urlsplit(first).query).status == 403
        assert get(second, "/toggles", cookie).status == 403
        # And its own key works
        assert get(second, "/?" + urllib.parse.urlsplit(second).query).status == 303


@contextlib.contextmanager
def started_console(cloud, port: int) -> Iterator[str]:
    """`converge console` in its own process, as an operator starts it; the URL it printed."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("AWS_")}
    server = subprocess.Popen(
        [str(CONVERGE), "console", "--port", str(port), "--endpoint-url", cloud.clients.endpoint_url],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env | {"COLUMNS": "200"} | WITH_STACKS,
        preexec_fn=as_a_shell_starts_it,
    )
    try:
        assert server.stdout is not None
        line = server.stdout.readline()
        match = re.search(rf"(http://127\.0\.0\.1:{port}/\?token=[\w-]{{40,}})", line)
        assert match, f"the console printed no URL with its key: {line!r}"
        yield match.group(1)
    finally:
        stopped_with_ctrl_c(server, "the console")


def get(url: str, path: str, cookie: str = "") -> http.client.HTTPResponse:
    address = urllib.parse.urlsplit(url)
    connection = http.client.HTTPConnection(address.hostname, address.port, timeout=10)
    connection.request("GET", path, headers={"Cookie": cookie} if cookie else {})
    response = connection.getresponse()
    response.read()
    connection.close()
    return response
