"""The stored receipt of an operation: converge's state record, and the operator's view of request + state.

The state record (the state table, keyed by operation id) holds everything converge writes: the
state, a bounded history of changes, the lease of the delivery working on it, the current error
apart from earlier ones, the attention keys of the sparse indexes, and the identity conflicts
producers caused. `Operation` joins it with the producer's request for the operator's view.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from converge.clock import iso
from converge.message import plain
from converge.request import JobRequest, UnusableRequest
from converge.states import OperationState

HISTORY_LIMIT = 10
ERRORS_LIMIT = 5
CONFLICTS_LIMIT = 10
REASON_LIMIT = 300


def clip(reason: str | None) -> str:
    text = " ".join((reason or "").split())
    return text if len(text) <= REASON_LIMIT else text[: REASON_LIMIT - 1] + "…"


def s(value: str) -> dict[str, str]:
    return {"S": value}


def n(value: float) -> dict[str, str]:
    return {"N": f"{value:.3f}" if isinstance(value, float) else str(value)}


def _str(item: dict[str, Any], name: str) -> str | None:
    value = item.get(name)
    return value["S"] if isinstance(value, dict) and isinstance(value.get("S"), str) else None


def _num(item: dict[str, Any], name: str) -> float | None:
    value = item.get(name)
    try:
        return float(value["N"]) if isinstance(value, dict) and "N" in value else None
    except (TypeError, ValueError):
        return None


def _strings(item: dict[str, Any], name: str) -> list[str]:
    value = item.get(name)
    entries = value.get("L") if isinstance(value, dict) else None
    return [entry["S"] for entry in entries or [] if isinstance(entry, dict) and isinstance(entry.get("S"), str)]


def _maps(item: dict[str, Any], name: str) -> list[dict[str, Any]]:
    value = item.get(name)
    entries = value.get("L") if isinstance(value, dict) else None
    return [entry["M"] for entry in entries or [] if isinstance(entry, dict) and isinstance(entry.get("M"), dict)]


@dataclass(frozen=True)
class HistoryEntry:
    """One change: stored as one line, "<at> <state> <reason>", which reads like a log line in the
    console and costs a fraction of a map to write."""

    state: str
    at: str
    reason: str

    def to_item(self) -> dict[str, str]:
        return {"state": self.state, "at": self.at, "reason": self.reason}

    def low_level(self) -> dict[str, Any]:
        return {"S": f"{self.at} {self.state} {self.reason}"}

    @classmethod
    def from_line(cls, line: str) -> HistoryEntry:
        at, _, rest = line.partition(" ")
        state, _, reason = rest.partition(" ")
        return cls(state, at, reason)


@dataclass(frozen=True)
class ErrorEntry:
    """One error recorded on the operation, by attempt (the current outcome's error is `last_error`)."""

    at: str
    attempt: int
    error: str

    def to_item(self) -> dict[str, Any]:
        return {"at": self.at, "attempt": self.attempt, "error": self.error}

    def low_level(self) -> dict[str, Any]:
        return {"M": {"at": s(self.at), "attempt": n(self.attempt), "error": s(self.error)}}

    @classmethod
    def from_low_level(cls, entry: dict[str, Any]) -> ErrorEntry:
        return cls(_str(entry, "at") or "", int(_num(entry, "attempt") or 0), _str(entry, "error") or "")


@dataclass(frozen=True)
class ConflictEntry:
    """A producer's write of other content under this operation id: refused, never run."""

    at: str
    fingerprint: str
    job_type: str
    source: str

    def to_item(self) -> dict[str, str]:
        return {"at": self.at, "fingerprint": self.fingerprint, "job_type": self.job_type, "source": self.source}

    def low_level(self) -> dict[str, Any]:
        return {"M": {key: s(value) for key, value in self.to_item().items()}}

    @classmethod
    def from_low_level(cls, entry: dict[str, Any]) -> ConflictEntry:
        return cls(*(_str(entry, key) or "" for key in ("at", "fingerprint", "job_type", "source")))


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
    recorded: bool = True
    """False for the implicit ACCEPTED state of an operation that has no state record yet."""

    @classmethod
    def absent(cls, operation_id: str) -> StateRecord:
        return cls(operation_id, OperationState.ACCEPTED, recorded=False)

    @classmethod
    def from_item(cls, item: dict[str, Any]) -> StateRecord:
        state_value = _str(item, "state")
        try:
            state = OperationState(state_value) if state_value else OperationState.ACCEPTED
        except ValueError:
            # Only converge writes this table; a value it does not know is kept visible, never guessed.
            raise ValueError(f"state record {item.get('operation_id')} has an unknown state {state_value!r}") from None
        original = None
        if isinstance(item.get("original"), dict) and "M" in item["original"]:
            try:
                original = JobRequest.from_image({"operation_id": item["operation_id"], **item["original"]["M"]})
            except UnusableRequest:
                original = None
        return cls(
            operation_id=item["operation_id"]["S"],
            state=state,
            job_type=_str(item, "job_type"),
            fingerprint=_str(item, "fingerprint"),
            attempts=int(_num(item, "attempts") or 0),
            history=tuple(HistoryEntry.from_line(line) for line in _strings(item, "history")),
            last_error=_str(item, "last_error"),
            errors=tuple(ErrorEntry.from_low_level(entry) for entry in _maps(item, "errors")),
            lease_owner=_str(item, "lease_owner"),
            lease_until=_num(item, "lease_until"),
            redrives=int(_num(item, "redrives") or 0),
            attention=_str(item, "attention"),
            stuck_kind=(_str(item, "stuck") or "").partition(": ")[0] or None,
            stuck_reason=(_str(item, "stuck") or "").partition(": ")[2] or None,
            conflicts=tuple(ConflictEntry.from_low_level(entry) for entry in _maps(item, "conflicts")),
            conflicts_dropped=int(_num(item, "conflicts_dropped") or 0),
            original=original,
            run_at=_num(item, "run_at"),
        )

    @property
    def created_at(self) -> str | None:
        """When the operation was accepted: the history keeps its first entry."""
        return self.history[0].at if self.history else None

    @property
    def updated_at(self) -> str | None:
        return self.history[-1].at if self.history else None

    @property
    def earlier_errors(self) -> tuple[ErrorEntry, ...]:
        """The errors before the current outcome's. Every write that sets `last_error` appends its entry to
        `errors` in the same write, so while there is a current error the last entry is that one."""
        return self.errors[:-1] if self.last_error is not None else self.errors

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

    @classmethod
    def from_records(
        cls, operation_id: str, request_item: dict[str, Any] | None, state_item: dict[str, Any] | None
    ) -> Operation:
        record = StateRecord.from_item(state_item) if state_item else StateRecord.absent(operation_id)
        request, problem = None, None
        if request_item is None:
            problem = "the request is not in the jobs table"
        else:
            try:
                request = JobRequest.from_image(request_item)
            except UnusableRequest as exc:
                problem = str(exc)
        shown = record.original or request
        job_type = (record.job_type or (shown.job_type if shown else None)) or _raw_job_type(request_item)
        return cls(
            operation_id=operation_id,
            job_type=job_type,
            payload=shown.payload if shown else {},
            state=record.state,
            correlation_id=shown.correlation_id if shown else None,
            record=record,
            request=request,
            request_problem=problem,
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
            "expires_at": admitted.expires_at if admitted else None,
            "conflicts": [entry.to_item() for entry in record.conflicts],
            "conflicts_dropped": record.conflicts_dropped,
            "request": _request_note(record, self.request_problem, admitted),
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


def _raw_job_type(item: dict[str, Any] | None) -> str:
    value = (item or {}).get("job_type")
    return value["S"] if isinstance(value, dict) and isinstance(value.get("S"), str) else ""
