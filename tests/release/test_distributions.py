"""What the sdist and the wheel hold: converge's sources and docs, never what a working copy leaves lying around.

The build runs on a copy of the tracked files into which a working copy's usual debris has been put (virtual
environments, bytecode, tool caches, a patch's leftovers, in the root and inside the scaffold that `converge init`
copies out of the package), so the test fails if any of it would ship, wherever it runs. On failure it lists
the members that do not belong and those that are missing.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
import zipfile

import pytest

from tests.conftest import ROOT

PACKAGE_DIRS = ("shared/converge/", "infra/converge_cli/", "infra/localcloud/", "infra/converge_testing/",
                "benchmarks/converge_bench/")  # fmt: skip
"""Where the packages the distribution ships live in the tree (pyproject.toml's packages.find)."""
TOP_LEVEL = {"PKG-INFO", "README.md", "CHANGELOG.md", "pyproject.toml", "setup.cfg", "MANIFEST.in"}
DEBRIS = (
    ".venv/lib/python3.11/site-packages/boto3/__init__.py",
    ".venv-test/bin/activate",
    ".pytest_cache/v/cache/lastfailed",
    ".mypy_cache/3.11/converge/worker.data.json",
    ".ruff_cache/0.6.0/123",
    "shared/converge/__pycache__/worker.cpython-311.pyc",
    "infra/converge_cli/scaffold/.venv/lib/python3.11/site-packages/x.py",
    "infra/converge_cli/scaffold/.pytest_cache/v/cache/nodeids",
    "infra/converge_cli/scaffold/shared/__package__/__pycache__/greeting.cpython-311.pyc",
    "infra/converge_cli/scaffold/tests/__pycache__/test_greeting.cpython-311-pytest-8.0.pyc",
    "infra/converge_cli/scaffold/template.yaml.rej",
    "infra/converge_cli/scaffold/functions/worker/app.py.orig",
)


def _tracked() -> list[str]:
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: the tracked files are what the distribution is compared with")
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    return [path for path in listed.decode().split("\0") if path and (ROOT / path).is_file()]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[str], list[str], list[str]]:
    """(tracked files, sdist members without their top directory, wheel members), built from a littered copy."""
    tracked = _tracked()
    tree = tmp_path_factory.mktemp("tree")
    for path in tracked:
        (tree / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / path, tree / path)
    for path in DEBRIS:
        (tree / path).parent.mkdir(parents=True, exist_ok=True)
        (tree / path).write_text("debris\n")
    dist = tmp_path_factory.mktemp("dist")
    done = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(dist), str(tree)], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    [sdist] = dist.glob("*.tar.gz")
    [wheel] = dist.glob("*.whl")
    with tarfile.open(sdist) as archive:
        sdist_members = [m.name.split("/", 1)[1] for m in archive.getmembers() if m.isfile()]
    with zipfile.ZipFile(wheel) as archive:
        wheel_members = [name for name in archive.namelist() if not name.endswith("/")]
    return tracked, sdist_members, wheel_members


def _shipped(path: str) -> bool:
    """A tracked file the distribution ships: it is in a package directory and is no patch leftover."""
    return path.startswith(PACKAGE_DIRS) and not path.endswith((".orig", ".rej"))


def test_the_sdist_is_the_packages_the_readme_and_the_changelog_and_nothing_else(built) -> None:
    tracked, sdist, _ = built
    # Given the sdist built from a copy of the tracked files, littered with a working copy's debris
    members = set(sdist)
    expected = {path for path in tracked if _shipped(path)} | TOP_LEVEL
    # Then it holds every shipped file, the scaffold's included...
    missing = sorted(expected - members)
    assert missing == []
    assert {p for p in members if p.startswith("infra/converge_cli/scaffold/")} >= {
        "infra/converge_cli/scaffold/template.yaml",
        "infra/converge_cli/scaffold/ci/run",
        "infra/converge_cli/scaffold/shared/__package__/__init__.py",
    }
    # ...and nothing else: no environment, cache, bytecode or leftover (setuptools' own egg-info aside)
    unexpected = sorted(m for m in members - expected if not m.startswith("converge_jobs.egg-info/"))
    assert unexpected == [], "\n".join(["in the sdist but not converge's:", *unexpected])


def test_the_wheel_holds_the_same_packages_and_nothing_of_the_working_copy(built) -> None:
    tracked, _, wheel = built
    # Given the wheel (built from the sdist), with its packages' paths as in the tree
    as_in_tree = {
        name: next(
            (d + name.split("/", 1)[1] for d in PACKAGE_DIRS if d.rstrip("/").endswith(name.split("/")[0])), None
        )
        for name in wheel
        if not name.startswith("converge_jobs-")
    }
    # Then every file comes from a shipped tracked file, and every shipped tracked file is there
    shipped = {path for path in tracked if _shipped(path)}
    assert sorted(name for name, path in as_in_tree.items() if path not in shipped) == []
    assert sorted(shipped - set(as_in_tree.values())) == []
