"""Outcomes of one delivery, and the single place where errors are mapped to them."""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from converge.model.errors import (
    ConvergeError,
    InvalidMessage,
    LeaseHeld,
    OutcomeUnknown,
    OutOfTime,
    PermanentError,
    UnknownJobType,
    error_code,
    missing_grant,
    passing_failure,
)


class Outcome(StrEnum):
    """What happened to one delivery; the worker turns each into one SQS action."""

    SUCCEEDED = "succeeded"
    NOOP = "noop"
    DUPLICATE = "duplicate_skipped"
    CONFLICT = "identity_conflict"  # other content under a taken id: recorded on the operation, never run
    PAUSED = "paused"
    UNKNOWN = "unknown"
    REJECTED = "rejected"  # invalid input: recorded, message to the DLQ now
    FAILED = "failed"  # permanent failure: recorded, message to the DLQ now
    FAILED_FINAL = "failed_final"  # last attempt: recorded, then SQS's redrive takes the message
    RETRY = "retry"  # transient: back to the queue after a backoff
    BUSY = "busy"  # another worker holds the lease: back to the queue after it
    REQUEUE = "requeue"  # out of time: handed back untouched
    EARLY = "early"  # a delayed operation's copy that arrived before its run_at: back to the queue until then
    EXPIRED = "expired"  # not started by its expires_at: recorded EXPIRED, never run
    WAITING = "waiting"  # the runner waits between two steps: recorded SCHEDULED, resumed by a delayed message
    HELD = "held"  # over a rate limit before it started: recorded SCHEDULED, sent again for its slot

    @property
    def acknowledged(self) -> bool:
        """True when the message is done with and should be deleted from its queue."""
        return self in _ACKNOWLEDGED

    @property
    def to_dlq_now(self) -> bool:
        return self in (Outcome.REJECTED, Outcome.FAILED)


_ACKNOWLEDGED = frozenset(
    {
        Outcome.SUCCEEDED,
        Outcome.NOOP,
        Outcome.DUPLICATE,
        Outcome.CONFLICT,
        Outcome.PAUSED,
        Outcome.EXPIRED,
        Outcome.UNKNOWN,
        Outcome.REJECTED,
        Outcome.FAILED,
        Outcome.WAITING,
        Outcome.HELD,
    }
)


@dataclass(frozen=True)
class Result:
    outcome: Outcome
    reason: str = ""
    error_class: str | None = None
    retry_after: float | None = None


def classify(exc: BaseException, final_attempt: bool) -> Outcome:
    """Map an error to an outcome: the one place where error classes become decisions."""
    if isinstance(exc, OutOfTime):
        return Outcome.REQUEUE
    if isinstance(exc, LeaseHeld):
        return Outcome.BUSY
    if isinstance(exc, (InvalidMessage, UnknownJobType)):
        return Outcome.REJECTED
    if isinstance(exc, PermanentError):
        return Outcome.FAILED
    if missing_grant(exc):
        # A configuration error, not a passing one: every attempt would be refused the same way until the grant is
        # deployed. FAILED now, its message in the DLQ; once deployed, `converge dlq redrive` or `ops retry` runs it.
        return Outcome.FAILED
    if isinstance(exc, OutcomeUnknown):
        return Outcome.UNKNOWN
    # A TransientError, a passing failure of AWS or the network, and anything unforeseen (see `unforeseen`: a bug
    # fixed by a deploy then converges) are retried; the last attempt fails.
    return Outcome.FAILED_FINAL if final_attempt else Outcome.RETRY


def unforeseen(exc: BaseException) -> bool:
    """An error nobody planned for, most likely a bug in a runner: neither one of converge's own error classes
    (which a runner raises to say what happened) nor a known passing failure of AWS or the network. It is
    retried like a transient one, but its author needs its traceback: the pipeline logs it at ERROR."""
    return not isinstance(exc, ConvergeError) and not passing_failure(exc) and not missing_grant(exc)


_PRINCIPAL = re.compile(r"^User: \S+ is (?=not authorized to perform: )")
"""The head of AWS's access-denied message that names the caller (the function's own role session: long, and no
news to whoever reads the receipt)."""


def describe(exc: BaseException) -> str:
    """What an error says, for a receipt, a log line or a listing."""
    if missing_grant(exc):
        return _describe_missing_grant(exc)
    text = str(exc) or exc.__class__.__name__
    return f"{exc.__class__.__name__}: {text}"


def _describe_missing_grant(exc: BaseException) -> str:
    """`missing grant: not authorized to perform: ses:SendEmail on resource: arn:... (AccessDeniedException calling
    SendEmail)`: the action and the resource first, so a receipt's bounded reason keeps them."""
    error = getattr(exc, "response", {}).get("Error", {})
    message = _PRINCIPAL.sub("", str(error.get("Message") or exc))
    return f"missing grant: {message} ({error_code(exc)} calling {getattr(exc, 'operation_name', '?')})"
