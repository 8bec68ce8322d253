"""A delivery's writes on the state table: one conditional UpdateItem each, reading nothing first.

The lease (`acquire`) is the peek: it takes the operation IN_PROGRESS, creating its record when it
has none, and when its condition fails the record that failed it comes back with the error
(ReturnValuesOnConditionCheckFailure), which says why: settled, leased by a live holder, or promised
to other content. `settle` records the outcome and `release` gives the lease back, both only for the
lease's holder. `pause` and `reject` move from whatever state the transition table allows.

Writes that know the record (a lease holder knows it from its own lease's ReturnValues=ALL_OLD,
which consumes no read capacity) store the bounded history whole; writes that do not append one
entry, which the next knowing write trims.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from converge import states
from converge.clock import Clock, SystemClock, iso
from converge.receipt import ERRORS_LIMIT, HISTORY_LIMIT, ErrorEntry, HistoryEntry, StateRecord, clip, n, s
from converge.states import LISTED_STATES, OperationState
from converge.updates import Update

_S = OperationState


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
        """A subject from its content's accepted fingerprints (`converge.request.accepted_fingerprints`)."""
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


@dataclass(frozen=True)
class Refused:
    """A conditional write that did not apply, and the record that made it fail."""

    current: StateRecord


class StateWrites:
    """The writes a delivery (worker, relay) makes on the state table; the operations store builds on them."""

    def __init__(self, state_table: str, dynamodb_client: Any, clock: Clock | None = None) -> None:
        self._state = state_table
        self._client = dynamodb_client
        self._clock = clock or SystemClock()

    # -- a delivery's writes: one each, reading nothing first -------------------------------------------------

    def acquire(self, subject: Subject, owner: str, lease_seconds: float) -> Lease | Refused:
        """Take the operation IN_PROGRESS under a lease, creating its record if it has none.

        Refused (with the record as it stands) when it is settled, leased by a live holder, or
        promised to other content.
        """
        now, at = self._now()
        accepted = HistoryEntry(_S.ACCEPTED, subject.accepted_at or at, "accepted")
        started = HistoryEntry(_S.IN_PROGRESS, at, "started")
        # The fewest actions that make the change: the happy path's cost is this write and the settle.
        update = Update().set_if_absent("fingerprint", s(subject.fingerprint))
        update.set("state", s(_S.IN_PROGRESS)).set("lease_owner", s(owner)).set("lease_until", n(now + lease_seconds))
        update.append("history", [started.low_level()], start=[accepted.low_level()])
        update.add("attempts").remove("attention", "attention_sk", "stuck")
        self._may_move(update, _S.IN_PROGRESS, now, subject.accepted)
        # A delayed operation is never started before its time, whatever copy of its message arrives.
        run_at = update.name("run_at")
        update.require(f"attribute_not_exists({run_at}) OR {run_at} <= {update.value(n(now))}")
        result = self._write(update, subject.operation_id, return_old=True)
        if isinstance(result, Refused):
            return result
        old = result.get("Attributes")
        previous = StateRecord.from_item(old) if old else None
        history = previous.history if previous and previous.history else (accepted,)
        return Lease(
            operation_id=subject.operation_id,
            job_type=subject.job_type,
            owner=owner,
            until=now + lease_seconds,
            attempt=(previous.attempts if previous else 0) + 1,
            history=(*history, started),
            errors=previous.errors if previous else (),
            previous=previous,
        )

    def settle(self, lease: Lease, to: OperationState, reason: str, error: str | None = None) -> Refused | None:
        """Record the outcome and give the lease back, if this delivery still holds it (None: recorded).

        For effect_then_claim this write is the claim."""
        states.check(_S.IN_PROGRESS, to)
        return self._as_holder(lease, to, reason, error)

    def release(self, lease: Lease, reason: str, error: str | None = None) -> Refused | None:
        """Give the lease back without an outcome (a retry or a hand-back follows); None: released."""
        states.check(_S.IN_PROGRESS, _S.IN_PROGRESS)
        return self._as_holder(lease, _S.IN_PROGRESS, reason, error)

    def pause(self, subject: Subject, reason: str) -> Refused | None:
        """The kill switch is off: PAUSED (listed) until the resumer re-dispatches it; None: paused."""
        now, at = self._now()
        update = self._identified(subject, at)
        self._blind_move(update, subject, _S.PAUSED, reason, at, now)
        return _refusal(self._write(update, subject.operation_id))

    def schedule(self, subject: Subject, run_at: float, reason: str) -> Refused | None:
        """A delayed operation waits: SCHEDULED (listed, with its time) until run_at; None: scheduled."""
        now, at = self._now()
        update = self._identified(subject, at)
        update.set("run_at", n(float(run_at)))
        self._blind_move(update, subject, _S.SCHEDULED, reason, at, now)
        return _refusal(self._write(update, subject.operation_id))

    def expire(self, subject: Subject, reason: str) -> Refused | None:
        """Not started by its expires_at: EXPIRED (final, listed) with the reason; None: expired. Refused
        once any delivery took a lease, whatever the state now (expiry ends only work that never began)."""
        now, at = self._now()
        update = self._identified(subject, at)
        self._blind_move(update, subject, _S.EXPIRED, reason, at, now)
        return _refusal(self._write(update, subject.operation_id))

    def reject(self, subject: Subject, reason: str) -> Refused | None:
        """Refuse the operation's input: REJECTED (final, listed) with the reason; None: rejected."""
        now, at = self._now()
        update = self._identified(subject, at)
        self._blind_move(update, subject, _S.REJECTED, reason, at, now)
        update.set("last_error", s(clip(reason)))
        update.append("errors", [ErrorEntry(at, 0, clip(reason)).low_level()], start=[])
        return _refusal(self._write(update, subject.operation_id))

    # -- building blocks --------------------------------------------------------------------------------------

    def _as_holder(self, lease: Lease, to: OperationState, reason: str, error: str | None) -> Refused | None:
        """A write only the lease's holder may make: it knows the record, so it stores the bounded history."""
        _, at = self._now()
        history = bounded_history([*lease.history, HistoryEntry(to, at, clip(reason))])
        update = Update().set("state", s(to)).set("history", {"L": [entry.low_level() for entry in history]})
        # A success clears `last_error` even when the lease's record had none: an operator may have recorded
        # one while the lease was held, and a SUCCEEDED or SKIPPED record carries no current error.
        self._error(update, lease.errors, lease.attempt, error, at)
        self._attention(update, to, lease.job_type, at)
        if to in LISTED_STATES:  # the acquire wrote no job type (the happy path stays two small writes)
            update.set_if_absent("job_type", s(lease.job_type))
        update.remove("lease_owner", "lease_until")
        update.require(f"{update.name('lease_owner')} = {update.value(s(lease.owner))}")
        return _refusal(self._write(update, lease.operation_id))

    def _blind_move(
        self, update: Update, subject: Subject, to: OperationState, reason: str, at: str, now: float
    ) -> None:
        """Move to `to` from any state the table allows, without knowing which: one history entry appended."""
        accepted = HistoryEntry(_S.ACCEPTED, subject.accepted_at or at, "accepted")
        update.set("state", s(to))
        update.append("history", [HistoryEntry(to, at, clip(reason)).low_level()], start=[accepted.low_level()])
        self._attention(update, to, subject.job_type, at)
        self._may_move(update, to, now, subject.accepted)

    def _identified(self, subject: Subject, at: str, into: Update | None = None) -> Update:
        """The attributes a record is created with (kept when it exists): job type, fingerprint, creation time."""
        update = into or Update()
        return update.set_if_absent("job_type", s(subject.job_type)).set_if_absent(
            "fingerprint", s(subject.fingerprint)
        )

    @staticmethod
    def _may_move(update: Update, to: OperationState, now: float, content: tuple[str, ...]) -> None:
        """Apply only from a state the table lets move to `to` (no record at all is ACCEPTED), never under a
        live lease, and only for the content the operation was admitted with."""
        state, lease_until, fp = update.name("state"), update.name("lease_until"), update.name("fingerprint")
        allowed = ", ".join(update.value(s(source)) for source in sorted(states.sources(to)))
        absent = f"attribute_not_exists({state}) OR " if _S.ACCEPTED in states.sources(to) else ""
        update.require(f"{absent}{state} IN ({allowed})")
        # Only an IN_PROGRESS record holds a live lease; an expired one is a takeover.
        update.require(f"attribute_not_exists({lease_until}) OR {lease_until} < {update.value(n(now))}")
        admitted = ", ".join(update.value(s(value)) for value in content)
        update.require(f"attribute_not_exists({fp}) OR {fp} IN ({admitted})")
        if to in states.NOTHING_RAN:
            never_started(update)

    @staticmethod
    def _error(update: Update, earlier: tuple[ErrorEntry, ...], attempt: int, error: str | None, at: str) -> None:
        """The current outcome's error apart from earlier ones: a success clears `last_error` and keeps `errors`."""
        if error is None:
            update.remove("last_error")
            return
        text = clip(error)
        errors = [*earlier, ErrorEntry(at, attempt, text)][-ERRORS_LIMIT:]
        update.set("last_error", s(text)).set("errors", {"L": [entry.low_level() for entry in errors]})

    @staticmethod
    def _attention(update: Update, to: OperationState, job_type: str, at: str) -> None:
        if to in LISTED_STATES:
            update.set("attention", s(to)).set("attention_sk", s(f"{job_type}#{at}"))
        else:
            update.remove("attention", "attention_sk")
        update.remove("stuck")

    def _write(self, update: Update, operation_id: str, return_old: bool = False) -> Any:
        extra: dict[str, Any] = {"ReturnValuesOnConditionCheckFailure": "ALL_OLD"}
        if return_old:
            extra["ReturnValues"] = "ALL_OLD"
        try:
            return self._client.update_item(**update.request(self._state, state_key(operation_id), **extra))
        except ClientError as exc:
            if not condition_failed(exc):
                raise
            item = failed_item(exc) or self._get(self._state, operation_id)
            return Refused(StateRecord.from_item(item) if item else StateRecord.absent(operation_id))

    def _get(self, table: str, operation_id: str) -> dict[str, Any] | None:
        """One record, read strongly consistent: what converge decides on must include the latest write."""
        response = self._client.get_item(TableName=table, Key=state_key(operation_id), ConsistentRead=True)
        return response.get("Item")  # an item that exists is never empty: it holds its key

    def now(self) -> float:
        return self._clock.now()

    def _now(self) -> tuple[float, str]:
        now = self._clock.now()
        return now, iso(now)


def never_started(update: Update) -> None:
    """Require that no lease was ever taken: the lease write adds to `attempts`, and nothing takes it away."""
    attempts = update.name("attempts")
    update.require(f"attribute_not_exists({attempts}) OR {attempts} = {update.value(n(0))}")


def bounded_history(history: list[HistoryEntry]) -> list[HistoryEntry]:
    """The first entry (when the operation was accepted) and the latest changes, HISTORY_LIMIT in all."""
    return history if len(history) <= HISTORY_LIMIT else [history[0], *history[-(HISTORY_LIMIT - 1) :]]


def state_key(operation_id: str) -> dict[str, Any]:
    return {"operation_id": s(operation_id)}


def _refusal(result: Any) -> Refused | None:
    return result if isinstance(result, Refused) else None


def failed_item(exc: ClientError) -> dict[str, Any] | None:
    """The item that failed a condition, when the service returned it (ReturnValuesOnConditionCheckFailure)."""
    item: Any = exc.response.get("Item")
    return item if isinstance(item, dict) and item else None


def condition_failed(exc: ClientError) -> bool:
    return exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException"
