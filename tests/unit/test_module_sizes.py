"""docs/architecture.md's "Modules over 300 lines, and why" names exactly the modules of converge over 300 lines.

Each bullet of that section names its module (or modules) by path under `shared/converge`, in backticks,
before its size ("- `flow/pipeline.py` (about 460): why"). A module that grows past 300 lines needs its
reason written there; one that shrinks below is taken off the list.
"""

from __future__ import annotations

import re

from tests.conftest import ROOT

LIMIT = 300
PACKAGE = ROOT / "shared" / "converge"
PAGE = ROOT / "docs" / "architecture.md"
HEADING = "## Modules over 300 lines, and why"
NAMED = re.compile(r"`([^`]+\.py)`")


def long_modules() -> dict[str, int]:
    """Every module of converge over the limit, by its path under shared/converge, with its line count."""
    sizes = {path.relative_to(PACKAGE).as_posix(): len(path.read_text().splitlines()) for path in PACKAGE.rglob("*.py")}
    return {path: lines for path, lines in sizes.items() if lines > LIMIT}


def listed_modules() -> set[str]:
    """The modules the section's bullets name, each before its "(about N)"."""
    text = PAGE.read_text()
    assert HEADING in text, f"docs/architecture.md has no section {HEADING!r}"
    section = text.split(HEADING, 1)[1].split("\n## ", 1)[0]
    bullets = [line[2:].split("(about", 1)[0] for line in section.splitlines() if line.startswith("- ")]
    return {path for bullet in bullets for path in NAMED.findall(bullet)}


def test_the_section_parses_the_way_it_is_written() -> None:
    # Given the section as written / Then its bullets name modules, each one that exists
    listed = listed_modules()
    assert listed, "no module named in the section's bullets"
    assert sorted(path for path in listed if not (PACKAGE / path).is_file()) == []


def test_every_module_over_300_lines_has_its_reason_in_the_architecture_page() -> None:
    # Given converge's modules over 300 lines / Then each is named in the section
    missing = {path: lines for path, lines in long_modules().items() if path not in listed_modules()}
    assert missing == {}, f"over {LIMIT} lines and not in {PAGE.name}'s {HEADING!r}: say why, or split it"


def test_the_architecture_page_names_no_module_that_is_no_longer_over_300_lines() -> None:
    # Given the section's modules / Then none is at or under the limit now
    long = long_modules()
    stale = sorted(path for path in listed_modules() if path not in long)
    assert stale == [], f"named in {PAGE.name}'s {HEADING!r} but no longer over {LIMIT} lines: take it off"
