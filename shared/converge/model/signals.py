"""Signals: what a waiting step (`ctx.wait_for`) is resumed by, and what a sender is answered.

One signal item per (operation, wait name) holds whichever came first: a signal (its id, payload, sender) or the
wait's timeout. The first one written is the wait's outcome for good; a second signal with another id is refused
and kept on the item's `refused` list, never dropped. How they are stored is the store's
(`converge.store.signals`); why each race ends in exactly one outcome is docs/signals.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from converge.model.envelope import plain
from converge.model.errors import InvalidMessage

SIGNAL_WAIT = "wait_for"
"""The policy a signal wait's marker records (claimed while it waits; done, naming what resumed it)."""

REFUSED_KEPT = 10
"""Refused signals listed on the item (the first ones; later ones are counted)."""

SIGNAL_ITEM_MARK = "::signal:"
"""What a jobs-table item's key holds when the item is a signal, not a request:
"<operation id>::signal:<name>:<signal id>" (ids with "::" are reserved: no request is ever admitted under one)."""

INVALID_ITEM = "invalid"
"""A signal item's answer when converge cannot read it as a signal (its key, its attributes or its payload)."""

SIGNAL_ITEM_JOB_TYPE = "converge.signal"
"""The job type a signal item's record is listed under (its answer: SUCCEEDED when kept, REJECTED with why not)."""


class SignalKind(StrEnum):
    """What the one item of a wait holds."""

    SIGNAL = "signal"  # a sender's signal: the wait resumes (or will resume) with its payload
    TIMEOUT = "timeout"  # the wait's time came first: it resumes with a timeout result


class SignalAnswer(StrEnum):
    """What a sender is told (a signal item's record says the same, or `INVALID_ITEM`)."""

    ACCEPTED = "accepted"  # kept; delivered to its wait (now, or when the operation gets there)
    DUPLICATE = "duplicate"  # this signal id was received already: one signal
    REFUSED = "refused"  # the wait has its outcome already (another signal, or its timeout): listed on the item
    NOT_FOUND = "not_found"  # no operation under this id
    ENDED = "ended"  # the operation is final: nothing will wait any more


@dataclass(frozen=True)
class RefusedSignal:
    """A signal that came after its wait had its outcome: listed on the wait's signal item."""

    signal_id: str
    at: str
    sent_by: str
    why: str

    def to_item(self) -> dict[str, str]:
        return {"signal_id": self.signal_id, "at": self.at, "sent_by": self.sent_by, "why": self.why}


@dataclass(frozen=True)
class SignalRecord:
    """The one item of a wait's name: the signal that came first, or its timeout, and what was refused since."""

    operation_id: str
    name: str
    kind: SignalKind
    signal_id: str
    at: str
    sent_by: str = ""
    payload: Mapping[str, Any] = field(default_factory=dict)
    refused: tuple[RefusedSignal, ...] = ()
    refused_dropped: int = 0

    @property
    def timed_out(self) -> bool:
        return self.kind is SignalKind.TIMEOUT

    def to_item(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind.value,
            "signal_id": self.signal_id,
            "at": self.at,
            "sent_by": self.sent_by,
            "payload": plain(self.payload),
            "refused": [each.to_item() for each in self.refused],
            "refused_dropped": self.refused_dropped,
        }


@dataclass(frozen=True)
class WaitResult:
    """What `ctx.wait_for` returns: the signal's payload, or a timeout (`timed_out`) the runner handles."""

    name: str
    timed_out: bool
    payload: Mapping[str, Any]
    signal_id: str | None
    at: str

    @property
    def received(self) -> bool:
        """Whether a signal resumed the wait (not its timeout)."""
        return not self.timed_out

    @classmethod
    def of(cls, record: SignalRecord) -> WaitResult:
        if record.timed_out:
            return cls(record.name, True, {}, None, record.at)
        return cls(record.name, False, dict(record.payload), record.signal_id, record.at)


@dataclass(frozen=True)
class SignalReceipt:
    """A sender's answer: what became of its signal, and whether it woke the waiting operation now."""

    answer: SignalAnswer
    operation_id: str
    name: str
    signal_id: str
    detail: str
    woke: bool = False

    @property
    def kept(self) -> bool:
        """The signal is the wait's (now or when it gets there): accepted, or received before under this id."""
        return self.answer in (SignalAnswer.ACCEPTED, SignalAnswer.DUPLICATE)

    def to_json(self) -> dict[str, Any]:
        return {
            "answer": self.answer.value,
            "operation_id": self.operation_id,
            "name": self.name,
            "signal_id": self.signal_id,
            "detail": self.detail,
            "woke": self.woke,
        }


@dataclass(frozen=True)
class SignalItemKey:
    """What a signal item's key names: the operation, the wait's name and the signal's id."""

    operation_id: str
    name: str
    signal_id: str


def signal_item_id(operation_id: str, name: str, signal_id: str) -> str:
    """The jobs-table key of a signal sent as an item (`converge.signal_put`)."""
    return f"{operation_id}{SIGNAL_ITEM_MARK}{name}:{signal_id}"


def signal_form(key: str) -> bool:
    """True for a jobs-table key of the signal items' form (whatever the rest of it holds)."""
    return SIGNAL_ITEM_MARK in key


def parse_signal_item(key: str) -> SignalItemKey:
    """The parts of a signal item's key (`signal_form`), split at its first mark: InvalidMessage for one that
    names no wait or no signal id, or whose signal id holds "::" (the batches' form). The parts are screened
    as every signal is (`converge.screening.signals`)."""
    operation_id, _, rest = key.partition(SIGNAL_ITEM_MARK)
    name, colon, signal_id = rest.partition(":")
    if not operation_id or not name or not colon or not signal_id:
        raise InvalidMessage(
            f"a signal item's key is '<operation id>{SIGNAL_ITEM_MARK}<name>:<signal id>', not {key[:80]!r}"
        )
    if "::" in signal_id:
        raise InvalidMessage(f"a signal item's signal id holds no '::' ({signal_id[:60]!r})")
    return SignalItemKey(operation_id, name, signal_id)
