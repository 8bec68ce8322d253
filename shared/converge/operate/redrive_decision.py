"""What redrive does with one dead letter, decided from plain values: no I/O here.

`decide(operation, envelope, binding, enabled, now)` is the whole policy; `converge.operate.redrive` is the DLQ
adapter around it (receive, read the operation and the toggle, then send and delete as decided).
`RedriveRequest` is what to move, and its defaults are the one place both the redrive function's
event and the bare `converge dlq redrive` take theirs from.

Messages SQS moved itself (maxReceiveCount) carry no `error_class` attribute; their error class is
`MaxReceiveCountExceeded` for the `error_classes` filter.

A copy of an operation that is SCHEDULED for a time still ahead (a request's `run_at`, or a wait between two
steps) is superseded: a copy delivered before that time is never started (it comes back until its receives run
out, which is how it got here), and the operation's own delivery at its time is still to come (its delayed
message or one-time schedule; if that is lost, the reconciler lists and sends it). Sending it again would only
dead-letter it again, so redrive and the reconciler delete it (`superseded`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from converge.flow.registry import JobBinding, Queue, toggle_key
from converge.model.clock import iso
from converge.model.envelope import Envelope
from converge.model.records import Operation, StateRecord
from converge.model.request import envelope_fingerprints
from converge.model.states import OperationState

SQS_REDRIVEN_ERROR_CLASS = "MaxReceiveCountExceeded"
"""The error class of a message SQS moved to the DLQ by itself (it has no `error_class` attribute)."""

# Final without needing a person: a copy of one is deleted (a cancelled or expired operation never runs).
CONVERGED = frozenset({OperationState.SUCCEEDED, OperationState.NOOP, OperationState.CANCELLED, OperationState.EXPIRED})
OPERATOR_STATES = frozenset({OperationState.UNKNOWN, OperationState.REJECTED})


class RedriveRequest(BaseModel):
    """What to move: a queue (or all), optional filters, and how many, how fast, for real or not."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # `converge dlq redrive` takes its defaults from here, so an empty test event means what the bare command means.
    queue: Literal["critical", "default", "bulk", "all"] = "all"
    job_types: list[str] | None = None
    error_classes: list[str] | None = None
    older_than_seconds: int | None = Field(default=None, ge=0)
    newer_than_seconds: int | None = Field(default=None, ge=0)
    operation_ids: list[str] | None = None
    max_messages: int = Field(default=100, ge=1, le=10_000)
    rate_per_second: float = Field(default=10.0, gt=0, le=1_000)
    dry_run: bool = False
    # Who asked (named in each reopened operation's history); the redrive function's own name when absent.
    actor: str | None = Field(default=None, min_length=1, max_length=200)

    @property
    def queues(self) -> list[Queue]:
        return list(Queue) if self.queue == "all" else [Queue(self.queue)]


@dataclass
class RedriveSummary:
    """The report of one run: counts per outcome, and one detail per message examined."""

    dry_run: bool
    moved: int = 0
    skipped_converged: int = 0
    superseded: int = 0
    skipped_disabled: int = 0
    left: int = 0
    errors: int = 0
    not_matched: int = 0
    incomplete: bool = False
    details: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "moved": self.moved,
            "skipped_converged": self.skipped_converged,
            "superseded": self.superseded,
            "skipped_disabled": self.skipped_disabled,
            "left": self.left,
            "errors": self.errors,
            "not_matched": self.not_matched,
            "incomplete": self.incomplete,
            "details": self.details,
        }


class Action(StrEnum):
    MOVE = "move"  # reopen the operation (if FAILED), send its request back to its queue, delete the letter
    DELETE = "delete"  # the operation settled: the letter is a stale copy
    SUPERSEDED = "superseded"  # an early copy of an operation SCHEDULED ahead: its own delivery is still to come
    LEFT = "left"  # an operator decides (UNKNOWN), or it would fail again (REJECTED)
    DISABLED = "disabled"  # its kill switch is off: moving it now would only pause it
    ERROR = "error"  # nothing safe to do with it (no operation, other content, unknown job type)


@dataclass(frozen=True)
class RedriveDecision:
    action: Action
    reason: str


def decide(
    operation: Operation | None, envelope: Envelope, binding: JobBinding | None, enabled: bool | None, now: float
) -> RedriveDecision:
    """What redrive does with one dead letter, and why.

    `binding` is the envelope's job's (None when it is not registered); `enabled` its kill switch's
    effective state (None when there is no binding); `now` the time (an early copy is judged by it). The order
    matters: a settled operation's copy is deleted whatever else is true of it, and the content check comes
    before anything is sent or deleted as superseded.
    """
    if operation is None:
        return RedriveDecision(Action.ERROR, "no such operation")
    if operation.state in CONVERGED:
        return RedriveDecision(Action.DELETE, f"operation already {operation.state.value}")
    if operation.state is OperationState.UNKNOWN:
        return RedriveDecision(Action.LEFT, "outcome UNKNOWN: an operator resolves it (converge ops resolve)")
    if operation.state is OperationState.REJECTED:
        return RedriveDecision(Action.LEFT, "input was REJECTED: it would fail again")
    expected = operation.fingerprint or (operation.request.fingerprint if operation.request else None)
    if expected is not None and expected not in envelope_fingerprints(envelope):
        why = "the message's content differs from its operation's (an identity conflict)"
        return RedriveDecision(Action.ERROR, why)
    early = superseded(operation.state_record, now)
    if early is not None:
        return RedriveDecision(Action.SUPERSEDED, early)
    if binding is None:
        return RedriveDecision(Action.ERROR, f"unknown job type {envelope.job_type!r}")
    if not enabled:
        return RedriveDecision(Action.DISABLED, f"kill switch {binding.toggle_key} is off")
    return RedriveDecision(Action.MOVE, f"{operation.state.value}: back to its queue")


def superseded(record: StateRecord, now: float) -> str | None:
    """Why a dead letter of this operation is superseded by its own delivery still to come (None: it is not): the
    operation is SCHEDULED for a time ahead, so no copy could start it before then (see the module docstring)."""
    if record.state is not OperationState.SCHEDULED or record.run_at is None or record.run_at <= now:
        return None
    waits = f"waiting at {record.waiting!r}" if record.waiting else "SCHEDULED"
    return f"an early copy: the operation is {waits} until {iso(record.run_at)}, and its own delivery is still to come"


def matches(request: RedriveRequest, envelope: Envelope, message: dict[str, Any], now: float) -> bool:
    """Whether a dead letter passes the request's filters (job type or toggle name, error class, id, age)."""
    if request.job_types and not (
        envelope.job_type in request.job_types or toggle_key(envelope.job_type) in request.job_types
    ):
        return False
    if request.error_classes and error_class(message) not in request.error_classes:
        return False
    if request.operation_ids and envelope.operation_id not in request.operation_ids:
        return False
    sent_ms = message.get("Attributes", {}).get("SentTimestamp")
    if sent_ms is not None and (request.older_than_seconds is not None or request.newer_than_seconds is not None):
        age = now - int(sent_ms) / 1000
        if request.older_than_seconds is not None and age < request.older_than_seconds:
            return False
        if request.newer_than_seconds is not None and age > request.newer_than_seconds:
            return False
    return True


def error_class(message: dict[str, Any]) -> str:
    """The worker's `error_class` attribute, or SQS_REDRIVEN_ERROR_CLASS for a message SQS moved itself."""
    attribute = message.get("MessageAttributes", {}).get("error_class", {})
    return str(attribute.get("StringValue") or SQS_REDRIVEN_ERROR_CLASS)


def resent_attributes(message: dict[str, Any]) -> dict[str, dict[str, str]]:
    """The message's attributes as SendMessage takes them, with `redrive_count` incremented."""
    attributes: dict[str, dict[str, str]] = {}
    for name, attribute in message.get("MessageAttributes", {}).items():
        if "StringValue" in attribute:
            attributes[name] = {"DataType": attribute["DataType"], "StringValue": attribute["StringValue"]}
    previous = attributes.get("redrive_count", {}).get("StringValue", "0")
    redrives = int(previous) + 1 if previous.isdigit() else 1
    attributes["redrive_count"] = {"DataType": "Number", "StringValue": str(redrives)}
    return attributes
