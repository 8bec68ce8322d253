"""Batches: admit many children at once, count each once it is final, and enqueue one callback when all are.

Admission (`Batches.admit`) writes the batch's record first ("admitting", with the fingerprint of its whole
manifest and its child count), then its counting shards, then its children in chunks (their requests go to
the jobs table like any other), and only then marks it "open". A retry with the same manifest writes nothing
twice and finishes what a crash left; another manifest under the same id is an IdentityConflict.

Counting reads the state table's stream (`converge.flow.batch_counter`): each child has one place on its counting
shard, set to the final state its state record counts as, so a child is counted exactly once however often its
record is read. A child an operator reopens keeps its place until it settles again, and then its place changes
(recorded on the batch when the callback ran already: `changed_after_callback`).

Completion (`observe`, by the counter when a shard it wrote has every child final, by the admission once the batch
is open, and by the reconciler): every shard is read, and when every child is final, one transaction writes the
callback's request (conditional on its id, derived from the batch's, being new) and marks the batch complete.
Whoever sees completion, however often, the callback is written once, and never before every child is final (an
UNKNOWN child holds it back until an operator resolves it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from converge.flow.admission import normalized_payload
from converge.flow.registry import Registry
from converge.model.batches import (
    ADMISSION_GRACE_SECONDS,
    BATCH_ID_LIMIT,
    CHUNK,
    COUNTED,
    KEY_LIMIT,
    MAX_CHILDREN,
    Batch,
    BatchAdmission,
    BatchCallback,
    BatchChange,
    BatchChild,
    BatchState,
    callback_id,
    check_name,
    child_id,
    manifest_fingerprint,
    shard_count,
    shard_of,
)
from converge.model.clock import Clock, SystemClock, iso
from converge.model.errors import IdentityConflict, InvalidAction, InvalidMessage, OperationNotFound
from converge.model.request import JobRequest
from converge.model.states import OperationState
from converge.model.submission import BatchSubmission
from converge.observability import logger
from converge.screening.summary import SUMMARY_FIELDS, summary_fields
from converge.store.batches import BatchesTable
from converge.store.state import StateTable


@dataclass
class BatchFindings:
    """What the reconciler's pass over unfinished batches found and did."""

    examined: int = 0
    callbacks_written: int = 0
    """Batches whose every child was final and whose callback was missing (the look after the last was lost)."""
    admissions_stopped: int = 0
    listed: int = 0
    """Batches that cannot finish by themselves, listed with the reason (admission stopped, children UNKNOWN,
    STUCK or PAUSED)."""
    details: list[dict[str, Any]] = field(default_factory=list)


HELD_BECAUSE = {
    OperationState.PAUSED.value: " (their job's kill switch is off: they run when it is on, or cancel them)",
}
"""Why children listed under a key hold their batch back, said after the key (STUCK's reason is on each child)."""


def stopped_admission(batch: Batch) -> str:
    return (
        f"admission stopped at {batch.written} of {batch.total} children (begun {batch.created_at}): converge stores "
        "the manifest's fingerprint, not its children, so only the producer can finish it: enqueue the batch again "
        "with the same children and callback"
    )


def taken_callback(batch: Batch) -> str:
    """Why a batch whose children are all final has no callback after a look: its id holds another request."""
    return (
        f"every child is final, but the callback's id {batch.callback_id} holds a request the batch did not write "
        "(the relay refused it: converge ops show it); delete that request and its state record, then "
        "converge batches complete"
    )


def _complete(expected: int, counts: dict[str, int]) -> bool:
    final = sum(counts.get(state.value, 0) for state in COUNTED)
    return final >= expected and counts.get(OperationState.UNKNOWN.value, 0) == 0


class Batches:
    """A deployment's batches: admission, completion once every child is counted final, and the callback."""

    def __init__(self, registry: Registry, table: BatchesTable, clock: Clock | None = None) -> None:
        self._registry = registry
        self.table = table
        self._clock = clock or SystemClock()

    # -- admission ---------------------------------------------------------------------------------------------

    def admit(
        self,
        batch: BatchSubmission,
    ) -> BatchAdmission:
        """Admit a batch (nothing is written unless every child and the callback are valid); see the module.
        Its `submitted_by`, the enqueue API's caller, is recorded on each child (whose own it then is to read)."""
        batch_id, callback, submitted_by = batch.batch_id, batch.callback, batch.submitted_by
        check_name("batch id", batch_id, BATCH_ID_LIMIT)
        checked = self._children(list(batch.children))
        if callback.job_type not in self._registry:
            self._registry.get(callback.job_type)  # raises UnknownJobType naming it
        reserved = sorted(set(callback.payload) & set(SUMMARY_FIELDS))
        if reserved:
            raise InvalidMessage(
                f"the callback's payload may not set {', '.join(reserved)}: the batch's summary fills them"
            )
        sample = summary_fields(batch_id, len(checked), {})
        try:
            stored = normalized_payload(self._registry, callback.job_type, {**dict(callback.payload), **sample})
        except InvalidMessage as exc:
            if any(name in str(exc) for name in SUMMARY_FIELDS):
                raise InvalidMessage(
                    f"the callback's message must take the batch's summary (subclass converge.BatchSummary for "
                    f"{callback.job_type}): {exc}"
                ) from None
            raise InvalidMessage(f"the callback's payload: {exc}") from None
        kept = BatchCallback(callback.job_type, {name: value for name, value in stored.items() if name not in sample})
        fingerprint = manifest_fingerprint(checked, kept)
        shards = shard_count(len(checked))
        now = iso(self._clock.now())
        held = self.table.begin(batch_id, fingerprint, len(checked), shards, kept.job_type, dict(kept.payload), now)
        created = held is None
        if held is not None:
            if held.fingerprint != fingerprint:
                raise IdentityConflict(batch_id)
            if held.state is not BatchState.ADMITTING:
                return BatchAdmission(self.require(batch_id), False)
            start = held.chunks
        else:
            start = 0
        expected = [0] * shards
        for position in range(len(checked)):
            expected[shard_of(position, shards)] += 1
        self.table.ensure_shards(batch_id, expected)
        for chunk in range(start, (len(checked) + CHUNK - 1) // CHUNK):
            part = checked[chunk * CHUNK : (chunk + 1) * CHUNK]
            first = chunk * CHUNK
            requests = [
                JobRequest(
                    child_id(batch_id, child.key, shard_of(first + offset, shards)),
                    child.job_type,
                    dict(child.payload),
                    batch_id,
                    submitted_by,
                )
                for offset, child in enumerate(part)
            ]
            self.table.write_chunk(batch_id, chunk, [child.key for child in part], requests)
        self.table.open(batch_id, iso(self._clock.now()))
        try:
            self.observe(batch_id)  # its children may all be final already (a slow or resumed admission)
        except Exception as exc:
            # A producer holding ProducerPolicy may not write a callback (nor may a look fail the admission): the
            # batch is open with every child written, and the reconciler's next pass writes the callback.
            logger.info("the admission's look for completion is left to the reconciler", reason=str(exc))
        return BatchAdmission(self.require(batch_id), created)

    def _children(self, children: list[BatchChild]) -> list[BatchChild]:
        if not 0 < len(children) <= MAX_CHILDREN:
            raise InvalidMessage(f"a batch has 1-{MAX_CHILDREN} children, not {len(children)}")
        seen: set[str] = set()
        checked = []
        for child in children:
            if not isinstance(child, BatchChild):
                raise InvalidMessage(f"a batch's children are converge.BatchChild values, not {type(child).__name__}")
            check_name("child key", child.key, KEY_LIMIT)
            if child.key in seen:
                raise InvalidMessage(f"child key {child.key!r} appears twice in the batch")
            seen.add(child.key)
            try:
                payload = normalized_payload(self._registry, child.job_type, child.payload)
            except InvalidMessage as exc:
                raise InvalidMessage(f"child {child.key!r}: {exc}") from None
            checked.append(replace(child, payload=payload))
        return checked

    # -- counting: the counter reads the state table's stream (converge.flow.batch_counter) ------------------------

    def changed_after_callback(self, batch_id: str, changes: Sequence[BatchChange]) -> None:
        """Children whose counted final state changed (an operator reopened them and they settled again): recorded
        on the batch when its callback was written already (the callback was told the earlier states)."""
        batch = self.table.record(batch_id)
        if batch is None or batch.state is not BatchState.COMPLETE:
            return
        for change in changes:
            self.table.record_change(batch_id, change)

    def observe(self, batch_id: str) -> bool:
        """Complete the batch if every child is final: True when this call wrote its callback."""
        batch = self.table.record(batch_id)
        if batch is None or batch.state is not BatchState.OPEN:
            return False  # still admitting (the admission looks once it opens it) or complete already
        shards = self.table.all_counts(batch_id, batch.shards)
        if len(shards) != batch.shards or not all(_complete(*counted) for counted in shards):
            return False
        totals: dict[str, int] = {}
        for _, counts in shards:
            for state, count in counts.items():
                totals[state] = totals.get(state, 0) + count
        payload = {**batch.callback_payload, **summary_fields(batch_id, batch.total, totals)}
        request = JobRequest(callback_id(batch_id), batch.callback_job_type, payload, batch_id)
        counts = {state: count for state, count in sorted(totals.items()) if count}
        return self.table.complete(batch_id, request, counts, iso(self._clock.now()))

    # -- the reconciler's pass ---------------------------------------------------------------------------------

    def reconcile(
        self, held: Mapping[str, Mapping[str, Sequence[str]]], out_of_time: Callable[[], bool] = lambda: False
    ) -> BatchFindings:
        """Every batch not complete: one whose children are all final and whose callback is missing gets it (the
        same conditional transaction as any look: exactly once); one that cannot finish by itself is listed with
        the reason on its record (`converge batches list --attention`): an admission stopped halfway (older than
        ADMISSION_GRACE_SECONDS), children UNKNOWN, or children listed STUCK or PAUSED (`held`: by batch id, the
        listing's key and its children's ids). A
        reason that no longer holds is taken off."""
        found = BatchFindings()
        now = self._clock.now()
        for batch in self.table.unfinished():
            if out_of_time():
                break
            found.examined += 1
            reason: str | None
            if batch.state is BatchState.ADMITTING:
                if now - _epoch(batch.created_at) < ADMISSION_GRACE_SECONDS:
                    continue  # perhaps still under way
                reason = stopped_admission(batch)
                found.admissions_stopped += 1
            else:
                if self.observe(batch.batch_id):
                    found.callbacks_written += 1
                    found.details.append({"batch_id": batch.batch_id, "action": "callback_written"})
                    continue
                counted = self.get(batch.batch_id)
                reasons = []
                if counted is not None and counted.unknown:
                    reasons.append(
                        f"{counted.unknown} children UNKNOWN: resolve them (converge ops resolve), the callback follows"
                    )
                elif counted is not None and counted.final >= counted.total:
                    reasons.append(taken_callback(counted))
                for key, ids in sorted(held.get(batch.batch_id, {}).items()):
                    shown = ", ".join(sorted(ids)[:3]) + (" …" if len(ids) > 3 else "")
                    why = HELD_BECAUSE.get(key, "")
                    reasons.append(f"{len(ids)} children {key}{why} ({shown}): converge ops list --state {key}")
                reason = "; ".join(reasons) or None
            if reason is not None:
                found.listed += 1
                found.details.append({"batch_id": batch.batch_id, "action": "listed", "reason": reason})
            if reason != batch.listed:
                self.table.list_reason(batch.batch_id, reason, batch.state)
        return found

    # -- cancel ------------------------------------------------------------------------------------------------

    def begin_cancel(self, batch_id: str, reason: str, actor: str) -> Batch:
        """Mark the batch cancelled (the reason on its record) before its children are cancelled one by one
        (`converge.operate.cancel.cancel_batch`). InvalidAction for a batch still admitting or without a reason."""
        if not reason or not reason.strip():
            raise InvalidAction("a cancel needs a reason (it is recorded on the batch and on each child)")
        batch = self.require(batch_id)
        if batch.state is BatchState.ADMITTING:
            raise InvalidAction(f"batch {batch_id!r} is still admitting: enqueue it again to finish it, then cancel")
        if batch.state is not BatchState.COMPLETE:  # a complete batch has no child left to cancel: nothing recorded
            at = iso(self._clock.now())
            self.table.mark_cancelled(batch_id, f"{at} by {actor}: {reason.strip()}")
        return batch

    def child_ids(self, batch: Batch) -> Iterator[str]:
        """The batch's children's operation ids, in admission order."""
        for position, key in enumerate(self.table.all_keys(batch.batch_id)):
            yield batch.child_id(position, key)

    # -- reads -------------------------------------------------------------------------------------------------

    def get(self, batch_id: str) -> Batch | None:
        return self.table.batch(batch_id)

    def require(self, batch_id: str) -> Batch:
        batch = self.get(batch_id)
        if batch is None:
            raise OperationNotFound(f"no batch {batch_id!r}")
        return batch

    def children(
        self, batch: Batch, state: StateTable, only: OperationState | None = None
    ) -> Iterator[tuple[str, str]]:
        """The batch's children in admission order, as (operation id, state); with `only`, those in that state.
        One read of each child's state record: for an operator, never the happy path."""
        for operation_id in self.child_ids(batch):
            current = state.record(operation_id).state
            if only is None or current is only:
                yield operation_id, current.value

    def callback_state(self, batch: Batch, state: StateTable) -> str | None:
        """The callback operation's state (None until it is written)."""
        if batch.state is not BatchState.COMPLETE:
            return None
        return state.record(batch.callback_id).state.value


def _epoch(text: str) -> float:
    try:
        return datetime.fromisoformat(text).timestamp()  # (Python 3.11 and later read the trailing Z)
    except ValueError:
        return 0.0  # unreadable: treated as old
