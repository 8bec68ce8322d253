"""The README's fenced code blocks, each named by the heading it sits under and its first line."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"
_FENCE = re.compile(r"^```(\S*)\s*$")
_HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*$")


@dataclass(frozen=True)
class Block:
    heading: str
    language: str
    text: str

    @property
    def first_line(self) -> str:
        return next(line.strip() for line in self.text.splitlines() if line.strip())

    @property
    def key(self) -> tuple[str, str]:
        return (self.heading, self.first_line)


def blocks(path: Path = README) -> list[Block]:
    """Every fenced block in order; a heading is the nearest `#` line above the block."""
    found: list[Block] = []
    heading, language, lines, inside = "", "", [], False
    for line in path.read_text().splitlines():
        fence = _FENCE.match(line)
        if inside:
            if fence and not fence.group(1):
                found.append(Block(heading, language, "\n".join(lines) + "\n"))
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


def block(heading: str, first_line: str) -> Block:
    """The one block under `heading` whose first line is `first_line` (it fails loudly when edited away)."""
    [found] = [b for b in blocks() if b.key == (heading, first_line)]
    return found
