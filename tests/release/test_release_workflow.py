"""The release workflow (.github/workflows/release.yml): a vX.Y.Z tag builds, checks and publishes the wheel and the
sdist to PyPI with trusted publishing, and the tag must be the version pyproject.toml holds."""

from __future__ import annotations

import re
import subprocess
import sys
from typing import Any

import yaml

from tests.conftest import ROOT
from tests.release.test_version import declared_version

WORKFLOW = ROOT / ".github" / "workflows" / "release.yml"


def workflow() -> dict[Any, Any]:
    loaded = yaml.safe_load(WORKFLOW.read_text())
    loaded["on"] = loaded.pop(True, loaded.get("on"))  # YAML 1.1 reads the key `on` as true
    return loaded


def test_a_version_tag_builds_checks_and_publishes_with_trusted_publishing() -> None:
    # Given the workflow
    release = workflow()
    # Then it runs on a v* tag, and only there
    assert release["on"] == {"push": {"tags": ["v*"]}}
    build, publish = release["jobs"]["build"], release["jobs"]["publish"]
    runs = " ".join(step.get("run", "") for step in build["steps"])
    # And its build makes the wheel and the sdist and checks them strictly, as the README's test command does
    assert "python -m build -o dist" in runs and "twine check --strict dist/*" in runs
    # And it publishes what that build made, only after it, with PyPI's trusted publishing: an OpenID Connect token
    # for this job alone (id-token: write), and no stored token or password anywhere
    assert publish["needs"] == "build" and publish["permissions"] == {"id-token": "write"}
    assert release["permissions"] == {"contents": "read"}
    uses = [step.get("uses", "") for step in publish["steps"]]
    assert uses[-1] == "pypa/gh-action-pypi-publish@release/v1" and not publish["steps"][-1].get("with")
    assert not re.search(r"password|api[-_]?token|secrets\.", WORKFLOW.read_text(), re.IGNORECASE)


def test_its_version_check_refuses_a_tag_that_is_not_pyprojects_version() -> None:
    # Given the workflow's step that compares the tag with the version
    [check] = [step for step in workflow()["jobs"]["build"]["steps"] if "GITHUB_REF_NAME" in step.get("run", "")]

    def on_tag(tag: str) -> subprocess.CompletedProcess[str]:
        env = {"GITHUB_REF_NAME": tag, "PATH": "/usr/bin:/bin"}
        script = check["run"].replace("python -c", f"{sys.executable} -c")  # setup-python's python, here this one
        return subprocess.run(["bash", "-ec", script], cwd=ROOT, env=env, capture_output=True, text=True)

    # When it runs on the tag of pyproject.toml's version, and on another / Then the first passes, the second fails
    assert on_tag(f"v{declared_version()}").returncode == 0
    refused = on_tag("v0.0.0-not-this")
    assert refused.returncode != 0 and "pyproject.toml holds" in refused.stderr
