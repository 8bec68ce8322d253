"""Batches: many operations admitted together, counted as they settle, and one callback when all are final.

A batch has an id, its children (a per-child key, a job type and a payload each) and its callback (a job type
and a payload). Everything about a batch that must be found without a read is derived from its id: a child's
operation id is "<batch>::<shard>:<key>" (the shard its final state is counted on, fixed by its position in
the batch and the batch's size) and the callback's is "<batch>::callback". Batch ids and child keys hold no
':' so that each id parses one way; the "::" form is the batches' own (`converge.enqueue` refuses it).
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from converge.model.envelope import canonical_json
from converge.model.errors import InvalidMessage
from converge.model.states import OperationState

MAX_CHILDREN = 10_000
"""The most children one batch admits (10,000 children's requests are about 10,000 write units)."""

CHILDREN_PER_SHARD = 250
"""A counting shard counts at most this many children: one letter each (`COUNT_CODES`), so the shard's item stays
under 1 KB and each write to it is one write unit. The counter writes a shard at most once per stream batch, so one
shard takes at most 250 write units in its whole life, whatever rate the children finish at."""

ADMISSION_GRACE_SECONDS = 900
"""How long an admission may take before the reconciler lists the batch as stopped halfway (10,000 children are
written in about a minute; an admission still under way is never listed)."""

BATCH_ID_LIMIT = 64
KEY_LIMIT = 56
CHUNK = 100
"""Children written per chunk of an admission (four BatchWriteItem calls, and one record of progress)."""

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_CHILD = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)::([0-9]{1,4}):([A-Za-z0-9][A-Za-z0-9._-]*)$")
CALLBACK_SUFFIX = "::callback"

COUNTED = (
    OperationState.SUCCEEDED,
    OperationState.NOOP,
    OperationState.FAILED,
    OperationState.REJECTED,
    OperationState.CANCELLED,
    OperationState.EXPIRED,
    OperationState.UNKNOWN,
)
"""The final states a child's terminal write counts on its batch (UNKNOWN is counted, and keeps the batch from
completing until an operator resolves it: the callback never runs while a child's outcome is unknown).
REJECTED is counted when the relay or the worker refuses a child's request (its job type or message changed
since the batch was admitted), CANCELLED when the batch or the child is cancelled (`Batches.cancel`, an operator's,
a caller's or a bulk cancel), EXPIRED when a child is not started by its expires_at: every way to a final state
writes the child's state record, whose stream the counter reads, so no batch waits for a child that will never
settle."""


NOT_FINAL = "-"
"""A child's letter on its counting shard until its state record is first final."""
COUNT_CODES = {
    OperationState.SUCCEEDED: "S",
    OperationState.NOOP: "N",
    OperationState.FAILED: "F",
    OperationState.REJECTED: "R",
    OperationState.CANCELLED: "C",
    OperationState.EXPIRED: "E",
    OperationState.UNKNOWN: "U",
}
"""A counted state's letter on its child's place in the counting shard (one letter a child keeps each shard small)."""
STATE_OF_CODE = {code: state for state, code in COUNT_CODES.items()}


def place_in_shard(position: int, shards: int) -> int:
    """A child's place on its counting shard: the children counted there, in admission order (`shard_of`)."""
    return position // shards


class BatchState(StrEnum):
    ADMITTING = "admitting"
    """The record is written, the children are being written (a retry of the admission completes it)."""
    OPEN = "open"
    """Every child is written; the callback runs once all of them are final."""
    COMPLETE = "complete"
    """Every child was final and the callback's request was written (exactly once, with the batch's record)."""


def reserved(operation_id: str) -> bool:
    """True for an id of the batches' own form (a child's or a callback's), which only a batch writes."""
    return "::" in operation_id


def batch_form(operation_id: str) -> bool:
    """True for a child's id or a callback's id (the ids whose requests act on a batch), not a continuation's."""
    if parse_child(operation_id) is not None:
        return True
    batch_id = operation_id.removesuffix(CALLBACK_SUFFIX)
    return batch_id != operation_id and "::" not in batch_id


def check_name(what: str, value: Any, limit: int) -> str:
    """A batch id or a child key: 1-`limit` characters from letters, digits and . _ - (no ':')."""
    if not isinstance(value, str) or len(value) > limit or not _NAME.match(value):
        shown = str(value) if len(str(value)) <= 40 else f"{str(value)[:40]}…"
        raise InvalidMessage(
            f"{what} {shown!r} is invalid: use 1-{limit} characters from letters, digits and . _ - "
            "starting with a letter or digit"
        )
    return value


def shard_count(children: int) -> int:
    """The counting shards for a batch of this many children: one per CHILDREN_PER_SHARD (at least one)."""
    return max(1, math.ceil(children / CHILDREN_PER_SHARD))


def shard_of(position: int, shards: int) -> int:
    """The shard a child is counted on: by its position in the batch, in turn, so that no shard counts more than
    CHILDREN_PER_SHARD children and children finishing in admission order spread over every shard."""
    return position % shards


def child_id(batch_id: str, key: str, shard: int) -> str:
    return f"{batch_id}::{shard}:{key}"


def callback_id(batch_id: str) -> str:
    return f"{batch_id}{CALLBACK_SUFFIX}"


@dataclass(frozen=True)
class ChildOf:
    """What a child's operation id says: its batch, its shard and its key."""

    batch_id: str
    shard: int
    key: str


def parse_child(operation_id: str) -> ChildOf | None:
    """The batch a child's id names (None for any other id, a child's continuation included)."""
    found = _CHILD.match(operation_id)
    if found is None:
        return None
    return ChildOf(found.group(1), int(found.group(2)), found.group(3))


@dataclass(frozen=True)
class CountMove:
    """A child's state record turning (or staying) final, as the state table's stream shows it. A child an operator
    reopens keeps its place's letter (its earlier final state) until such a change comes."""

    operation_id: str
    child: ChildOf
    now: OperationState


@dataclass(frozen=True)
class BatchChild:
    """One child of a batch: its key (unique in the batch, part of its operation id), job type and payload."""

    key: str
    job_type: str
    payload: Mapping[str, Any]


@dataclass(frozen=True)
class BatchCallback:
    """The job enqueued once when every child is final; its payload gets the batch's summary (its message
    subclasses `converge.BatchSummary`)."""

    job_type: str
    payload: Mapping[str, Any] = field(default_factory=dict)


def manifest_fingerprint(children: Iterable[BatchChild], callback: BatchCallback) -> str:
    """What a batch id promises: every child (key, job type, payload, in order) and the callback."""
    digest = hashlib.sha256()
    digest.update(canonical_json({"callback": [callback.job_type, dict(callback.payload)]}).encode())
    for child in children:
        digest.update(b"\n")
        digest.update(canonical_json([child.key, child.job_type, dict(child.payload)]).encode())
    return digest.hexdigest()[:32]


@dataclass(frozen=True)
class BatchChange:
    """A child whose final state changed after the batch completed (an operator's retry of a failed child)."""

    at: str
    child: str
    before: str
    after: str


@dataclass(frozen=True)
class Batch:
    """A batch as stored: its record and its counts (summed over its shards)."""

    batch_id: str
    state: BatchState
    fingerprint: str
    total: int
    shards: int
    callback_job_type: str
    created_at: str
    written: int = 0
    """Children written so far (all of them once the batch is open)."""
    chunks: int = 0
    """Chunks of children written so far (an admission resumed after a crash starts after them)."""
    counts: Mapping[str, int] = field(default_factory=dict)
    opened_at: str | None = None
    completed_at: str | None = None
    summary: Mapping[str, int] | None = None
    """The counts the callback was given (a child that changes afterwards changes `counts`, not this)."""
    changes: tuple[BatchChange, ...] = ()
    changes_after_callback: int = 0
    cancelled: str | None = None
    """Who cancelled the batch, when and why (its children not started were cancelled; the callback still runs)."""
    listed: str | None = None
    """Why the reconciler's last pass found the batch unable to finish by itself (None: it did not)."""
    callback_payload: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)
    """The callback's payload as admitted (its summary's fields are added when it is written)."""

    @property
    def final(self) -> int:
        return sum(self.counts.get(state.value, 0) for state in COUNTED)

    @property
    def unknown(self) -> int:
        return self.counts.get(OperationState.UNKNOWN.value, 0)

    @property
    def callback_id(self) -> str:
        return callback_id(self.batch_id)

    def child_id(self, position: int, key: str) -> str:
        """The operation id of the child at `position` (0-based, in admission order) with `key`."""
        return child_id(self.batch_id, key, shard_of(position, self.shards))

    @property
    def attention(self) -> str | None:
        """Why the batch cannot finish by itself (None when it can, or has)."""
        if self.state is BatchState.ADMITTING:
            return f"admission stopped at {self.written} of {self.total} children: enqueue the batch again to finish it"
        if self.state is BatchState.OPEN and self.unknown:
            return f"{self.unknown} children UNKNOWN: resolve them (converge ops resolve) and the callback follows"
        if self.state is BatchState.OPEN and self.counts and self.final >= self.total:
            return (
                "every child is final but the callback is not written (the look after the last child was lost): "
                f"converge batches complete {self.batch_id}"
            )
        if self.state is not BatchState.COMPLETE and self.listed:
            return self.listed
        return None


@dataclass(frozen=True)
class BatchCancel:
    """What cancelling a batch did: children cancelled, and those too late (started or final), by id."""

    batch_id: str
    cancelled: int
    too_late: int
    callback_written: bool

    def to_json(self) -> dict[str, Any]:
        return {
            "batch_id": self.batch_id,
            "cancelled": self.cancelled,
            "too_late": self.too_late,
            "callback_written": self.callback_written,
        }


@dataclass(frozen=True)
class BatchAdmission:
    """An enqueue_batch's answer: the batch as it stands, and whether this call created it."""

    batch: Batch
    created: bool
