"""How an operation reads on screen: its current outcome first, earlier errors apart, the receipt below.

Shared by every command that shows operations, so an id, a reason or a payload looks the same in each.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from rich.console import Console
from rich.text import Text

from converge.operations import Operation, OperationState
from converge_cli.output import Cell, fields, literal, records, say, styled

PROBLEM_STATES = {OperationState.FAILED.value, OperationState.UNKNOWN.value, OperationState.REJECTED.value}
STATE_STYLES = {
    "SUCCEEDED": "green",
    "NOOP": "green",
    "FAILED": "red",
    "UNKNOWN": "bold red",
    "REJECTED": "red",
    "PAUSED": "yellow",
}
LISTING_COLUMNS = ["operation id", "job type", "state", "attempts", "updated", "last error"]


def state_text(state: str) -> Text:
    return styled(state, STATE_STYLES.get(state, "bold"))


def earlier_errors(operation: Operation) -> list[tuple[str, str, str]]:
    """(state, at, reason) of the problems before the current outcome (the current one is not earlier)."""
    current_is_problem = operation.state.value in PROBLEM_STATES
    entries = list(operation.history)
    if current_is_problem and entries and entries[-1].state == operation.state.value:
        entries = entries[:-1]
    found = [(entry.state, entry.at, entry.reason) for entry in entries if entry.state in PROBLEM_STATES]
    reasons = {reason for _, _, reason in found}
    if operation.last_error and not current_is_problem and operation.last_error not in reasons:
        found.append(("last error", "", operation.last_error))
    return found


def show_operation(console: Console, operation: Operation) -> None:
    """One operation: who it is, where it stands now, what went wrong before, then its whole history."""
    last = operation.history[-1] if operation.history else None
    outcome = Text()
    outcome.append_text(state_text(operation.state.value))
    if last and last.state == operation.state.value:
        outcome.append_text(literal(f" at {last.at}" if last.at else ""))
        if last.reason:
            outcome.append_text(literal(f": {last.reason}"))
    rows: list[tuple[str, Cell]] = [
        ("operation", styled(operation.operation_id, "bold")),
        ("job type", operation.job_type),
        ("outcome", outcome),
    ]
    if operation.state.value in PROBLEM_STATES:
        rows.append(("error", operation.last_error or "-"))
    rows += [
        ("attempts", f"{operation.attempts} (since the last dispatch)" if operation.redrives else operation.attempts),
        ("redrives", operation.redrives),
        ("correlation id", operation.correlation_id or "-"),
        ("payload", json.dumps(operation.payload, sort_keys=True, ensure_ascii=False)),
        ("created", operation.created_at or "-"),
        ("updated", operation.updated_at or "-"),
    ]
    fields(console, rows)
    errors = earlier_errors(operation)
    if errors:
        say(console)
        records(console, ["earlier error", "at", "reason"], errors, title="earlier errors (before the outcome above)")
    say(console)
    records(
        console,
        ["state", "at", "reason"],
        [(state_text(entry.state), entry.at, entry.reason) for entry in operation.history],
        title="history (the stored receipt)",
    )


def listing_rows(rows: Iterable[Mapping[str, Any]]) -> list[list[Cell]]:
    """Rows of an operations listing (JSON-shaped items from the store) for records()."""
    return [
        [
            styled(str(row.get("operation_id", "")), "bold"),
            str(row.get("job_type", "")),
            state_text(str(row.get("state", ""))),
            str(row.get("attempts", "")),
            str(row.get("updated_at", "")),
            str(row.get("last_error") or ""),
        ]
        for row in rows
    ]
