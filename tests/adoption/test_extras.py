"""Each extra of converge-jobs installs alone, from the wheel, in a fresh environment, and its commands run.

None: converge itself (a producer's, a Lambda's); `cli`: the `converge` command, here against a project served by
`converge local up`; `local`: the local cloud and converge_testing, without pytest; `test`: a new project's own
tests; `console`: `converge console`. A command whose extra is missing says which to install.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path

import pytest

from tests.adoption.conftest import UV, run

pytestmark = pytest.mark.slow
INSTALLED: dict[str, float] = {}
"""Seconds each extra took to install (uv, its cache warm), for the run's record."""


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, wheel: Path) -> Iterator[tuple[Path, str]]:
    """A project from `converge init` (pinned to the wheel), served by `converge local up`: its directory and URL."""
    home = tmp_path_factory.mktemp("served")
    converge = Path(sys.executable).with_name("converge")
    run(converge, "init", "served-jobs", "--converge", wheel, cwd=home)
    project = home / "served-jobs"
    outputs = project / ".converge" / "outputs.json"
    command = [str(converge), "local", "up", "--port", "0", "--outputs-file", str(outputs)]
    server = subprocess.Popen(command, cwd=project, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 180
        while not outputs.exists() and server.poll() is None and time.monotonic() < deadline:
            time.sleep(0.5)
        assert outputs.exists(), server.stderr.read() if server.poll() is not None else "not ready in time"
        yield project, json.loads(outputs.read_text())["endpoint_url"]
    finally:
        server.send_signal(signal.SIGINT)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()


def installed(tmp_path: Path, wheel: Path, extra: str) -> Path:
    """A fresh venv with the wheel and one extra (or none); returns its bin directory."""
    venv = tmp_path / "venv"
    run(UV, "venv", "-q", "-p", sys.executable, venv, cwd=tmp_path)
    started = time.perf_counter()
    run(UV, "pip", "install", "-q", "-p", venv / "bin" / "python", f"{wheel}[{extra}]" if extra else str(wheel),
        cwd=tmp_path)  # fmt: skip
    INSTALLED[extra or "(none)"] = round(time.perf_counter() - started, 1)
    print(f"converge-jobs[{extra}] installed in {INSTALLED[extra or '(none)']} s")
    return venv / "bin"


def env(bin_dir: Path) -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if k in ("HOME", "LANG", "TMPDIR")}
    return {**keep, "PATH": f"{bin_dir}{os.pathsep}/usr/bin:/bin", "AWS_DEFAULT_REGION": "us-east-1"}


def refused(bin_dir: Path, *command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([str(bin_dir / command[0]), *command[1:]], cwd=cwd, env=env(bin_dir), capture_output=True,
                          text=True, timeout=300)  # fmt: skip
    assert done.returncode != 0, done.stdout
    return done


def test_alone_it_is_what_a_lambda_or_a_producer_needs(tmp_path: Path, wheel: Path) -> None:
    bin_dir = installed(tmp_path, wheel, "")
    # Then converge imports and checks a message, with nothing of the command line or the local cloud installed
    probe = (
        "import importlib.util as u, converge\n"
        "class Greet(converge.JobMessage):\n    user_id: converge.Identifier\n"
        "print(Greet(user_id='u-1').user_id, [m for m in ('typer', 'moto', 'pytest', 'flask') if u.find_spec(m)])"
    )
    assert run(bin_dir / "python", "-c", probe, cwd=tmp_path, env=env(bin_dir)).split() == ["u-1", "[]"]
    # And its `converge` script says which extra the command needs
    assert "needs the `cli` extra" in refused(bin_dir, "converge", "--version", cwd=tmp_path).stderr


def test_cli_alone_runs_the_command_against_an_endpoint(tmp_path: Path, wheel: Path, served: tuple[Path, str]) -> None:
    bin_dir = installed(tmp_path, wheel, "cli")
    project, endpoint = served
    # Then the command prints its version and help, and `status` reads the served project's deployment
    version = run(bin_dir / "converge", "--version", cwd=tmp_path, env=env(bin_dir))
    assert version.strip() == f"converge {metadata.version('converge-jobs')}"
    assert "Usage" in run(bin_dir / "converge", "--help", cwd=tmp_path, env=env(bin_dir))
    status = json.loads(run(bin_dir / "converge", "status", "--endpoint-url", endpoint, "--json", cwd=project,
                            env={**env(bin_dir), "AWS_ACCESS_KEY_ID": "l", "AWS_SECRET_ACCESS_KEY": "l"}))  # fmt: skip
    assert status
    # And a command that runs the local cloud says which extra it needs
    demo = refused(bin_dir, "converge", "demo", cwd=project)
    assert "needs the `local` extra" in demo.stderr and demo.returncode == 2


def test_local_alone_runs_the_local_cloud_and_converge_testing(
    tmp_path: Path, wheel: Path, served: tuple[Path, str]
) -> None:
    bin_dir = installed(tmp_path, wheel, "local")
    project, _ = served
    # Then converge_testing deploys the project's template and counts the example job's effect, without pytest
    probe = (
        "from converge_testing import local_cloud\n"
        "with local_cloud() as cloud:\n"
        "    cloud.converge.enqueue('hello.greeting.v1', 'greet-local', {'user_id': 'u-1'})\n"
        "    cloud.run_until_quiet()\n"
        "    print(cloud.operation('greet-local').state.value, cloud.effects.of('greet-local'))\n"
    )
    out = run(bin_dir / "python", "-c", probe, cwd=project, env=env(bin_dir))
    assert out.strip() == "SUCCEEDED {'GreetingsBucket': 1}"


def test_test_alone_runs_a_new_projects_own_tests(tmp_path: Path, wheel: Path, served: tuple[Path, str]) -> None:
    bin_dir = installed(tmp_path, wheel, "test")
    project, _ = served
    # Then the project's tests pass with converge_testing's fixtures, pytest's plugin found by its entry point
    out = run(bin_dir / "python", "-m", "pytest", "-q", "-p", "no:cacheprovider", cwd=project, env=env(bin_dir))
    assert "4 passed" in out


def test_console_alone_gives_the_console_command(tmp_path: Path, wheel: Path) -> None:
    bin_dir = installed(tmp_path, wheel, "console")
    # Then `converge console` is there, with what it needs
    assert "--endpoint-url" in run(bin_dir / "converge", "console", "--help", cwd=tmp_path, env=env(bin_dir))
    assert run(bin_dir / "python", "-c", "import flask, typer; print('ok')", cwd=tmp_path, env=env(bin_dir)) == "ok\n"
