"""infra/constraints/*.txt pin every distribution the dev and scan extras name, each inside what pyproject.toml asks.

The README's test command installs `.[dev]` and `.[scan]` under these pins; a requirement they do not pin would be
resolved afresh on every run, and a pin outside pyproject.toml's range would stop the install.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from tests.conftest import ROOT

PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
OWN = canonicalize_name(PROJECT["name"])


def pins(name: str) -> dict[str, Version]:
    found: dict[str, Version] = {}
    for line in (ROOT / "infra" / "constraints" / f"{name}.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            distribution, _, version = line.partition("==")
            assert version, f"{name}.txt: {line!r} is not name==version"
            found[canonicalize_name(distribution)] = Version(version)
    return found


def requirements(extra: str) -> list[Requirement]:
    """What installing `.[extra]` asks for on this Python: converge's dependencies, and the extra's requirements with
    the extras it names of converge itself unfolded."""

    def unfolded(name: str) -> list[Requirement]:
        asked: list[Requirement] = []
        for requirement in map(Requirement, PROJECT["optional-dependencies"][name]):
            if canonicalize_name(requirement.name) == OWN:
                asked += [inner for own in sorted(requirement.extras) for inner in unfolded(own)]
            else:
                asked.append(requirement)
        return asked

    everything = [*map(Requirement, PROJECT["dependencies"]), *unfolded(extra)]
    return [r for r in everything if r.marker is None or r.marker.evaluate({"extra": ""})]


@pytest.mark.parametrize("extra", ["dev", "scan"])
def test_every_requirement_is_pinned_inside_its_range(extra: str) -> None:
    # Given the extra's requirements (and converge's own) and the pins the test command installs under
    pinned = pins(extra)
    # Then each is pinned, to a release its specifier admits
    unpinned = sorted(r.name for r in requirements(extra) if canonicalize_name(r.name) not in pinned)
    assert unpinned == [], f"not in infra/constraints/{extra}.txt: run `make constraints`"
    outside = sorted(
        f"{r.name}=={pinned[canonicalize_name(r.name)]} (asked {r.specifier})"
        for r in requirements(extra)
        if not r.specifier.contains(pinned[canonicalize_name(r.name)], prereleases=True)
    )
    assert outside == [], "pins outside pyproject.toml's ranges: run `make constraints`"


def read_requirements(path: Path) -> list[Requirement]:
    """A requirements file's requirements, the files it includes with `-r` read in turn."""
    found: list[Requirement] = []
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line.startswith("-r "):
            found += read_requirements(path.parent / line.removeprefix("-r ").strip())
        elif line:
            found.append(Requirement(line))
    return found


def test_the_reference_applications_libraries_are_pinned_for_the_tests() -> None:
    pinned = pins("dev")
    asked = read_requirements(ROOT / "shared" / "catalogue" / "requirements.txt")
    assert asked, "the reference application names its libraries"
    for requirement in asked:
        name = canonicalize_name(requirement.name)
        assert name in pinned, requirement.name
        assert requirement.specifier.contains(pinned[name], prereleases=True), requirement
