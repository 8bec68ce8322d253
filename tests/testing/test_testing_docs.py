"""docs/testing.md: every Python block runs as written, as the tests of the page's project (a project made by
`converge init` with the orders' jobs), through converge_testing's pytest plugin in that project's own pytest."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT
from tests.readme.blocks import blocks

PAGE = ROOT / "docs" / "testing.md"


def python_blocks() -> list[str]:
    return [block.text for block in blocks(PAGE) if block.language == "python"]


def test_the_page_has_the_examples_this_test_runs() -> None:
    # Given the page's Python blocks / Then each is a test of a team's project (what the run below collects)
    found = python_blocks()
    assert len(found) == 7
    assert all("\ndef test_" in "\n" + text for text in found)


def test_the_pages_examples_pass_as_the_projects_own_tests(orders_project: Path, tmp_path: Path) -> None:
    # Given the page's project, with each of the page's Python blocks as a test module of its own
    project = tmp_path / orders_project.name
    shutil.copytree(orders_project, project, symlinks=True)
    for index, text in enumerate(python_blocks()):
        (project / "tests" / f"test_page_{index}.py").write_text(text)
    # When the project's pytest runs them
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/", "-k", "test_page"],
        cwd=project, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    # Then every example passes as written
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "8 passed" in done.stdout
