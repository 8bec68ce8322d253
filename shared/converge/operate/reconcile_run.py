"""One reconciler run as its passes share it: the time budget, the summary, the messages to give back.

`converge.operate.reconciler` runs the passes in order over one `ReconcileRun`; each pass
(`converge.operate.relay_replay`, `converge.operate.dead_letter_sweep`, `converge.operate.overdue`,
`converge.operate.unfinished_batches`) reads its source and records what it did in the run's summary.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from converge.model.states import OperationState
from converge.operate.deadletters import receive

TIME_MARGIN_MS = 10_000
HIDE_SECONDS = 60
STUCK_STATES = frozenset({OperationState.ACCEPTED, OperationState.SCHEDULED, OperationState.IN_PROGRESS})
"""Open states nothing moves on by itself once the message is gone (PAUSED is the resumer's, and listed).
SCHEDULED is one of them: its message or schedule is all that will start it."""


@dataclass
class ReconcileSummary:
    relay_failures: int = 0
    redispatched: int = 0
    already_moved: int = 0
    relay_failures_left: int = 0
    dead_letters_examined: int = 0
    dead_letters_superseded: int = 0
    stuck_listed: int = 0
    reopened_redispatched: int = 0
    undispatched_listed: int = 0
    failed_firings: int = 0
    overdue_redispatched: int = 0
    resumptions_sent: int = 0
    unrunnable: int = 0
    batches_examined: int = 0
    batch_callbacks_written: int = 0
    batch_admissions_stopped: int = 0
    batches_listed: int = 0
    incomplete: bool = False
    details: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {name: value for name, value in vars(self).items()}


@dataclass
class ReconcileRun:
    """One run: its summary, the time left (None: no deadline), and the messages its passes received and keep
    (queue URL, receipt handle), made visible again when the run ends."""

    summary: ReconcileSummary
    remaining_ms: Callable[[], int] | None
    release: list[tuple[str, str]] = field(default_factory=list)

    def out_of_time(self) -> bool:
        late = self.remaining_ms is not None and self.remaining_ms() < TIME_MARGIN_MS
        self.summary.incomplete = self.summary.incomplete or late
        return late


class ReconcilePass(Protocol):
    """One of the reconciler's passes: one source read within the run's time, what it did added to its summary."""

    def sweep(self, run: ReconcileRun) -> None: ...


def fresh_messages(
    sqs: Any, queue_url: str, run: ReconcileRun, wait_seconds: int, limit: int | None = None
) -> Iterator[dict[str, Any]]:
    """The queue's messages this run has not seen yet, received ten at a time (each hidden for HIDE_SECONDS), until
    a receive brings none new, `limit` were seen or the run's time is up. A message received again is kept for
    the run's release, to be made visible when the run ends; what becomes of a fresh one is the caller's."""
    seen: set[str] = set()
    while (limit is None or len(seen) < limit) and not run.out_of_time():
        messages = receive(sqs, queue_url, 10, HIDE_SECONDS, wait_seconds)
        fresh = [message for message in messages if message["MessageId"] not in seen]
        run.release += [(queue_url, message["ReceiptHandle"]) for message in messages if message["MessageId"] in seen]
        if not fresh:
            return
        for message in fresh:
            seen.add(message["MessageId"])
            yield message
