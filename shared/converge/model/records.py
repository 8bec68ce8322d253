"""The stored receipt of an operation: converge's state record, and the operator's view of request + state.

The state record (the state table, keyed by operation id) holds everything converge writes: the
state, a bounded history of changes, the lease of the delivery working on it, the current error
apart from earlier ones, the attention keys of the sparse indexes, and the identity conflicts
producers caused. `Operation` joins it with the producer's request for the operator's view.
`Subject`, `Lease` and `Refused` are what a state write knows and answers (`converge.store.state`).
How each is stored is the store's (`converge.store.codecs`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, TypeAlias

from converge.model.clock import iso
from converge.model.envelope import plain
from converge.model.request import JobRequest
from converge.model.signals import SIGNAL_WAIT, SignalRecord
from converge.model.states import OperationState

HISTORY_LIMIT = 10
ERRORS_LIMIT = 5
CONFLICTS_LIMIT = 10
REASON_LIMIT = 300


def clip(reason: str | None) -> str:
    text = " ".join((reason or "").split())
    return text if len(text) <= REASON_LIMIT else text[: REASON_LIMIT - 1] + "…"


@dataclass(frozen=True)
class HistoryEntry:
    """One change: stored as one line, "<at> <state> <reason>", which reads like a log line in the
    console and costs a fraction of a map to write."""

    state: str
    at: str
    reason: str

    def to_item(self) -> dict[str, str]:
        return {"state": self.state, "at": self.at, "reason": self.reason}


@dataclass(frozen=True)
class ErrorEntry:
    """One error recorded on the operation, by attempt (the current outcome's error is `last_error`)."""

    at: str
    attempt: int
    error: str

    def to_item(self) -> dict[str, Any]:
        return {"at": self.at, "attempt": self.attempt, "error": self.error}


@dataclass(frozen=True)
class ConflictEntry:
    """A producer's write of other content under this operation id: refused, never run."""

    at: str
    fingerprint: str
    job_type: str
    source: str

    def to_item(self) -> dict[str, str]:
        return {"at": self.at, "fingerprint": self.fingerprint, "job_type": self.job_type, "source": self.source}


StepValue: TypeAlias = str | int | float | bool | None
StepResult: TypeAlias = StepValue | Mapping[str, StepValue]
"""What a step returns and its marker records: identifiers and small numbers, never content
(`converge.flow.steps` screens it by the message rules)."""


class StepState(StrEnum):
    """Where one step of an operation stands, as its marker records it."""

    CLAIMED = "claimed"  # claim_then_effect: claimed, its effect not yet known to have happened
    DONE = "done"  # the effect happened (or an operator established it did): never run again
    FAILED = "failed"  # an operator established it did not happen and must not run


@dataclass(frozen=True)
class StepRecord:
    """One step's marker: its name, its place in the runner's order, policy, state, when, by whom, its
    recorded result and a note."""

    name: str
    position: int
    policy: str
    state: StepState
    at: str
    owner: str = ""
    result: StepResult = None
    note: str = ""

    def to_item(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "policy": self.policy,
            "state": self.state.value,
            "at": self.at,
            "result": plain(self.result),
            "note": self.note,
        }


@dataclass(frozen=True)
class Continued:
    """An operation that follows another: its id, the outcome it follows, and its state now."""

    operation_id: str
    follows: str
    state: str

    def to_item(self) -> dict[str, str]:
        return {"operation_id": self.operation_id, "follows": self.follows, "state": self.state}


@dataclass(frozen=True)
class StateRecord:
    """converge's record of one operation, as stored (a missing record means ACCEPTED, not yet started)."""

    operation_id: str
    state: OperationState
    job_type: str | None = None
    fingerprint: str | None = None
    attempts: int = 0
    history: tuple[HistoryEntry, ...] = ()
    last_error: str | None = None
    errors: tuple[ErrorEntry, ...] = ()
    lease_owner: str | None = None
    lease_until: float | None = None
    redrives: int = 0
    attention: str | None = None
    stuck_kind: str | None = None
    stuck_reason: str | None = None
    conflicts: tuple[ConflictEntry, ...] = ()
    conflicts_dropped: int = 0
    original: JobRequest | None = None
    run_at: float | None = None
    """A delayed operation's time (no delivery may start it before)."""
    waiting: str | None = None
    """The step a started operation waits after (`ctx.wait`), until `run_at`; cleared when a delivery resumes it."""
    waiting_for: str | None = None
    """"signal" when that wait ends at a signal too (`ctx.wait_for`), its `run_at` being its timeout."""
    reopened_from: OperationState | None = None
    """The final state an operator last reopened it from (a batch's count of it moves from there when it settles
    again); set by every move out of a final state."""
    recorded: bool = True
    """False for the implicit ACCEPTED state of an operation that has no state record yet."""

    @classmethod
    def absent(cls, operation_id: str) -> StateRecord:
        return cls(operation_id, OperationState.ACCEPTED, recorded=False)

    @property
    def created_at(self) -> str | None:
        """When the record began: the history keeps its first entry."""
        return self.history[0].at if self.history else None

    @property
    def accepted_at(self) -> str | None:
        """When the operation was accepted, if its record began so (a record an operator's cancel began, before the
        relay accepted the request, keeps no acceptance)."""
        first = self.history[0] if self.history else None
        return first.at if first is not None and first.state == OperationState.ACCEPTED else None

    @property
    def updated_at(self) -> str | None:
        return self.history[-1].at if self.history else None

    @property
    def earlier_errors(self) -> tuple[ErrorEntry, ...]:
        """The errors but the current outcome's, in order. Every write that sets `last_error` appends its entry to
        `errors` in the same write, so the current one is the last entry that says it: the last entry of all but on
        a signal item's record, whose rewrites' answers come after its first answer, which stands."""
        if self.last_error is None:
            return self.errors
        for index in reversed(range(len(self.errors))):
            if self.errors[index].error == self.last_error:
                return self.errors[:index] + self.errors[index + 1 :]
        return self.errors

    def lease_live(self, now: float) -> bool:
        return self.lease_owner is not None and self.lease_until is not None and self.lease_until > now

    @property
    def started(self) -> bool:
        """Whether a delivery ever began the work (a lease was taken, or an attempt recorded), whatever the
        state now: a started operation may have had its effect, so it can no longer end CANCELLED or EXPIRED."""
        return self.attempts > 0 or any(entry.attempt > 0 for entry in self.errors)

    @property
    def leased(self) -> bool:
        """A lease that was never given back: its holder may have done the work (a takeover must ask)."""
        return self.state is OperationState.IN_PROGRESS and self.lease_owner is not None


@dataclass(frozen=True)
class Subject:
    """What a write that reads nothing first knows of its operation: the message it carries."""

    operation_id: str
    job_type: str
    fingerprint: str
    accepted_at: str | None = None
    """When the producer's write was accepted (the stream record's time), for a record created now."""
    earlier: str | None = None
    """For content with options: the fingerprint a record written before options counted holds for it."""

    @classmethod
    def of(
        cls, operation_id: str, job_type: str, fingerprints: tuple[str, ...], accepted_at: str | None = None
    ) -> Subject:
        """A subject from its content's accepted fingerprints (`converge.model.request.accepted_fingerprints`)."""
        return cls(operation_id, job_type, fingerprints[0], accepted_at, fingerprints[1] if fingerprints[1:] else None)

    @property
    def accepted(self) -> tuple[str, ...]:
        """The fingerprints a record of this content may hold (the current one first)."""
        return (self.fingerprint, self.earlier) if self.earlier else (self.fingerprint,)


@dataclass(frozen=True)
class Lease:
    """A delivery's hold on an operation, as the one conditional write that took it left the record."""

    operation_id: str
    job_type: str
    owner: str
    until: float
    attempt: int
    history: tuple[HistoryEntry, ...]
    errors: tuple[ErrorEntry, ...]
    previous: StateRecord | None
    """The record before this lease was taken; None when taking it created the record."""

    @property
    def takeover(self) -> bool:
        """An earlier holder never gave its lease back: it may have done the work (claim_then_effect asks)."""
        return self.previous is not None and self.previous.lease_owner is not None


class WriteRefused(Exception):
    """A conditional write that did not apply: what every write of the store raises for the condition it met (its
    subclasses carry what it met). A write that returns has applied."""


class Refused(WriteRefused):
    """The operation's own condition failed: nothing was written, and `current` is the record that made it fail."""

    def __init__(self, current: StateRecord) -> None:
        super().__init__(f"{current.operation_id} is {current.state.value}: the write's condition did not hold")
        self.current = current


class ExtraRefused(WriteRefused):
    """A terminal write with items in its transaction that did not apply because one of those items' condition
    failed (`index` in the order given; `what` says what it was), with the item as it stands when the service
    returned it. The operation is not settled: the settlement writes again without that item and says so."""

    def __init__(self, index: int, what: str, current: Mapping[str, Any] | None = None, unmet: str = "exists already"):
        super().__init__(f"{what} {unmet}")
        self.index = index
        self.what = what
        self.current = current
        self.unmet = unmet
        """What its condition failing means, said after `what` ("continuation op-1:on-success exists already")."""

    @property
    def said(self) -> str:
        return f"{self.what} {self.unmet}"


@dataclass(frozen=True)
class Operation:
    """The operator's view of one operation: the producer's request joined with converge's state."""

    operation_id: str
    job_type: str
    payload: dict[str, Any]
    state: OperationState
    correlation_id: str | None = None
    record: StateRecord | None = None
    request: JobRequest | None = None
    request_problem: str | None = None
    """Why the stored request cannot be read (missing, or unusable types), if it cannot."""
    steps: tuple[StepRecord, ...] | None = None
    """The operation's step markers, in the order they were recorded (None when they were not read)."""
    parent_id: str | None = None
    """For a continuation: the operation whose settle wrote its request."""
    continuations: tuple[Continued, ...] | None = None
    """The operations that follow this one (None when they were not read)."""
    signals: tuple[SignalRecord, ...] | None = None
    """The operation's signal items, one per wait name (`ctx.wait_for`; None when they were not read)."""

    @property
    def pending_step(self) -> StepRecord | None:
        """The step claimed but not known to be done: the one an UNKNOWN operation's resolve settles."""
        return next(
            (
                step
                for step in reversed(self.steps or ())
                if step.state is StepState.CLAIMED and step.policy != SIGNAL_WAIT  # a wait holds no effect
            ),
            None,
        )

    # -- the receipt's fields, as the stored record has them ----------------------------------------------------

    @property
    def state_record(self) -> StateRecord:
        return self.record or StateRecord.absent(self.operation_id)

    @property
    def history(self) -> tuple[HistoryEntry, ...]:
        return self.state_record.history

    @property
    def attempts(self) -> int:
        return self.state_record.attempts

    @property
    def last_error(self) -> str | None:
        return self.state_record.last_error

    @property
    def redrives(self) -> int:
        return self.state_record.redrives

    @property
    def fingerprint(self) -> str | None:
        return self.state_record.fingerprint

    @property
    def conflicts(self) -> tuple[ConflictEntry, ...]:
        return self.state_record.conflicts

    @property
    def created_at(self) -> str | None:
        return self.state_record.created_at

    @property
    def submitted_by(self) -> str | None:
        """The enqueue API's caller, as admitted (None for any other producer, or when the jobs table holds
        other content than was admitted: a later write never names a new owner)."""
        admitted = self.runnable()
        return admitted.submitted_by if admitted else None

    @property
    def updated_at(self) -> str | None:
        return self.state_record.updated_at

    def runnable(self) -> JobRequest | None:
        """The request to (re-)dispatch: the original the state's fingerprint names, or None when the
        stored request is gone or now holds other content that was never admitted."""
        record = self.state_record
        if record.original is not None:
            return record.original
        if self.request is None:
            return None
        if record.fingerprint is not None and record.fingerprint not in self.request.accepted_fingerprints:
            return None
        return self.request

    def to_json(self) -> dict[str, Any]:
        """The operator's view (`converge ops show --json`): the current outcome (`last_error`) apart from the
        earlier errors (`errors`), neither repeating the other."""
        record = self.state_record
        admitted = self.runnable()  # options and the caller as admitted, never a later write's
        return {
            "operation_id": self.operation_id,
            "job_type": self.job_type,
            "state": self.state.value,
            "reason": record.history[-1].reason if record.history else None,
            "attempts": record.attempts,
            "redrives": record.redrives,
            "last_error": record.last_error,
            "errors": [entry.to_item() for entry in record.earlier_errors],
            "history": [entry.to_item() for entry in record.history],
            "lease": (
                {"owner": record.lease_owner, "until": iso(record.lease_until)}
                if record.lease_owner and record.lease_until is not None
                else None
            ),
            "stuck": {"kind": record.stuck_kind, "reason": record.stuck_reason} if record.stuck_kind else None,
            "run_at": iso(record.run_at) if record.run_at is not None else (admitted.run_at if admitted else None),
            "waiting": record.waiting,
            "waiting_for": record.waiting_for,
            "signals": [each.to_item() for each in self.signals] if self.signals is not None else None,
            "expires_at": admitted.expires_at if admitted else None,
            "conflicts": [entry.to_item() for entry in record.conflicts],
            "conflicts_dropped": record.conflicts_dropped,
            "request": _request_note(record, self.request_problem, admitted),
            "steps": [step.to_item() for step in self.steps] if self.steps is not None else None,
            "parent_id": self.parent_id,
            "continuations": (
                [each.to_item() for each in self.continuations] if self.continuations is not None else None
            ),
            "correlation_id": self.correlation_id,
            "submitted_by": self.submitted_by,
            "payload": plain(self.payload),
            "created_at": record.created_at,
            "updated_at": record.updated_at,
        }


def _request_note(record: StateRecord, problem: str | None, admitted: JobRequest | None) -> str:
    if record.original is not None:
        return "original kept after a conflict"
    if problem:
        return problem
    return "stored" if admitted is not None else "the jobs table holds other content than was admitted"


@dataclass(frozen=True)
class Admission:
    """An enqueue's answer: the operation as it stands, and whether this call created it."""

    operation: Operation
    created: bool
