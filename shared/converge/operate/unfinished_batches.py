"""The reconciler's sixth pass: batches that cannot finish by themselves.

Batches not complete (`converge.flow.batches`, a Scan of the batches table's records filtered on the
server). One whose children are all final and whose callback is missing (the look after its last child
was lost) gets its callback, through the same conditional transaction as any look: exactly once. One
that cannot finish by itself is listed with the reason on its record (`converge batches list
--attention`): an admission stopped halfway (the manifest's children are not stored, so only the
producer can finish it), children UNKNOWN, or children listed under STUCK or PAUSED (found in those
listings).
"""

from __future__ import annotations

from converge.flow.batches import Batches
from converge.model.batches import parse_child
from converge.model.states import Flag, OperationState
from converge.operate.reconcile_run import ReconcileRun
from converge.store.operations import OperationStore


class UnfinishedBatches:
    """Finds each batch's children held under STUCK or PAUSED, and has the batches look at themselves (no
    batches configured: nothing to do)."""

    def __init__(self, operations: OperationStore, batches: Batches | None) -> None:
        self._operations = operations
        self._batches = batches

    def sweep(self, run: ReconcileRun) -> None:
        """6. Batches that cannot finish by themselves: a missing callback written, the rest listed with why."""
        if self._batches is None or run.out_of_time():
            return
        held: dict[str, dict[str, list[str]]] = {}
        for key in (Flag.STUCK.value, OperationState.PAUSED.value):
            for row in self._operations.listings.iter_attention(key):
                child = parse_child(str(row.get("operation_id", "")))
                if child is not None:
                    held.setdefault(child.batch_id, {}).setdefault(key, []).append(str(row["operation_id"]))
        found = self._batches.reconcile(held, run.out_of_time)
        run.summary.batches_examined += found.examined
        run.summary.batch_callbacks_written += found.callbacks_written
        run.summary.batch_admissions_stopped += found.admissions_stopped
        run.summary.batches_listed += found.listed
        run.summary.details.extend(found.details)
