"""The demo's debounce: a burst of requests for one key becomes one run, the newest, within the burst's `max_wait`.

The scenario's requests (`DebounceStep`) are enqueued in the order it gives, a moment of local time apart, each
relayed and delivered as it comes (each waits SCHEDULED for the burst); the local clock then moves past the quiet
period and the demo drains. The checks count what the burst made in the emulated services (e-mails, objects, ledger
rows, by operation): exactly the step's effects, all made by one operation, the newest request; every other request
ended NOOP, "debounced into <the run's operation id>"; and the run started (its receipt's first IN_PROGRESS) no later
than `max_wait` after the first request was accepted. A second run, or an effect made twice, fails the demo.
"""

from __future__ import annotations

from typing import Any

from converge.local_hooks import DebounceStep
from converge.model.states import OperationState
from converge_cli.commands.demo_effects import made_by

PREFIX = "demo-burst-"
"""The burst's operation ids: this and each request's place in the order of arrival (1, 2, ...)."""


def run(demo: Any, check: Any) -> int:
    """Run the burst and append its checks; returns how many e-mails it was meant to send."""
    from localcloud import effects
    from localcloud.debounce_workload import first_at, send_burst

    step: DebounceStep | None = demo.scenario.debounce
    if step is None:
        return 0
    cloud, converge = demo.cloud, demo.converge
    debounce = converge.registry.get(step.job_type).debounce
    if debounce is None:
        demo.report.checks.append(check(f"{step.job_type} is debounced", False, "its binding declares no Debounce"))
        return 0
    # a moment apart, the whole burst within half its quiet period: one burst, whatever the period
    spacing = debounce.period / (2 * len(step.payloads))
    ids = [f"{PREFIX}{place}" for place in range(1, len(step.payloads) + 1)]
    demo.step(f"enqueueing a burst of {len(ids)} {step.job_type} ({step.note}), {spacing:g} s apart")
    # each relayed and delivered as it comes: it waits for its burst
    send_burst(cloud, converge, step.job_type, [[request] for request in zip(ids, step.payloads, strict=True)], spacing)
    demo.report.events["debounced_requests"] += len(ids)
    cloud.advance(debounce.period)
    demo._drain(f"moving the local clock {debounce.period:g} s on: the burst's quiet period is over, it runs")

    counted = effects.count(cloud)
    made = {operation_id: _made(counted, operation_id) for operation_id in ids}
    stored = {operation_id: converge.operations.require(operation_id) for operation_id in ids}
    newest = ids[max(range(len(ids)), key=lambda place: debounce.order_of(step.payloads[place]))]
    ran = [operation_id for operation_id in ids if made[operation_id]]
    summed: dict[str, int] = {}
    for found in made.values():
        for service, number in found.items():
            summed[service] = summed.get(service, 0) + number
    demo.report.checks.append(
        check(
            f"{step.job_type}: the burst ran once, as its newest request ({newest}), making {_shown(step.effects)}",
            ran == [newest] and summed == step.effects and stored[newest].state is OperationState.SUCCEEDED,
            f"made by {', '.join(ran) or 'none'}: {_shown(summed)}; {newest} {stored[newest].state.value}",
        )
    )
    wrong = []
    for operation_id in ids:
        if operation_id == newest:
            continue
        operation = stored[operation_id]
        reason = operation.history[-1].reason if operation.history else ""
        if operation.state is not OperationState.NOOP or reason != f"debounced into {newest}":
            wrong.append(f"{operation_id}: {operation.state.value} {reason!r}")
    demo.report.checks.append(
        check(
            f"{step.job_type}: the {len(ids) - 1} other requests ended NOOP, debounced into {newest}",
            not wrong,
            "; ".join(wrong),
        )
    )
    first = min(first_at(stored[operation_id], OperationState.ACCEPTED) for operation_id in ids)
    started = first_at(stored[newest], OperationState.IN_PROGRESS)
    waited = started - first
    demo.report.checks.append(
        check(
            f"{step.job_type}: the run started within {debounce.max_wait:g} s of the burst's first request",
            waited <= debounce.max_wait,
            f"started {waited:.1f} s after it" if waited != float("inf") else "never started",
        )
    )
    demo.report.burst = {
        "job_type": step.job_type,
        "debounce": debounce.describe(),
        "newest_by": debounce.newest_by,
        "requests": [
            {
                "operation_id": operation_id,
                "payload": payload,
                "state": stored[operation_id].state.value,
                "reason": stored[operation_id].history[-1].reason if stored[operation_id].history else "",
                "made": made[operation_id],
            }
            for operation_id, payload in zip(ids, step.payloads, strict=True)
        ],
        "run": newest if newest in ran else None,
        "run_payload": step.payloads[ids.index(newest)],
        "started_after_seconds": round(waited, 3) if waited != float("inf") else None,
    }
    return step.effects.get("ses", 0)


def _made(counted: Any, operation_id: str) -> dict[str, int]:
    """What one request made, by service; in the reference shape each object version it wrote (one PDF stored twice
    under its content's key counts twice, where a count of keys would see one)."""
    found = made_by(counted, operation_id)
    if counted.counts_any and not counted.by_resource and counted.object_writes.get(operation_id):
        found["s3"] = counted.object_writes[operation_id]
    return found


def _shown(counts: dict[str, int]) -> str:
    return ", ".join(f"{service} {number}" for service, number in sorted(counts.items())) or "nothing"


def rows(burst: dict[str, Any]) -> list[list[str]]:
    """The burst's requests, a row each, in the order they came (the report's table): id, how new, how it ended, and
    what it made."""
    return [
        [
            request["operation_id"],
            str(request["payload"].get(burst["newest_by"], "")),
            request["state"],
            request["reason"] or "ran",
            _shown(request["made"]),
        ]
        for request in burst["requests"]
    ]
