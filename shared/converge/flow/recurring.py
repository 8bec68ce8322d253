"""Recurring jobs: a schedule ticks, the kill switch decides, the runner does one bounded pass."""

from __future__ import annotations

from typing import Any

from converge.flow.registry import Policy, Registry
from converge.flow.runner import TickContext, remaining_time
from converge.flow.toggles import Toggles
from converge.model.clock import Clock, SystemClock
from converge.model.errors import InvalidMessage
from converge.observability import count, logger


class Recurring:
    """The recurring function: each schedule passes {"job_type": ...}; a disabled job's tick is a logged skip."""

    def __init__(
        self, registry: Registry, toggles: Toggles, clock: Clock | None = None, margin_ms: int = 5_000
    ) -> None:
        self._registry = registry
        self._toggles = toggles
        self._clock = clock or SystemClock()
        self._margin_ms = margin_ms

    def handle(self, event: dict[str, Any], context: Any = None) -> dict[str, Any]:
        """One tick of the job the event names, within the invocation's time (`context`: the Lambda context)."""
        job_type = event.get("job_type")
        if not isinstance(job_type, str):
            raise InvalidMessage("a recurring tick needs {'job_type': '<area>.<name>.v<N>'} as its input")
        binding = self._registry.get(job_type)
        if binding.policy is not Policy.RECURRING:
            raise InvalidMessage(f"{job_type} is not a recurring job")
        toggles = self._toggles
        toggles.begin_batch()
        key, default = binding.toggle_key, binding.default_enabled
        # As in the pipeline: a cached "off" is confirmed by one fresh read before the tick is skipped.
        if not toggles.is_enabled(key, default) and not toggles.state(key, default, fresh=True).enabled:
            logger.info("recurring job disabled; tick skipped", job_type=job_type)
            count("tick_skipped", job_type)
            return {"job_type": job_type, "skipped": True, "reason": "kill switch is off"}
        ctx = TickContext(
            job_type=job_type, clock=self._clock, remaining_ms=remaining_time(context), time_margin_ms=self._margin_ms
        )
        result = self._registry.runner(job_type).tick(ctx)
        count("tick", job_type)
        logger.info("recurring tick done", job_type=job_type, **result)
        return {"job_type": job_type, "skipped": False, **result}
