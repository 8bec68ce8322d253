"""A team's machine, outside this repository: the wheel built from this checkout, installed in fresh environments."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

UV = Path(sys.executable).with_name("uv")
"""The installer the README's commands use (a dev dependency): fresh environments in seconds, from its cache."""


def run(*command: str | Path, cwd: Path, env: dict[str, str] | None = None, timeout: float = 900) -> str:
    done = subprocess.run(
        [str(part) for part in command], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, f"{command} failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # Built from a copy of the checkout: the build backend works in the source tree, and would leave build/ and an
    # egg-info in this checkout, which other tests (running meanwhile, in parallel) read, and a later wheel could
    # ship. uv builds it (2 s against pip's 6: its build environment comes from its cache).
    source, out = tmp_path_factory.mktemp("source") / "converge", tmp_path_factory.mktemp("wheel")
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(".*", "build", "dist", "*.egg-info", "__pycache__"))
    run(Path(sys.executable).with_name("uv"), "build", "-q", "--wheel", "-o", out, source, cwd=out)
    (built,) = out.glob("converge_jobs-*.whl")
    return built
