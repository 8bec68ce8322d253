"""Delayed, cancelled and expiring jobs for a chaos run, beside the mix (`Workload.enqueue_mix`).

Per call: some jobs due within SQS's delay, some beyond it (a one-time schedule), some cancelled
(before the relay saw them, or while they wait), and some that must start within a minute but are
delivered two minutes later (the clock is advanced, which only brings retries forward). The one-time
schedules may fire twice (`OneTimeSchedules.duplicate_rate`), as Scheduler's at-least-once delivery allows.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from converge.model.clock import iso

SHORT_DELAY, LONG_DELAY, EXPIRY = 300.0, 2 * 3600.0, 60.0


@dataclass
class Timed:
    delayed: list[str] = field(default_factory=list)
    cancelled: list[str] = field(default_factory=list)
    expiring: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.delayed) + len(self.cancelled) + len(self.expiring)


def run_timed(workload: Any, count: int, prefix: str, rng: random.Random, into: Timed | None = None) -> Timed:
    """Enqueue `count` timed jobs, cancel some, and let the expiring ones come too late; then drain.

    The jobs are the catalogue's (its local hooks' `timed_jobs()`); a catalogue without them gets none."""
    timed = into if into is not None else Timed()
    converge, cloud = workload.converge, workload.cloud
    jobs = list(cloud.hooks.timed_jobs())
    if not jobs:
        return timed
    now = cloud.clock.now()
    start = len(timed)
    to_cancel_early, to_cancel_waiting = [], []
    for index in range(start, start + count):
        job_type, payload = jobs[index % len(jobs)]
        operation_id = f"{prefix}-timed-{index}"
        kind = rng.choice(("short", "long", "cancel-early", "cancel-waiting", "expire"))
        if kind == "expire":
            converge.enqueue(job_type, operation_id, payload, expires_at=iso(now + EXPIRY))
            timed.expiring.append(operation_id)
            continue
        run_at = iso(now + (SHORT_DELAY if kind == "short" else LONG_DELAY) + rng.uniform(0, 60))
        converge.enqueue(job_type, operation_id, payload, run_at=run_at)
        if kind.startswith("cancel"):
            (to_cancel_early if kind == "cancel-early" else to_cancel_waiting).append(operation_id)
            timed.cancelled.append(operation_id)
        else:
            timed.delayed.append(operation_id)
    for operation_id in to_cancel_early:  # the relay has not seen it yet: it is never sent at all
        converge.cancel(operation_id, "cancelled before dispatch", actor="chaos")
    cloud.advance(2 * EXPIRY)  # the expiring ones are delivered after their expires_at
    cloud.drain(max_fast_forward=0)
    for operation_id in to_cancel_waiting:  # SCHEDULED: its message or schedule is waiting
        converge.cancel(operation_id, "cancelled while waiting", actor="chaos")
    workload.drain()
    return timed
