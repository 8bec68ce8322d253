"""The resumer: PAUSED operations of enabled jobs go back to ACCEPTED and through the stream again.

Triggered by EventBridge "Parameter Store Change" events under the toggle prefix (so flipping a
toggle with any client resumes the work) and by a schedule, as a safety net for missed events.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from converge.clock import IdSource, RandomIds
from converge.observability import count, logger
from converge.operations import OperationState, OperationStore
from converge.registry import JobBinding, Policy, Registry
from converge.toggles import Toggles


class Resumer:
    def __init__(
        self,
        registry: Registry,
        operations: OperationStore,
        toggles: Toggles,
        toggle_prefix: str,
        ids: IdSource | None = None,
    ) -> None:
        self._registry = registry
        self._operations = operations
        self._toggles = toggles
        self._prefix = toggle_prefix.rstrip("/") + "/"
        self._ids = ids or RandomIds()

    def handle(self, event: dict[str, Any], remaining_ms: Callable[[], int], margin_ms: int = 5_000) -> dict[str, Any]:
        """Resume what the event concerns (one job's toggle, or every job on a schedule)."""
        bindings = self._bindings_for(event)
        self._toggles.forget()  # a change event means the cached value is stale
        summary: dict[str, Any] = {"resumed": 0, "still_disabled": [], "jobs": {}}
        for binding in bindings:
            if not self._toggles.is_enabled(binding.toggle_key, binding.default_enabled):
                summary["still_disabled"].append(binding.job_type)
                continue
            resumed = 0
            for row in self._operations.iter_attention(OperationState.PAUSED, binding.job_type):
                if remaining_ms() < margin_ms:
                    logger.warning("out of time; the schedule will resume the rest")
                    summary["incomplete"] = True
                    break
                if self._resume(row["operation_id"]):
                    resumed += 1
            summary["jobs"][binding.job_type] = resumed
            summary["resumed"] += resumed
            if resumed:
                count("resumed", binding.job_type, resumed)
        logger.info("resumer finished", **summary)
        return summary

    def _resume(self, operation_id: str) -> bool:
        operation = self._operations.get(operation_id)
        if operation is None or operation.state is not OperationState.PAUSED:
            return False
        done = self._operations.request_redispatch(operation, "resumed: kill switch is on", token=self._ids.new_id())
        return done is not None

    def _bindings_for(self, event: dict[str, Any]) -> list[JobBinding]:
        candidates = [binding for binding in self._registry if binding.policy is not Policy.RECURRING]
        if event.get("detail-type") != "Parameter Store Change":
            return candidates
        name = str(event.get("detail", {}).get("name", ""))
        if not name.startswith(self._prefix):
            return []
        key = name[len(self._prefix) :]
        return [binding for binding in candidates if binding.toggle_key == key]
