"""docs/development.md's "Where a test goes": each directory of tests/ is one it describes, and no test file is
named for the kind of test it holds rather than its subject."""

from __future__ import annotations

import re

from .blocks import ROOT

KIND_SUFFIXES = ("_rules", "_tests", "_cases", "_misc", "_more", "_extra")


def where_a_test_goes() -> str:
    page = (ROOT / "docs" / "development.md").read_text()
    return page.split("## Where a test goes", 1)[1].split("\n## ", 1)[0]


def test_every_test_directory_is_one_the_rule_names():
    # Given the rule as the page writes it, and the directories under tests/ that hold tests
    rule = where_a_test_goes()
    named = set(re.findall(r"`tests/([a-z_]+)`", rule))
    directories = {path.parent.name for path in (ROOT / "tests").glob("*/test_*.py")}
    # Then each directory is named by the rule, and the rule names none that is gone
    assert directories - named == set(), f"add these to docs/development.md's rule: {directories - named}"
    assert named - directories == set(), f"the rule names directories with no tests: {named - directories}"


def test_no_test_file_is_named_for_its_kind():
    # Given every test module of the suite
    files = sorted((ROOT / "tests").rglob("test_*.py"))
    # Then none ends in a kind of test instead of a part of its subject
    kinds = [str(path.relative_to(ROOT)) for path in files if path.stem.endswith(KIND_SUFFIXES)]
    assert kinds == [], f"name these for their subject (docs/development.md, 'Where a test goes'): {kinds}"
    assert len(files) > 100
