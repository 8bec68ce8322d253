"""The version is written once, in pyproject.toml, and read from the installed package by whatever prints it."""

from __future__ import annotations

import re
import subprocess
import tomllib

import pytest
from typer.testing import CliRunner

from converge_cli.main import app
from tests.conftest import ROOT

SCAFFOLD_PYPROJECT = "infra/converge_cli/scaffold/pyproject.toml"
"""A new project's own pyproject.toml: its `version` is that project's first, not converge's."""


def declared_version() -> str:
    return str(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"])


def test_converge_version_prints_the_version_pyproject_declares() -> None:
    # Given the version in pyproject.toml / When `converge --version` runs
    result = CliRunner().invoke(app, ["--version"])
    # Then it prints that version, read from the installed metadata (reinstall after changing it: pip install -e .)
    assert result.exit_code == 0
    assert result.stdout == f"converge {declared_version()}\n"


def test_no_other_file_holds_a_copy_of_the_version() -> None:
    # Given every tracked file but pyproject.toml, the changelog (whose headings name versions), the scaffold's, and
    # the dev tools' pins (infra/constraints: other distributions' versions, which may be the same number)
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: the tracked files are what is searched")
    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    others = [
        p
        for p in listed.split()
        if p not in {"pyproject.toml", "CHANGELOG.md", SCAFFOLD_PYPROJECT} and not p.startswith("infra/constraints/")
    ]
    version = re.compile(rf"(?<![\d.]){re.escape(declared_version())}(?![\d.])")
    own_version = re.compile(r"^\s*__version__\s*=")
    copies = []
    for path in others:
        try:
            text = (ROOT / path).read_text()
        except (UnicodeDecodeError, FileNotFoundError):
            continue
        # Then none repeats the version or defines a __version__ of its own
        copies += [
            f"{path}: {line.strip()}" for line in text.splitlines() if version.search(line) or own_version.match(line)
        ]
    assert copies == []
