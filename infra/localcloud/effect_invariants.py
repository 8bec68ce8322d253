"""The effects invariant of a catalogue counted by resource (localcloud.effect_log): each operation's effects are
those of a clean run of the same job, give or take what its faults allow.

A team's job makes whatever effects it makes (a row and an e-mail, three objects): converge cannot know them in
advance, but it can know them from the run itself. The operations of one job type and one payload that SUCCEEDED
and saw no fault at all are clean runs: their effects by resource (distinct items and objects, messages) are the
job's. Then, for every operation of that job and payload:

- SUCCEEDED without a fault: exactly a clean run's effects (nothing lost, nothing twice);
- SUCCEEDED after faults: per resource, at least a clean run's, at most that plus the faults injected in its
  effect-to-claim window (each may cost one duplicate: effect_then_claim's duplicates over loss);
- any other end (NOOP, FAILED, UNKNOWN, PAUSED, ...): per resource at most a clean run's plus its window faults
  (a retry that found the work done, a job that failed part way); CANCELLED and EXPIRED ones are the time
  invariants' (none at all).

A job and payload with no clean run (every one of its operations saw a fault) is not checked; the check says how
many operations it held to a clean run.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from typing import Any

from converge.model.records import Operation
from converge.model.states import OperationState

from .checks import Check

_TIMED = frozenset({OperationState.CANCELLED, OperationState.EXPIRED})


def _job(operation: Operation) -> tuple[str, str]:
    return operation.job_type, json.dumps(operation.payload, sort_keys=True, default=str)


def _profile(made: dict[str, int]) -> tuple[tuple[str, int], ...]:
    return tuple(sorted((resource, number) for resource, number in made.items() if number))


def effects_as_a_clean_run(
    operations: dict[str, tuple[Operation, dict[str, Any]]], counted: Any, faults: Any = None
) -> Check:
    """The invariant of the module docstring, over every operation of a run."""
    injected = (
        (lambda op: bool(faults.operations[op].injected) if op in faults.operations else False) if faults else None
    )
    window = faults.window if faults is not None else (lambda _op: 0)
    clean: dict[tuple[str, str], Counter[tuple[tuple[str, int], ...]]] = defaultdict(Counter)
    for operation_id, (operation, _) in operations.items():
        if operation.state is OperationState.SUCCEEDED and not (injected and injected(operation_id)):
            clean[_job(operation)][_profile(counted.for_operation(operation_id))] += 1
    baselines = {job: dict(profiles.most_common(1)[0][0]) for job, profiles in clean.items()}
    violations: list[str] = []
    held = 0
    for operation_id, (operation, _) in sorted(operations.items()):
        baseline = baselines.get(_job(operation))
        if baseline is None or operation.state in _TIMED:
            continue
        held += 1
        made = counted.for_operation(operation_id)
        allowed = window(operation_id)
        faulted = bool(injected and injected(operation_id))
        for resource in sorted(set(made) | set(baseline)):
            number, clean_number = made.get(resource, 0), baseline.get(resource, 0)
            if operation.state is OperationState.SUCCEEDED:
                low, high = clean_number, clean_number + (allowed if faulted else 0)
            else:
                low, high = 0, clean_number + allowed
            if not low <= number <= high:
                violations.append(
                    f"{operation_id} {operation.state.value} ({operation.job_type}): {number} {resource}, "
                    f"allowed {low}..{high} (a clean run makes {clean_number}; {allowed} window fault(s))"
                )
    return Check(
        "effects_as_a_clean_run",
        not violations,
        f"{held} operations held to a clean run of their job and payload ({len(baselines)} jobs with one): "
        "SUCCEEDED without faults makes exactly its effects, by resource; with faults, no fewer and at most one more "
        "per fault in its effect-to-claim window; any other end, at most a clean run's plus those",
        violations,
    )
