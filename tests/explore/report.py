"""The explorer-power report: what a run's output says (histories, the shrunk history), and its page in docs/."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

BEGIN, END = "<!-- explore-power report: written by make explore-power -->", "<!-- end of the report -->"


def histories_explored(output: str) -> int | None:
    """How many histories the run explored (its last summary line), or None if it printed none."""
    counts = re.findall(r"explored (\d+) histories", output)
    return int(counts[-1]) if counts else None


def histories_started(output: str) -> int | None:
    """How many histories a run cut off at its budget had started (its last progress line), or None."""
    counts = re.findall(r"explore: (\d+) histories", output)
    return int(counts[-1]) if counts else None


def histories_to_find(output: str) -> int | None:
    """The history in which the run met its first break (the explorer's notice of it), or None if it met none."""
    found = re.search(r"explore: first \w+ in history (\d+)", output)
    return int(found.group(1)) if found else None


_ENDED_DRAWN_DIFFERENTLY = r"^explore: batch (\d+) ended by a history drawn differently twice$"


def batches_drawn_differently(output: str) -> int:
    """How many batches ended because a history's draws differed when it ran again (not a break: the run went on)."""
    return len(re.findall(_ENDED_DRAWN_DIFFERENTLY, output, re.MULTILINE))


DRAWN_DIFFERENTLY_LINES = 40
"""At most this many lines kept of what Hypothesis said of each batch so ended."""
_SAID_OF_A_DIFFERENT_DRAW = (
    "Steps leading up",
    "while drawing from",
    "while selecting a rule",
    "Inconsistent",
    "The second",
    "  first:",
    "  second:",
)


def drawn_differently(output: str) -> list[str]:
    """What Hypothesis said of each batch ended by a history drawn differently: the steps leading up to the draw that
    differed (stateful tests print them) and the strategies it was drawn from, so that a run names where the
    explorer's draws depend on something outside the history."""
    said = []
    for ended in re.finditer(_ENDED_DRAWN_DIFFERENTLY, output, re.MULTILINE):
        began = output.rfind(f"explore: batch {ended.group(1)}, seed", 0, ended.start())
        lines, steps = [], False
        for line in output[max(began, 0) : ended.start()].splitlines():
            if line.startswith("Steps leading up"):
                steps = True
            elif steps and not line.startswith("  "):
                steps = False
            if steps or any(mark in line for mark in _SAID_OF_A_DIFFERENT_DRAW):
                lines.append(line.rstrip())
        said.append("\n".join(lines[:DRAWN_DIFFERENTLY_LINES]))
    return said


def shrunk_history(output: str) -> str | None:
    """The first falsifying history Hypothesis printed, from `state = Explorer()` to its teardown."""
    found = re.search(r"^state = Explorer\(\)$.*?^state\.teardown\(\)$", output, flags=re.MULTILINE | re.DOTALL)
    return found.group(0) if found else None


def page(run: dict[str, Any]) -> str:
    """The report's section of docs/explorer-power.md, from a run's JSON."""
    breaks = run["breaks"]
    found = [b for b in breaks if b["found"] and b["expected_kind"]]
    other = [b for b in breaks if b["found"] and not b["expected_kind"]]
    lines = [
        f"Run of {run['started']} ({run['minutes']} minutes): {len(found)} of {len(breaks)} breaks found (the kind "
        f"they expect) within {run['budget_s']:.0f} s each, {len(other)} met another break first; "
        f"{run['jobs']} at once on {run['cores']} cores; load average "
        f"{' / '.join(str(x) for x in run['load_before'])} before, {' / '.join(str(x) for x in run['load_after'])} "
        f"after (1, 5 and 15 minutes). `--seed {run['first_seed']}` replays it.{_sittings(run)}",
        "",
        "| Break | Found | Kind raised (expected) | Time to find | Histories (to find) | Seed |",
        "|---|---|---|---|---|---|",
    ]
    for b in breaks:
        kind = f"{b['kind']}{'' if b['expected_kind'] else ' (another break)'}" if b["found"] else "-"
        to_find = f"{b['seconds_to_find']:.0f} s" if b["found"] else f"not in {b['budget_s']:.0f} s"
        lines.append(
            f"| `{b['name']}`: {b['title']} | {verdict(b)} | {kind} ({', '.join(b['expect'])}) "
            f"| {to_find} | {b['histories'] if b['histories'] is not None else '-'}"
            f"{' (' + str(b['histories_to_find']) + ')' if b['histories_to_find'] else ''} | {b['seed']} |"
        )
    shrunk = [b for b in found if b["history"]]
    if shrunk:
        lines += ["", "### The shrunk histories", ""]
        for b in shrunk:
            # Indented, not fenced: a fenced block on a page is an example the readme tests must cover.
            lines += [f"`{b['name']}` ({b['kind']}):", "", *("    " + line for line in b["history"].splitlines()), ""]
    notes = [b for b in breaks if b["note"]]
    if notes:
        lines += ["", "### Notes", ""] + [f"- `{b['name']}`: {b['note']}" for b in notes]
    return "\n".join(lines).rstrip() + "\n"


def _sittings(run: dict[str, Any]) -> str:
    """What the run has measured so far, when not every break asked for, and its sittings, when more than one."""
    said = ""
    asked, measured = run.get("asked", len(run["breaks"])), len(run["breaks"])
    if measured < asked:
        said += (
            f" **Measured {measured} of the {asked} breaks asked for so far**: `make explore-power RESUME=1` measures"
            " the rest on the same tree."
        )
    sittings = run.get("sittings", [])
    if len(sittings) > 1:
        each = "; ".join(
            f"{s['started']}, {s['minutes']} minutes, load {' / '.join(str(x) for x in s['load_before'])} before"
            for s in sittings
        )
        said += f" In {len(sittings)} sittings on the same tree ({run.get('tree')}): {each}."
    return said


def verdict(b: dict[str, Any]) -> str:
    if not b["found"]:
        return "**no**"
    return "yes" if b["expected_kind"] else "**another break first**"


def write(path: Path, section: str) -> None:
    """Replace the report's section of the page (between its markers), keeping the page's own text."""
    text = path.read_text(encoding="utf-8")
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    path.write_text(text[:start] + "\n\n" + section + "\n" + text[end:], encoding="utf-8")
