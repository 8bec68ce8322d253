"""Recurring jobs: a schedule ticks, the kill switch decides, the runner does one bounded pass."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from converge.flow.registry import Policy, Registry
from converge.flow.runner import TickContext
from converge.flow.toggles import Toggles
from converge.model.clock import Clock, SystemClock
from converge.model.errors import InvalidMessage
from converge.observability import count, logger


def run_tick(
    registry: Registry,
    toggles: Toggles,
    event: dict[str, Any],
    remaining_ms: Callable[[], int],
    clock: Clock | None = None,
    margin_ms: int = 5_000,
) -> dict[str, Any]:
    job_type = event.get("job_type")
    if not isinstance(job_type, str):
        raise InvalidMessage("a recurring tick needs {'job_type': '<area>.<name>.v<N>'} as its input")
    binding = registry.get(job_type)
    if binding.policy is not Policy.RECURRING:
        raise InvalidMessage(f"{job_type} is not a recurring job")
    toggles.begin_batch()
    key, default = binding.toggle_key, binding.default_enabled
    # As in the pipeline: a cached "off" is confirmed by one fresh read before the tick is skipped.
    if not toggles.is_enabled(key, default) and not toggles.state(key, default, fresh=True).enabled:
        logger.info("recurring job disabled; tick skipped", job_type=job_type)
        count("tick_skipped", job_type)
        return {"job_type": job_type, "skipped": True, "reason": "kill switch is off"}
    ctx = TickContext(
        job_type=job_type, clock=clock or SystemClock(), remaining_ms=remaining_ms, time_margin_ms=margin_ms
    )
    result = registry.runner(job_type).tick(ctx)
    count("tick", job_type)
    logger.info("recurring tick done", job_type=job_type, **result)
    return {"job_type": job_type, "skipped": False, **result}
