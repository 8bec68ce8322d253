"""The demo's fan-out: a batch admitted (twice: the retry writes nothing), its children run, its callback once.

Checked from the emulated services and the stored records: each child ends as the scenario says and made its
policy's one effect when it SUCCEEDED (none otherwise; counted by resource, a team's: the same effects as every
sibling that SUCCEEDED with the same job and payload), the batch is complete with counts that match its
children, and the callback was written once, given those counts, ran once and made its one effect.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from converge.local_hooks import BatchStep
from converge.model.batches import BatchState, callback_id
from converge.model.records import Operation
from converge.model.states import OperationState
from converge_cli.commands.demo_effects import expected_effects, made_by

SUMMARY_FIELD = "batch_{}"
"""The callback payload's field for each final state's count (converge.BatchSummary)."""


def admit(demo: Any) -> None:
    """Admit the scenario's batch, then admit it again as a retrying producer would."""
    step: BatchStep | None = demo.scenario.batch
    if step is None:
        return
    demo.step(f"admitting the batch {step.batch_id}: {step.note}")
    first = demo.converge.enqueue_batch(step.batch_id, step.children, step.callback)
    demo.report.events["batches_admitted"] += int(first.created)
    again = demo.converge.enqueue_batch(step.batch_id, step.children, step.callback)
    demo.report.events["batch_readmissions_absorbed"] += int(not again.created)


def check(demo: Any, counted: Any, stored: dict[str, Operation], check: Any) -> int:
    """Append the batch's checks; returns how many e-mails its children and callback were meant to send."""
    step: BatchStep | None = demo.scenario.batch
    if step is None:
        return 0
    checks = demo.report.checks
    registry = demo.converge.registry
    batch = demo.converge.require_batches().get(step.batch_id)
    if batch is None:
        checks.append(check(f"batch {step.batch_id} admitted", False, "missing"))
        return 0
    checks.append(
        check(
            f"batch {step.batch_id} admitted once (its retried admission wrote nothing)",
            demo.report.events["batches_admitted"] == 1 and demo.report.events["batch_readmissions_absorbed"] == 1,
        )
    )
    emails = 0
    wrong: list[str] = []
    clean: dict[tuple[str, str], dict[str, int]] = {}  # counted by resource: each job and payload's first effects
    for position, child in enumerate(step.children):
        operation_id = batch.child_id(position, child.key)
        operation = stored.get(operation_id)
        wanted_state = step.expect[child.key]
        made = made_by(counted, operation_id)
        if counted.by_resource:
            same = (child.job_type, repr(sorted(child.payload.items())))
            first = clean.setdefault(same, made) if wanted_state is OperationState.SUCCEEDED else {}
            wanted = first if wanted_state is OperationState.SUCCEEDED else {}
        else:
            wanted = expected_effects(wanted_state, registry.get(child.job_type).policy, None)
        emails += wanted.get("ses", 0)
        if operation is None or operation.state is not wanted_state or (counted.counts_any and made != wanted):
            wrong.append(f"{operation_id}: {operation.state.value if operation else 'missing'}, {made}")
    shown = f"{emails} e-mail(s)" if not counted.by_resource else f"each made {_shown_first(clean)}"
    checks.append(
        check(
            f"{step.batch_id}: each of its {len(step.children)} children ended as planned, its effect made once",
            not wrong,
            "; ".join(wrong[:5]) or shown,
        )
    )
    expected = dict(Counter(state.value for state in step.expect.values()))
    counts = {state: number for state, number in batch.counts.items() if number}
    checks.append(
        check(
            f"{step.batch_id} complete, each child counted once",
            batch.state is BatchState.COMPLETE and counts == expected and dict(batch.summary or {}) == expected,
            f"{batch.state.value}, counts {counts}",
        )
    )
    checks.append(_callback(demo, step, counted, stored, expected, batch.completed_at, check))
    callback = stored.get(callback_id(step.batch_id))
    if callback is not None and callback.state is OperationState.SUCCEEDED:
        emails += made_by(counted, callback.operation_id).get("ses", 0)
    return emails


def _callback(
    demo: Any,
    step: BatchStep,
    counted: Any,
    stored: dict[str, Operation],
    expected: dict[str, int],
    completed_at: str | None,
    check: Any,
) -> Any:
    """The callback: written once (one request, no conflict), given the counts, run once, its one effect."""
    operation = stored.get(callback_id(step.batch_id))
    if operation is None:
        return check(f"{step.batch_id}: its callback ran once with the counts", False, "no callback")
    given = {state: operation.payload.get(SUMMARY_FIELD.format(state.lower()), 0) for state in expected}
    policy = demo.converge.registry.get(step.callback.job_type).policy
    made = made_by(counted, operation.operation_id)
    wanted = made if counted.by_resource else expected_effects(OperationState.SUCCEEDED, policy, None)
    last_child = max(
        (entry.at for child in _children(stored, step.batch_id) for entry in child.history if entry.state in _FINAL),
        default="",
    )
    ok = (
        operation.state is OperationState.SUCCEEDED
        and operation.attempts == 1
        and not operation.conflicts
        and given == expected
        and operation.payload.get("batch_total") == len(step.children)
        and (not counted.counts_any or made == wanted)
        and bool(completed_at)
        and last_child <= (operation.history[0].at if operation.history else "")
    )
    detail = f"{operation.state.value}, given {given}, {made}"
    return check(
        f"{step.batch_id}: its callback written once, after every child, with the counts, ran once", ok, detail
    )


def _shown_first(clean: dict[tuple[str, str], dict[str, int]]) -> str:
    made = next(iter(clean.values()), {})
    return ", ".join(f"{resource} {number}" for resource, number in sorted(made.items())) or "no effect"


_FINAL = {
    state.value
    for state in (
        OperationState.SUCCEEDED,
        OperationState.NOOP,
        OperationState.FAILED,
        OperationState.REJECTED,
        OperationState.CANCELLED,
        OperationState.EXPIRED,
    )
}


def _children(stored: dict[str, Operation], batch_id: str) -> list[Operation]:
    prefix = f"{batch_id}::"
    return [
        operation
        for operation_id, operation in stored.items()
        if operation_id.startswith(prefix) and operation_id != callback_id(batch_id)
    ]
