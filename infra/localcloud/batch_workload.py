"""Batches under faults (`converge demo --chaos`): one admitted per wave, and the batches' invariants.

The batch is the catalogue's own (its demo scenario's `batch`: children and callback), grown to the wave's size
by repeating its children under new keys, and admitted under a new id each wave. In the second wave of each three
the producer dies mid-admission (after the batch's record, before its children): the next wave's producer admits
it again, which finishes it; after the last wave one more batch is left halfway for good, so the reconciler must
list it once its grace is over.
Its children run beside the wave's other jobs, under the same faults.

The invariants, read from the stored records (each child's final state, the batch's counts, the callback's request):
- each child counted exactly once: the batch's counts equal its children's final states;
- the callback exactly once, never early: written only for a complete batch, once (one request, never rewritten
  with other content), given the batch's counts with every child final and none UNKNOWN, in the transaction that
  completed the batch, no earlier than the last child's first final state; a complete batch has it;
- a batch that cannot finish is listed: after the reconciler's pass, every batch is complete or carries a reason.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from converge.model.batches import (
    ADMISSION_GRACE_SECONDS,
    COUNTED,
    BatchCallback,
    BatchChild,
    BatchState,
    callback_id,
)
from converge.model.records import Operation

from .checks import Check

CHILDREN_SHARE = 1 / 20
"""A wave's batch has this share of the wave's size in children (at least its template's)."""
_COUNTED = frozenset(state.value for state in COUNTED)


@dataclass
class ChaosBatches:
    """The batches a chaos run admits, in order; `stopped` is an admission its producer left halfway."""

    converge: Any
    children: list[BatchChild]
    callback: BatchCallback
    admitted: dict[str, list[BatchChild]] = field(default_factory=dict)
    stopped: list[str] = field(default_factory=list)
    crashes: int = 0

    @classmethod
    def of(cls, cloud: Any, converge: Any) -> ChaosBatches | None:
        """The catalogue's batch (its demo scenario's), or None when it has none."""
        scenario = cloud.hooks.demo_scenario()
        step = getattr(scenario, "batch", None)
        if step is None:
            return None
        return cls(converge, list(step.children), step.callback)

    def admit(self, wave: int, size: int, prefix: str) -> str:
        """Finish the admissions a producer left halfway, then admit this wave's batch (dying halfway now and then)."""
        for batch_id in self.stopped:
            self.converge.enqueue_batch(batch_id, self.admitted[batch_id], self.callback)
        self.stopped = []
        return self._admit(f"{prefix}-w{wave}", max(len(self.children), int(size * CHILDREN_SHARE)), wave % 3 == 1)

    def leave_one_stopped(self, prefix: str) -> str:
        """A batch whose producer dies mid-admission and never comes back: it cannot finish, and must be listed."""
        return self._admit(f"{prefix}-stopped", len(self.children), crash=True)

    def _admit(self, batch_id: str, count: int, crash: bool) -> str:
        children = []
        for index in range(count):
            template = self.children[index % len(self.children)]
            children.append(BatchChild(f"{template.key}.{index}", template.job_type, template.payload))
        self.admitted[batch_id] = children
        if crash:
            with self._producer_dies():
                self.converge.enqueue_batch(batch_id, children, self.callback)
            self.stopped.append(batch_id)
        else:
            self.converge.enqueue_batch(batch_id, children, self.callback)
        return batch_id

    def outlive_stopped(self, cloud: Any) -> None:
        """Let an admission left halfway age past its grace, so the reconciler's next pass lists it."""
        if self.stopped:
            cloud.advance(ADMISSION_GRACE_SECONDS + 60)

    @contextmanager
    def _producer_dies(self) -> Iterator[None]:
        table = self.converge.require_batches().table

        def dies(*_: Any) -> None:
            raise ConnectionError("the producer died mid-admission")

        table.write_chunk = dies
        try:
            yield
        except ConnectionError:
            self.crashes += 1
        finally:
            table.__dict__.pop("write_chunk", None)

    def check(self, operations: dict[str, tuple[Operation, Any]], reconciled: bool = True) -> Check:
        """The batches' invariants (module docstring), over every batch admitted."""
        batches = self.converge.require_batches()
        violations: list[str] = []
        complete = listed = 0
        for batch_id, children in self.admitted.items():
            batch = batches.get(batch_id)
            callback = operations.get(callback_id(batch_id))
            if batch is None:
                violations.append(f"{batch_id}: admitted, and no batch stored")
                continue
            found = [operations.get(batch.child_id(position, c.key)) for position, c in enumerate(children)]
            child_ops = [entry[0] if entry else None for entry in found]
            expected = Counter(state for entry in found if entry and (state := _counted_as(*entry)) in _COUNTED)
            counts = {state: number for state, number in batch.counts.items() if number}
            if counts != dict(expected):
                violations.append(f"{batch_id}: counted {counts}, its children hold {dict(expected)}")
            if callback is not None:
                violations += _callback(batch, callback[0], child_ops)
            elif batch.state is BatchState.COMPLETE:
                violations.append(f"{batch_id}: complete, and no callback")
            complete += batch.state is BatchState.COMPLETE
            if batch.state is not BatchState.COMPLETE:
                if batch.listed:  # what the reconciler's pass wrote on it (`converge batches list --attention`)
                    listed += 1
                elif reconciled:
                    violations.append(f"{batch_id}: {batch.state.value}, counts {counts}, and not listed")
        return Check(
            "batches_kept",
            not violations,
            f"{len(self.admitted)} batches ({self.crashes} admissions stopped halfway), {complete} complete, "
            f"{listed} listed with a reason: each child counted once; the callback once, after every child is "
            "final, given the counts; a batch that cannot finish listed",
            violations,
        )


def _counted_as(operation: Operation, item: dict[str, Any]) -> str:
    """What the batch counts a child as: its final state, or the one an operator reopened it from until it settles."""
    if operation.state.value in _COUNTED:
        return operation.state.value
    return str(item.get("reopened_from", {}).get("S", operation.state.value))


def _callback(batch: Any, callback: Operation, children: list[Operation | None]) -> list[str]:
    found = []
    summary = dict(batch.summary or {})
    if batch.state is not BatchState.COMPLETE:
        found.append(f"{batch.batch_id}: a callback while the batch is {batch.state.value}")
    if sum(summary.values()) != batch.total or summary.get("UNKNOWN"):
        found.append(f"{batch.batch_id}: completed with {summary} of {batch.total} children")
    given = {state: callback.payload.get(f"batch_{state.lower()}", 0) for state in summary}
    if given != summary or callback.payload.get("batch_total") != batch.total:
        found.append(f"{batch.batch_id}: its callback was given {callback.payload}, the batch {summary}")
    if callback.conflicts:
        found.append(f"{batch.batch_id}: its callback was written again with other content")
    written = batch.completed_at or ""  # the callback's request is written in the same transaction
    finals = [
        next((entry.at for entry in child.history if entry.state in _COUNTED), None) if child else None
        for child in children
    ]
    if None in finals:
        found.append(f"{batch.batch_id}: a callback while a child has no final state")
    elif written and max(str(at) for at in finals) > written:
        found.append(f"{batch.batch_id}: completed (its callback written) at {written}, before a child was final")
    return found
