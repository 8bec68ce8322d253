"""Flow control under faults: no job held by a rate limit or a concurrency cap reaches a DLQ or is lost.

A job held by flow control waits SCHEDULED with its reason on its receipt (docs/flow-control.md): "rate limited
by ...", "<limiter> asked to wait ..." (an upstream's 429), or "concurrency ..." (a cap full, or its key paused).
Over a run's operations (`invariants.operations_in`), each such job that never started must not be in a DLQ or the
relay's failure queue, and each still open must be listed (under SCHEDULED while it waits, STUCK, or PAUSED).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from converge.flow.registry import Registry
from converge.model.records import Operation
from converge.model.states import FINAL_STATES

from .checks import Check
from .invariants import dead_lettered

HELD_BY_A_LIMIT = ("rate limited by ", "asked to wait until ")
HELD_BY_A_CAP = "concurrency "


def held_by(operation: Operation) -> str | None:
    """ "rate limit" or "concurrency cap" when flow control held the job at least once, else None."""
    for entry in operation.history:
        if entry.reason.startswith(HELD_BY_A_CAP):
            return "concurrency cap"
        if entry.reason.startswith(HELD_BY_A_LIMIT[0]) or HELD_BY_A_LIMIT[1] in entry.reason:
            return "rate limit"
    return None


def flow_control_kept(
    cloud: Any,
    registry: Registry,
    operations: dict[str, tuple[Operation, dict[str, Any]]],
    listed: Callable[[str], set[str]],
) -> Check:
    """No throttled or capped job dead-lettered or lost: the check `converge demo --chaos` reports."""
    flowing = {b.job_type for b in registry if b.uses or b.concurrency is not None}
    held: dict[str, str] = {}
    for operation_id, (operation, _) in operations.items():
        if operation.job_type in flowing and (kind := held_by(operation)) is not None:
            held[operation_id] = kind
    in_dlq = dead_lettered(cloud)
    still_open = [op for op in held if operations[op][0].state not in FINAL_STATES]
    # Listings are read only when a held job is still open (each is a paged query)
    waiting = set().union(*(listed(state) for state in ("SCHEDULED", "STUCK", "PAUSED"))) if still_open else set()
    violations: list[str] = []
    for operation_id, kind in sorted(held.items()):
        operation = operations[operation_id][0]
        never_started = operation.record is None or operation.record.attempts == 0
        if never_started and in_dlq.get(operation_id):
            violations.append(f"{operation_id}: held by a {kind}, never started, in a DLQ")
        if operation.state not in FINAL_STATES and operation_id not in waiting:
            violations.append(f"{operation_id}: held by a {kind}, {operation.state.value}, and not listed (lost)")
    limits = sum(kind == "rate limit" for kind in held.values())
    return Check(
        "flow_control_kept",
        not violations,
        f"{limits} jobs held by a rate limit and {len(held) - limits} by a concurrency cap: none dead-lettered "
        "or lost (each ended, or waits listed)",
        violations,
    )
