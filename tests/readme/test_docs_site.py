"""The documentation site (mkdocs.yml, docs/) and the README as its landing page: nothing the README said
was lost when it moved, every page is in the navigation, the API reference is the public API.

`mkdocs build --strict` (in the test command) checks the links, anchors and API references; these tests check
what a build cannot: where each of the README's former sections lives, and that the landing page stays one.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import converge

from .blocks import README, ROOT, check_step, headings, pages

DOCS = ROOT / "docs"

# The README's headings before the site (a reference manual of about 1,600 lines), each with the page that
# holds its section now, under the same heading. A section may move again: change its page here.
HOMES: dict[str, str] = {
    "converge": "docs/index.md",
    "Quick start": "docs/getting-started.md",
    "What the demo shows": "docs/getting-started.md",
    "The reference application": "docs/getting-started.md",
    "How it works": "docs/how-it-works.md",
    "What a job costs": "docs/how-it-works.md",
    "Enqueueing": "docs/enqueueing.md",
    "The item shape (a public contract)": "docs/enqueueing.md",
    "From Python": "docs/enqueueing.md",
    "From the command line": "docs/enqueueing.md",
    "The enqueue API (HTTP)": "docs/http-api.md",
    "Authentication: IAM (SigV4)": "docs/http-api.md",
    "`POST /jobs/{job_type}`: enqueue a job": "docs/http-api.md",
    "`GET /operations/{operation_id}`: an operation's state": "docs/http-api.md",
    "`GET /admin/operations/{operation_id}`: any operation (operators)": "docs/http-api.md",
    "Idempotency-Key semantics": "docs/http-api.md",
    "`POST /operations/{operation_id}/cancel`: cancel an operation that has not started": "docs/http-api.md",
    "Status codes": "docs/http-api.md",
    "Examples against `converge local up`": "docs/http-api.md",
    "Time and flow control": "docs/time-and-flow.md",
    "Delayed jobs: `run_at`": "docs/time-and-flow.md",
    "Cancel": "docs/time-and-flow.md",
    "Expiry: `expires_at`": "docs/time-and-flow.md",
    "Tenant fairness": "docs/time-and-flow.md",
    "Concurrency caps": "docs/time-and-flow.md",
    "What a delayed job costs": "docs/time-and-flow.md",
    "What a message may contain": "docs/messages.md",
    "Identifier types": "docs/messages.md",
    "The heuristics, and how well they do": "docs/messages.md",
    "Allowing a field": "docs/messages.md",
    "The local cloud": "docs/local-cloud.md",
    "Every call is checked against the function's role": "docs/local-cloud.md",
    "Deploying": "docs/deploying.md",
    "A customer-managed key": "docs/deploying.md",
    "Scanned by checkov": "docs/deploying.md",
    "SnapStart": "docs/deploying.md",
    "Lean Lambdas": "docs/lean-lambdas.md",
    "Operating": "docs/operating.md",
    "Console": "docs/console.md",
    "Fault injection and load": "docs/fault-injection.md",
    "The explorer": "docs/fault-injection.md",
    "Benchmarks": "docs/benchmarks.md",
    "Cold start as Lambda pays it": "docs/benchmarks.md",
    "SnapStart: what it costs and when it pays off": "docs/benchmarks.md",
    "How it is measured": "docs/benchmarks.md",
    "Layout": "docs/layout.md",
    "Development": "docs/development.md",
}
# Part of "Operating" moved to a page of its own: its paragraphs, each led by its bold title.
OPERATING_MOVED = {
    "docs/dead-letters.md": [
        "**Dead letters one by one.**",
        "**Redrive.**",
        "**Resolving UNKNOWN.**",
        "**Nothing stays invisible.**",
    ]
}


def sections(path: Path) -> dict[str, str]:
    """Each heading of a page with the text under it, up to the next heading (code blocks included)."""
    found: dict[str, str] = {}
    names = headings(path)
    current: str | None = None
    inside = False
    for line in path.read_text().splitlines():
        if line.startswith("```"):
            inside = not inside if line.strip() == "```" or not inside else inside
        heading = re.match(r"^#{1,6}\s+(.*?)\s*$", line) if not inside else None
        if heading and heading.group(1) in names:
            current = heading.group(1)
            found.setdefault(current, "")
        elif current is not None:
            found[current] += line + "\n"
    return found


def test_each_former_readme_section_lives_on_its_page_with_its_content():
    # Given the README's headings before the site, and the page each was moved to
    for heading, page in HOMES.items():
        # Then that page has the heading, and text under it (the section moved whole, not just its title)
        found = sections(ROOT / page)
        assert heading in found, f"{heading!r} is no longer on {page}: move it back or update HOMES"
        assert found[heading].strip(), f"{heading!r} on {page} is empty"
    for page, leads in OPERATING_MOVED.items():
        text = (ROOT / page).read_text()
        assert all(lead in text for lead in leads), page


def test_the_readme_is_a_landing_page_that_links_to_pages_that_exist():
    # Given the README
    text = README.read_text()
    # Then it stays short (what converge is, the two commands, one example, where to read on)
    assert len(text.splitlines()) <= 250
    assert "## Quick start" in text and "make docs" in text
    # And every relative link in it names a file of the repository (anchors are the site build's to check)
    targets = [target for target in re.findall(r"\]\(([^)#\s]+)[^)]*\)", text) if "://" not in target]
    assert targets
    missing = [target for target in targets if not (ROOT / target).exists()]
    assert missing == []
    # And it links to every page of the site's navigation but the home page and the generated mutation report
    linked = {target.removeprefix("docs/") for target in targets if target.startswith("docs/")}
    assert set(navigation()) - linked == {"index.md", "readme-examples.md", "mutation.md"} - linked


def navigation() -> list[str]:
    """The pages mkdocs.yml's nav lists, in order (its comments, such as a page still to come, excluded)."""
    nav = (ROOT / "mkdocs.yml").read_text().split("\nnav:\n", 1)[1].split("\n\n", 1)[0]
    return re.findall(r"^\s*- [^#\n]*?:?\s*([\w./-]+\.md)\s*$", nav, re.MULTILINE)


def test_every_page_is_in_the_navigation_once():
    # Given every Markdown page of the site
    on_disk = sorted(path.relative_to(DOCS).as_posix() for path in pages() if path != README)
    # Then the navigation lists each exactly once (a page outside it would be found only by search)
    listed = navigation()
    assert sorted(listed) == on_disk
    assert len(set(listed)) == len(listed)


def test_the_api_reference_is_the_public_api_each_name_once():
    # Given the API reference page's mkdocstrings directives
    names = re.findall(r"^::: converge\.(\w+)\s*$", (DOCS / "api.md").read_text(), re.MULTILINE)
    # Then they are converge.__all__, each rendered once: a new public name must be placed in the reference
    assert sorted(names) == sorted(converge.__all__)
    assert len(set(names)) == len(names)


def test_the_test_commands_site_build_fails_on_a_broken_anchor(tmp_path: Path):
    # Given the site build as the README's test command runs it, in a copy of the site
    [build] = [line.strip() for line in check_step("site") if "mkdocs build" in line]
    shutil.copytree(DOCS, tmp_path / "docs")
    shutil.copy2(ROOT / "mkdocs.yml", tmp_path / "mkdocs.yml")
    (tmp_path / "shared").symlink_to(ROOT / "shared")  # the API reference's source
    (tmp_path / "infra").symlink_to(ROOT / "infra")  # and its griffe extension (infra/griffe_submits.py)
    (tmp_path / ".venv-test").symlink_to(Path(sys.executable).parent.parent)

    def run() -> subprocess.CompletedProcess[str]:
        return subprocess.run(["bash", "-c", build], cwd=tmp_path, capture_output=True, text=True, timeout=300)

    # When it builds the site as it is / Then it passes
    built = run()
    assert built.returncode == 0, built.stderr
    # When a page links to an anchor its target does not have / Then the build fails, naming it
    with (tmp_path / "docs" / "index.md").open("a") as page:
        page.write("\nSee [the delays](time-and-flow.md#no-such-section).\n")
    broken = run()
    assert broken.returncode != 0 and "no-such-section" in broken.stderr
