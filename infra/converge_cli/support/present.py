"""How an operation reads on screen: its current outcome first, earlier errors apart, the receipt below.

Shared by every command that shows operations, so an id, a reason or a payload looks the same in each.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from rich.console import Console
from rich.text import Text

from converge.model.clock import iso
from converge.model.records import Operation
from converge.model.states import OperationState
from converge_cli.support.output import Cell, fields, literal, records, say, styled

PROBLEM_STATES = {OperationState.FAILED.value, OperationState.UNKNOWN.value, OperationState.REJECTED.value}
STATE_STYLES = {
    "SUCCEEDED": "green",
    "NOOP": "green",
    "FAILED": "red",
    "UNKNOWN": "bold red",
    "REJECTED": "red",
    "PAUSED": "yellow",
    "SCHEDULED": "cyan",
    "CANCELLED": "yellow",
    "EXPIRED": "yellow",
}
LISTING_COLUMNS = ["operation id", "job type", "state", "attempts", "listed", "reason"]


def state_text(state: str) -> Text:
    return styled(state, STATE_STYLES.get(state, "bold"))


def earlier_errors(operation: Operation) -> list[tuple[str, str, str]]:
    """(attempt, at, error) of the errors but the current outcome's, oldest first: the store keeps them apart from it
    (a signal item's rewrites are answered after its first answer, which stands as its current error)."""
    return [(f"#{entry['attempt']}", entry["at"], entry["error"]) for entry in operation.to_json()["errors"]]


def show_operation(console: Console, operation: Operation) -> None:
    """One operation: who it is, where it stands now, what went wrong before, then its whole history."""
    view = operation.to_json()
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
    if operation.state.value in PROBLEM_STATES or operation.last_error:  # e.g. the error a retry waits on
        rows.append(("error", operation.last_error or "-"))
    if view["stuck"]:
        rows.append(("stuck", f"{view['stuck']['kind']}: {view['stuck']['reason']}"))
    if view["lease"]:
        rows.append(("lease", f"{view['lease']['owner']} until {view['lease']['until']}"))
    rows += [
        ("attempts", operation.attempts),
        ("redrives", operation.redrives),
        ("request", view["request"]),
        ("correlation id", operation.correlation_id or "-"),
        *([("parent", operation.parent_id)] if operation.parent_id else []),
        *(
            [
                (
                    "continues with",
                    ", ".join(f"{c.operation_id} ({c.follows}, {c.state})" for c in operation.continuations),
                )
            ]
            if operation.continuations
            else []
        ),
        ("payload", json.dumps(operation.payload, sort_keys=True, ensure_ascii=False)),
        ("created", operation.created_at or "-"),
        ("updated", operation.updated_at or "-"),
    ]
    fields(console, rows)
    if view["conflicts"]:
        say(console)
        records(
            console,
            ["at", "job type", "source"],
            [(c["at"], c["job_type"], c["source"]) for c in view["conflicts"]],
            title="identity conflicts (other content written under this id; the original is what runs)",
        )
    if operation.steps:
        say(console)
        records(
            console,
            ["step", "policy", "state", "at", "result"],
            [
                (step.name, step.policy, step.state.value, step.at, _step_result(step.result, step.note))
                for step in operation.steps
            ],
            title="steps (each claimed by its marker; a retry runs none of these again)",
        )
    errors = earlier_errors(operation)
    if errors:
        say(console)
        title = "earlier errors and rewrites' answers (oldest first; the current error is above)"
        records(console, ["attempt", "at", "error"], errors, title=title)
    say(console)
    records(
        console,
        ["state", "at", "reason"],
        [(state_text(entry.state), entry.at, entry.reason) for entry in operation.history],
        title="history (the stored receipt)",
    )


def _step_result(result: Any, note: str) -> str:
    shown = "-" if result is None else json.dumps(result, sort_keys=True, ensure_ascii=False)
    return f"{shown} ({note})" if note else shown


def row_reason(row: Mapping[str, Any]) -> str:
    """Why a listing row is listed: the stuck reason, the latest conflict, or the last error."""
    if row.get("stuck_reason"):
        return str(row["stuck_reason"])
    if row.get("state") == OperationState.SCHEDULED.value and row.get("run_at") is not None:
        return f"due at {iso(float(row['run_at']))}"
    conflicts = row.get("conflicts") or []
    if conflicts:
        latest = conflicts[-1]
        dropped = int(row.get("conflicts_dropped") or 0)
        more = f" (+{len(conflicts) - 1 + dropped} more)" if len(conflicts) > 1 or dropped else ""
        return f"other content ({latest.get('job_type')}) at {latest.get('at')}{more}"
    return str(row.get("last_error") or "")


def listing_rows(rows: Iterable[Mapping[str, Any]]) -> list[list[Cell]]:
    """Rows of an operations listing (JSON-shaped items from the store) for records()."""
    return [
        [
            styled(str(row.get("operation_id", "")), "bold"),
            str(row.get("job_type", "")),
            state_text(str(row.get("state", ""))),
            str(row.get("attempts", "")),
            str(row.get("listed_at") or row.get("updated_at") or ""),
            row_reason(row),
        ]
        for row in rows
    ]
