"""Operations as their callers see them: two records with two owners, one store over both tables.

An operation is the producer's request (the jobs table) and converge's state of it (the state table, which
only converge writes). `OperationStore` holds one class per table, `jobs`, `state` and `listings` (the sparse
indexes and the operator's bounded listings), and joins the two records for a read (`get`, `require`).
Admission is the one write that needs both: a new request, or, for an id already taken, the operation as
it stands (the same content) or an IdentityConflict (other content), with nothing written either way.

The happy path reads nothing: the enqueue put is the whole admission, and a delivery's two writes
(`state.acquire`, `state.settle`) each touch one item and no index (the attention keys are set only for
states that need attention, so the sparse indexes hold those alone).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from converge.model.clock import Clock, SystemClock
from converge.model.errors import IdentityConflict, OperationNotFound
from converge.model.links import OUTCOMES, continuation_id
from converge.model.records import Admission, Continued, Operation
from converge.model.request import JobRequest
from converge.model.states import FINAL_STATES
from converge.store.codecs import content_fingerprint, operation_from_records
from converge.store.jobs import JobsTable, RequestExists
from converge.store.listings import Listings
from converge.store.markers import MarkerStore
from converge.store.signals import SignalStore
from converge.store.state import StateTable


class OperationStore:
    """The jobs table, the state table and their listings, and the operation both records make."""

    def __init__(
        self,
        jobs_table: str,
        state_table: str,
        dynamodb_client: Any,
        attention_index: str = "attention-index",
        conflict_index: str = "conflict-index",
        clock: Clock | None = None,
        schedule_index: str = "schedule-index",
        markers_table: str | None = None,
    ) -> None:
        self.clock = clock or SystemClock()
        self.jobs = JobsTable(jobs_table, dynamodb_client)
        self.state = StateTable(state_table, dynamodb_client, self.clock)
        self.markers = MarkerStore(markers_table, dynamodb_client, self.clock) if markers_table else None
        """The operations' step markers (None when this store was built without the markers table)."""
        self.signals = SignalStore(markers_table, dynamodb_client, self.clock) if markers_table else None
        """The operations' signal items, beside their markers (`ctx.wait_for`; None without the markers table)."""
        self.listings = Listings(
            jobs_table, state_table, dynamodb_client, attention_index, conflict_index, schedule_index
        )

    def admit(self, request: JobRequest) -> Admission:
        """Create the request unless its id exists; the same content again returns the existing operation."""
        operation_id = request.operation_id
        put = self.jobs.put_request(request)
        try:
            self.jobs.put(put)
        except RequestExists as exists:
            # The same id again is the same operation only with the same content and options (times, caller).
            existing = exists.item
            if existing is not None and content_fingerprint(existing) != content_fingerprint(put["Put"]["Item"]):
                raise IdentityConflict(operation_id) from None
            return Admission(operation_from_records(operation_id, existing, self.state.item(operation_id)), False)
        return Admission(operation_from_records(operation_id, put["Put"]["Item"], None), created=True)

    def get(self, operation_id: str, steps: bool = False) -> Operation | None:
        """The operation, both records joined (None when neither table holds it); never on the happy path.

        With `steps` (an operator's receipt), its step markers too (one Query, made only for an operation a
        delivery started), its signals (one Query) and the operations that follow it (`with_continuations`)."""
        request = self.jobs.item(operation_id)
        state = self.state.item(operation_id)
        if request is None and state is None:
            return None
        operation = operation_from_records(operation_id, request, state)
        return self.with_signals(self.with_continuations(self.with_steps(operation))) if steps else operation

    def with_steps(self, operation: Operation) -> Operation:
        """The operation with its step markers, in the runner's order: one Query, made only for an operation a
        delivery started (unchanged when this store has no markers table)."""
        if self.markers is None:
            return operation
        found = self.markers.steps(operation.operation_id) if operation.state_record.started else {}
        ordered = sorted(found.values(), key=lambda step: (step.position, step.at))
        return replace(operation, steps=tuple(ordered))

    def with_signals(self, operation: Operation) -> Operation:
        """The operation with its signal items (one Query; a signal may be kept before any delivery started the
        operation, so they are read whatever it stands; unchanged without the markers table)."""
        if self.signals is None:
            return operation
        return replace(operation, signals=self.signals.all(operation.operation_id))

    def with_continuations(self, operation: Operation) -> Operation:
        """The operation with the operations that follow it (by their derived ids): a read of each one's
        request, and of the state of those that exist, for a settled operation only."""
        followers: list[Continued] = []
        if operation.state in FINAL_STATES:
            for outcome in OUTCOMES:
                child = continuation_id(operation.operation_id, outcome)
                if self.jobs.item(child) is not None:
                    followers.append(Continued(child, outcome, self.state.record(child).state.value))
        return replace(operation, continuations=tuple(followers))

    def require(self, operation_id: str, steps: bool = False) -> Operation:
        operation = self.get(operation_id, steps)
        if operation is None:
            raise OperationNotFound(f"no operation {operation_id!r}")
        return operation

    def now(self) -> float:
        """The store's clock: what its writes record as the time."""
        return self.clock.now()
