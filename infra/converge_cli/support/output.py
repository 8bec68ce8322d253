"""How every command prints: values from data exactly as stored, and layouts that never cut them.

An operator copies what the screen shows into the next command, so nothing that came from data
(operation ids, payloads, reasons, ARNs, parameter names) may be rewritten on the way out. rich would
read `order:new:42` as an emoji code and `[bold]x[/bold]` as markup; the consoles here interpret
neither, and the commands' own emphasis is built from `Text` with a style, never from markup.

Tabular output goes through `records()`: a table when every cell fits on one line at the terminal's
width, otherwise one block per record (a heading line, then one `label  value` line per field, never
wrapped by us), so a long id or job type is never truncated and stays contiguous for copying.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from rich.cells import cell_len
from rich.console import Console
from rich.table import Table
from rich.text import Text

Cell = str | Text | int | float | bool | None


def stdout(file: TextIO | None = None) -> Console:
    """A console on standard output, built now so that it sees the current COLUMNS and stream.

    Without `file` it writes to whatever sys.stdout is at each print; pass the stream to hold on to it
    (for printing from a thread while a function's output is being captured)."""
    return Console(file=file, markup=False, emoji=False, highlight=False)


def stderr() -> Console:
    return Console(stderr=True, markup=False, emoji=False, highlight=False)


def literal(value: Cell) -> Text:
    """A value from data, exactly as it is (None prints as nothing)."""
    if isinstance(value, Text):
        return value
    return Text("" if value is None else str(value))


def styled(text: str, style: str) -> Text:
    """The command's own words with emphasis (never data: data goes through literal())."""
    return Text(text, style=style)


def joined(*parts: Cell) -> Text:
    """One line from the command's own styled words and literal values."""
    line = Text()
    for part in parts:
        line.append_text(literal(part))
    return line


def say(console: Console, *parts: Cell) -> None:
    """Print one line, never wrapped by rich: the terminal wraps it, so copied values stay whole."""
    console.print(joined(*parts), soft_wrap=True)


@dataclass(frozen=True)
class Column:
    label: str
    justify: str = "left"


def records(
    console: Console,
    columns: Sequence[Column | str],
    rows: Iterable[Sequence[Cell]],
    title: str | None = None,
    omit_empty: bool = False,
) -> None:
    """Rows as a table if each fits on one line at this width, else one block per row (see the module doc).

    A block leaves out empty fields, and with `omit_empty` also placeholders ("·", "-")."""
    heads = [column if isinstance(column, Column) else Column(column) for column in columns]
    cells = [[literal(cell) for cell in row] for row in rows]
    if title:  # above the table, not in it: a table's title wraps at the table's width
        say(console, styled(title, "bold"))
    if _table_fits(console.width, heads, cells):
        table = Table()
        for head in heads:
            table.add_column(head.label, justify=head.justify, no_wrap=True)  # type: ignore[arg-type]
        for row in cells:
            table.add_row(*row)
        console.print(table)
        return
    width = max((cell_len(head.label) for head in heads[1:]), default=0)
    for row in cells:
        heading = row[0].copy() if row[0].plain else styled("-", "dim")
        heading.stylize("bold")
        say(console, styled("- ", "dim"), heading)
        for head, cell in zip(heads[1:], row[1:], strict=False):
            if not cell.plain or (omit_empty and cell.plain in ("·", "-")):
                continue
            say(console, "  ", styled(head.label.ljust(width), "dim"), "  ", cell)


def _table_fits(width: int, heads: Sequence[Column], rows: Sequence[Sequence[Text]]) -> bool:
    if any("\n" in cell.plain for row in rows for cell in row):
        return False
    widths = [cell_len(head.label) for head in heads]
    for row in rows:
        for index, cell in enumerate(row[: len(widths)]):
            widths[index] = max(widths[index], cell_len(cell.plain))
    # rich's default box: one border per column plus one, and one space of padding on each side of a cell.
    return sum(widths) + 3 * len(widths) + 1 <= width


def fields(console: Console, pairs: Iterable[tuple[str, Cell]]) -> None:
    """`label  value` lines (a record shown on its own), values literal and never wrapped by rich."""
    items = list(pairs)
    width = max((cell_len(label) for label, _ in items), default=0)
    for label, value in items:
        say(console, styled(label.ljust(width), "dim"), "  ", value)


def print_json(value: Any) -> None:
    """A JSON document on standard output (the only thing on it under --json)."""
    sys.stdout.write(json.dumps(value, indent=2, sort_keys=True, default=str) + "\n")
    sys.stdout.flush()
