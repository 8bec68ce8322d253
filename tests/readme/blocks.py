"""The fenced code blocks of the README and the documentation site's pages, each named by its page, the
heading it sits under and its first line."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
_FENCE = re.compile(r"^```(\S*)\s*$")
_HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*$")


def pages() -> list[Path]:
    """The README and every page of the site (`docs/`, mkdocs.yml's docs_dir), in a stable order."""
    return [README, *sorted((ROOT / "docs").rglob("*.md"))]


@dataclass(frozen=True)
class Block:
    page: str  # relative to the repository's root: "README.md", "docs/enqueueing.md"
    heading: str
    language: str
    text: str

    @property
    def first_line(self) -> str:
        return next(line.strip() for line in self.text.splitlines() if line.strip())

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.page, self.heading, self.first_line)


def blocks(path: Path | None = None) -> list[Block]:
    """Every fenced block of one page, or of every page, in order; a heading is the nearest `#` line above it."""
    if path is None:
        return [found for page in pages() for found in blocks(page)]
    page = path.resolve().relative_to(ROOT).as_posix()
    found: list[Block] = []
    heading, language, lines, inside = "", "", [], False
    for line in path.read_text().splitlines():
        fence = _FENCE.match(line)
        if inside:
            if fence and not fence.group(1):
                found.append(Block(page, heading, language, "\n".join(lines) + "\n"))
                inside = False
            else:
                lines.append(line)
            continue
        if fence:
            language, lines, inside = fence.group(1), [], True
            continue
        match = _HEADING.match(line)
        if match:
            heading = match.group(1)
    return found


def headings(path: Path) -> list[str]:
    """Every heading of a page (outside its code blocks), as written."""
    found: list[str] = []
    inside = False
    for line in path.read_text().splitlines():
        fence = _FENCE.match(line)
        if inside:
            inside = not (fence and not fence.group(1))
        elif fence:
            inside = True
        elif match := _HEADING.match(line):
            found.append(match.group(1))
    return found


def block(page: str, heading: str, first_line: str) -> Block:
    """The one block of `page` under `heading` whose first line is `first_line` (it fails loudly when edited away)."""
    [found] = [b for b in blocks(ROOT / page) if b.key == (page, heading, first_line)]
    return found


def check_step(name: str) -> list[str]:
    """The commands of one step of the README's test command (`infra/check`), a function of that script."""
    script = (ROOT / "infra" / "check").read_text()
    body = script.split(f"\n{name}() {{\n", 1)[1].split("\n}\n", 1)[0]
    return body.splitlines()
