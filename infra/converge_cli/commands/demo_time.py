"""The demo's time and flow checks: a delayed job runs at its time, a cancelled one never, an expired one ends
EXPIRED; each shown by effects counted in the emulated services and by the listings."""

from __future__ import annotations

from typing import Any

from converge.model.clock import iso
from converge.model.states import OperationState
from converge.model.timing import parse_instant

DELAYED, CANCELLED, EXPIRING = "demo-delayed-1", "demo-cancelled-1", "demo-expiring-1"
_S = OperationState


def run(demo: Any, check: Any) -> int:
    """Enqueue the three, let time pass, append the checks; returns how many e-mails they were meant to send."""
    from localcloud import effects

    cloud, converge = demo.cloud, demo.converge
    jobs = list(cloud.hooks.timed_jobs())
    if not jobs:
        demo.step("the catalogue names no timed jobs (its local hooks' timed_jobs): time checks skipped")
        return 0
    job_type, payload = jobs[0]  # its effect is an e-mail, counted in SES
    now = cloud.clock.now()
    demo.step("enqueueing a job due in 2 hours, one to cancel, and one that must start within a minute")
    run_at = iso(now + 7200)
    converge.enqueue(job_type, DELAYED, payload, run_at=run_at)
    converge.enqueue(job_type, CANCELLED, payload, run_at=iso(now + 3600))
    converge.enqueue(job_type, EXPIRING, payload, expires_at=iso(now + 60))
    cloud.advance(120)  # the expiring one's delivery comes too late
    cloud.drain(max_fast_forward=0)
    waiting = {row["operation_id"] for row in converge.operations.listings.iter_attention("SCHEDULED")}
    before = effects.count(cloud).emails
    demo.report.checks.append(
        check(
            "a delayed job waits SCHEDULED and listed, sending nothing",
            {DELAYED, CANCELLED} <= waiting and before.get(DELAYED, 0) == 0,
            f"listed: {', '.join(sorted(waiting)) or 'none'}",
        )
    )
    cancelled = converge.cancel(CANCELLED, "the demo changed its mind", actor="demo")
    demo.report.events["cancelled"] += int(cancelled.applied)
    demo._drain("letting two hours pass (the one-time schedule fires)")
    sent = effects.count(cloud).emails
    delayed = converge.operations.require(DELAYED)
    started = [entry.at for entry in delayed.history if entry.state == _S.IN_PROGRESS.value]
    on_time = bool(started) and parse_instant("started", started[0]) >= parse_instant("run_at", run_at)
    demo.report.checks.append(
        check(
            "the delayed job ran once, not before its run_at",
            delayed.state is _S.SUCCEEDED and sent.get(DELAYED, 0) == 1 and on_time,
            f"{delayed.state.value}, {sent.get(DELAYED, 0)} e-mail(s), started {started[0] if started else '-'}",
        )
    )
    for operation_id, state in ((CANCELLED, _S.CANCELLED), (EXPIRING, _S.EXPIRED)):
        operation = converge.operations.require(operation_id)
        listed = {row["operation_id"] for row in converge.operations.listings.iter_attention(state.value)}
        demo.report.checks.append(
            check(
                f"{operation_id} ends {state.value}, listed, and sent nothing",
                operation.state is state and operation_id in listed and sent.get(operation_id, 0) == 0,
                f"{operation.state.value}: {operation.history[-1].reason if operation.history else ''}",
            )
        )
    return 1
