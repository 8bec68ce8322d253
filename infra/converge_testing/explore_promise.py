"""The promise the explorer holds a team's catalogue to, and the kinds of break it names.

Read where it lands: effects from the cloud's effect counter (`Cloud.effects.of`, by operation id), states and
histories from the stored receipts, listings as `converge ops list` pages them, refusals from the roles' checks.
Each operation of a job is held to its job's clean run (explore_plan.py):

    EffectTwice           an exactly-once job (claim_then_effect, keyed_effect) made an effect more often than its
                          clean run does
    EffectsBeyondFaults   an effect_then_claim job made more than its clean run plus one per fault injected in its
                          effect-to-claim window (its promise: at worst one duplicate per such fault, never a loss)
    EffectLost            SUCCEEDED, with fewer effects than its clean run makes
    EffectWithoutStart    CANCELLED, EXPIRED or REJECTED without ever starting, yet an effect is counted for it
    OperationLost         once the cloud is quiet, neither final nor listed for an operator (or never written)
    UnknownUnlisted       UNKNOWN, and not on the UNKNOWN listing
    ContinuationWrong     a parent that SUCCEEDED without its continuation, or one that never did with one
    BatchIncomplete       every child final, yet the batch not complete or its callback not written
    MissingGrant          a function's role refused a call (the grant its template lacks)

The cheap checks run after every step; the rest once the history is quiet (`settled`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from converge.flow.registry import Policy
from converge.model.batches import BatchState, callback_id
from converge.model.links import ON_SUCCESS, continuation_id
from converge.model.records import Operation
from converge.model.states import FINAL_STATES, Flag, OperationState
from converge_testing.explore_plan import EXACTLY_ONCE, Plan
from localcloud.invariants import attention_lister, operations_stored

_S = OperationState
UNSTARTED_ENDS = frozenset({_S.CANCELLED, _S.EXPIRED, _S.REJECTED})


class Break(AssertionError):
    """A promise the catalogue did not keep under the explorer; the message names the operations and what was seen."""


class EffectTwice(Break):
    """An exactly-once job (claim_then_effect, keyed_effect) made an effect more often than its clean run does."""


class EffectsBeyondFaults(Break):
    """An effect_then_claim job made more than its clean run plus one per fault in its effect-to-claim window."""


class EffectLost(Break):
    """SUCCEEDED, with fewer effects than its clean run makes."""


class EffectWithoutStart(Break):
    """CANCELLED, EXPIRED or REJECTED without ever starting, yet an effect is counted for it."""


class OperationLost(Break):
    """Once the cloud is quiet: neither final nor listed for an operator, or never written at all."""


class UnknownUnlisted(Break):
    """UNKNOWN, and not on the UNKNOWN listing an operator reads."""


class ContinuationWrong(Break):
    """A parent that SUCCEEDED without its continuation, or one that never succeeded with one."""


class BatchIncomplete(Break):
    """Every child final, yet the batch not complete or its callback not written."""


class MissingGrant(Break):
    """A function's role refused a call: the template lacks a grant its code needs."""


KINDS: tuple[type[Break], ...] = (
    EffectTwice,
    EffectsBeyondFaults,
    EffectLost,
    EffectWithoutStart,
    OperationLost,
    UnknownUnlisted,
    ContinuationWrong,
    BatchIncomplete,
    MissingGrant,
)


def fail(kind: type[Break], violations: Iterable[str]) -> None:
    found = sorted(violations)
    if found:
        more = f" (and {len(found) - 3} more)" if len(found) > 3 else ""
        raise kind("; ".join(found[:3]) + more)


@dataclass
class History:
    """What one history asked for, and where its records are: every id it made starts with `prefix`."""

    prefix: str
    plan: Plan
    faults: Any
    enqueued: dict[str, str] = field(default_factory=dict)
    """Each operation a producer enqueued, and its job type."""
    batches: dict[str, int] = field(default_factory=dict)
    """Each batch admitted, and its number of children."""
    denials_before: int = 0


def operations_of(cloud: Any, prefix: str) -> dict[str, Operation]:
    """The history's operations (request and state record joined), read from the emulated tables in this process:
    a step's check runs hundreds of times a minute, and a scan through the API would be most of its time."""
    stored = operations_stored(cloud.local, lambda operation_id: operation_id.startswith(prefix))
    return {operation_id: operation for operation_id, (operation, _) in stored.items()}


def started(operation: Operation) -> bool:
    return any(entry.state == _S.IN_PROGRESS.value for entry in operation.history)


# -- after every step ---------------------------------------------------------------------------------------------


def every_step(cloud: Any, history: History, settled: bool = False) -> None:
    """Effects bounded by each job's clean run and its policy; nothing made by what never started; no refusal."""
    operations = operations_of(cloud, history.prefix)
    plan, faults = history.plan, history.faults
    twice, beyond, lost, unstarted = [], [], [], []
    for operation_id, operation in sorted(operations.items()):
        made = {k: v for k, v in cloud.effects.of(operation_id).items() if v}
        if operation.state in UNSTARTED_ENDS and not started(operation) and made:
            unstarted.append(f"{operation_id} {operation.state.value}, never started, yet made {made}")
        clean = plan.clean.get(operation.job_type)
        if clean is None:
            continue
        policy = plan.policy(operation.job_type)
        window = faults.window(operation_id)
        for resource in sorted(set(made) | set(clean)):
            number, once = made.get(resource, 0), clean.get(resource, 0)
            seen = f"{operation_id} {operation.state.value} ({operation.job_type}, {policy}): {number} {resource}"
            if policy in EXACTLY_ONCE and number > once:
                twice.append(f"{seen}, its clean run makes {once}")
            elif policy is Policy.EFFECT_THEN_CLAIM and number > once + window:
                beyond.append(f"{seen}, its clean run makes {once}, {window} fault(s) in its window")
            if settled and operation.state is _S.SUCCEEDED and number < once:
                lost.append(f"{seen}, its clean run makes {once}")
    fail(MissingGrant, _refusals(cloud, history))
    fail(EffectWithoutStart, unstarted)
    fail(EffectTwice, twice)
    fail(EffectsBeyondFaults, beyond)
    fail(EffectLost, lost)


def _refusals(cloud: Any, history: History) -> list[str]:
    denials = cloud.denials[history.denials_before :]
    return [f"{d.function_id} ({d.role}) was refused {d.action} on {d.resource}: {d.message}" for d in denials]


# -- once the history is quiet --------------------------------------------------------------------------------------


def settled(cloud: Any, history: History) -> None:
    """Everything final or listed, UNKNOWN listed, continuations and batches as their parents ended; then the effects
    with their lower bound (SUCCEEDED made all its clean run makes)."""
    operations = operations_of(cloud, history.prefix)
    listed = attention_lister(cloud.local)
    fail(OperationLost, _lost(operations, history, listed))
    unknown = listed(_S.UNKNOWN.value)
    fail(
        UnknownUnlisted,
        [
            f"{op_id} UNKNOWN, not listed"
            for op_id, op in operations.items()
            if op.state is _S.UNKNOWN and op_id not in unknown
        ],
    )
    fail(ContinuationWrong, _continuations(operations, history))
    fail(BatchIncomplete, _batches(cloud, operations, history))
    every_step(cloud, history, settled=True)


def _lost(operations: Mapping[str, Operation], history: History, listed: Callable[[str], set[str]]) -> list[str]:
    lost = [
        f"{op_id} ({job}) enqueued, never written" for op_id, job in history.enqueued.items() if op_id not in operations
    ]
    open_ones = {op_id: op for op_id, op in operations.items() if op.state not in FINAL_STATES}
    if open_ones:
        stuck = listed(Flag.STUCK.value)
        by_state = {state: listed(state.value) for state in {op.state for op in open_ones.values()}}
        for op_id, operation in sorted(open_ones.items()):
            if op_id not in by_state[operation.state] and op_id not in stuck:
                reason = operation.history[-1].reason if operation.history else "no history"
                lost.append(f"{op_id} {operation.state.value} ({operation.job_type}), listed nowhere ({reason})")
    return lost


def _continuations(operations: Mapping[str, Operation], history: History) -> list[str]:
    wrong = []
    for op_id, operation in sorted(operations.items()):
        if operation.job_type not in history.plan.registry:
            continue
        then = history.plan.registry.get(operation.job_type).on_success
        if then is None:
            continue
        follows = continuation_id(op_id, ON_SUCCESS)
        succeeded = operation.state is _S.SUCCEEDED
        if succeeded and follows not in operations:
            wrong.append(f"{op_id} SUCCEEDED, its continuation {follows} ({then.job_type}) was never written")
        if (
            not succeeded
            and not any(e.state == _S.SUCCEEDED.value for e in operation.history)
            and follows in operations
        ):
            wrong.append(f"{op_id} {operation.state.value}, never SUCCEEDED, yet its continuation {follows} exists")
    return wrong


def _batches(cloud: Any, operations: Mapping[str, Operation], history: History) -> list[str]:
    wrong = []
    table = cloud.converge.require_batches()
    for batch_id, size in sorted(history.batches.items()):
        children = [op for op_id, op in operations.items() if op_id.startswith(f"{batch_id}::") and op.job_type]
        children = [op for op in children if op.operation_id != callback_id(batch_id)]
        if len(children) < size or any(op.state not in FINAL_STATES for op in children):
            continue  # (an open child is the listings' business)
        batch = table.get(batch_id)
        if batch is None or batch.state is not BatchState.COMPLETE:
            wrong.append(f"{batch_id}: every child final, the batch {batch.state.value if batch else 'missing'}")
        elif callback_id(batch_id) not in operations:
            wrong.append(f"{batch_id}: complete, its callback {callback_id(batch_id)} never written")
    return wrong
