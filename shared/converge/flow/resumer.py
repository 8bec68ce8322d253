"""The resumer: PAUSED operations of enabled jobs are dispatched again, then recorded ACCEPTED.

Triggered by EventBridge "Parameter Store Change" events under the toggle prefix (so flipping a
toggle with any client resumes the work) and by a schedule, as a safety net for missed events.

The message is sent first and the move to ACCEPTED recorded after: a worker may start a PAUSED
operation directly, so a crash in between leaves a paused operation with its message on the way
(it runs) or a paused one without (it is still listed, and the next run resumes it); never an
ACCEPTED one that nothing will deliver. An operation whose stored request is gone or overwritten
with other content cannot be resumed safely: it is listed under STUCK with the reason.
"""

from __future__ import annotations

from typing import Any

from converge.flow.dispatch import Dispatcher
from converge.flow.registry import JobBinding, Policy, Registry
from converge.flow.runner import remaining_time
from converge.flow.toggles import Toggles
from converge.model.errors import NotRunnable, SendFailed
from converge.model.states import OperationState, StuckKind
from converge.observability import count, logger
from converge.store.operations import OperationStore


class Resumer:
    def __init__(
        self,
        registry: Registry,
        operations: OperationStore,
        toggles: Toggles,
        dispatcher: Dispatcher,
        toggle_prefix: str,
        margin_ms: int = 5_000,
    ) -> None:
        self._registry = registry
        self._operations = operations
        self._toggles = toggles
        self._dispatcher = dispatcher
        self._prefix = toggle_prefix.rstrip("/") + "/"
        self._margin_ms = margin_ms

    def handle(self, event: dict[str, Any], context: Any = None) -> dict[str, Any]:
        """Resume what the event concerns (one job's toggle, or every job on a schedule), within the invocation's
        time (`context`: the Lambda context; None: no deadline)."""
        remaining_ms = remaining_time(context)
        bindings = self._bindings_for(event)
        self._toggles.forget()  # a change event means the cached value is stale
        summary: dict[str, Any] = {"resumed": 0, "still_disabled": [], "jobs": {}, "stuck": 0, "send_failed": 0}
        if len(bindings) > 1 and self._nothing_paused():
            logger.info("resumer finished: nothing paused", **summary)
            return summary
        for binding in bindings:
            if not self._toggles.is_enabled(binding.toggle_key, binding.default_enabled):
                summary["still_disabled"].append(binding.job_type)
                continue
            resumed = 0
            for row in self._operations.listings.iter_attention(OperationState.PAUSED, binding.job_type):
                if remaining_ms() < self._margin_ms:
                    logger.warning("out of time; the schedule will resume the rest")
                    summary["incomplete"] = True
                    break
                outcome = self._resume(row["operation_id"])
                resumed += outcome == "resumed"
                summary["stuck"] += outcome == "stuck"
                summary["send_failed"] += outcome == "send_failed"
            summary["jobs"][binding.job_type] = resumed
            summary["resumed"] += resumed
            if resumed:
                count("resumed", binding.job_type, resumed)
        logger.info("resumer finished", **summary)
        return summary

    def _nothing_paused(self) -> bool:
        """Whether no operation of any job is PAUSED: one read of the index where a scheduled run would read every
        job's toggle and listing. One paused after this read is resumed by the next run (its schedule, or its
        toggle's change event), as one paused after its job's listing is."""
        return not self._operations.listings.list_attention(OperationState.PAUSED, limit=1).operations

    def _resume(self, operation_id: str) -> str:
        operation = self._operations.get(operation_id)
        if operation is None or operation.state is not OperationState.PAUSED:
            return "moved"
        try:
            self._dispatcher.send_one(self._dispatcher.outgoing(self._dispatcher.envelope_for(operation)))
        except NotRunnable as exc:
            self._operations.state.mark_stuck(operation.state_record, StuckKind.UNRUNNABLE, f"cannot resume: {exc}")
            logger.error("paused operation cannot be resumed", operation_id=operation_id, reason=str(exc))
            return "stuck"
        except SendFailed:
            logger.warning("could not send a resumed operation; the next run tries again", operation_id=operation_id)
            return "send_failed"
        self._operations.state.transition(operation, OperationState.ACCEPTED, "resumed: kill switch is on")
        return "resumed"

    def _bindings_for(self, event: dict[str, Any]) -> list[JobBinding]:
        candidates = [binding for binding in self._registry if binding.policy is not Policy.RECURRING]
        if event.get("detail-type") != "Parameter Store Change":
            return candidates
        name = str(event.get("detail", {}).get("name", ""))
        if not name.startswith(self._prefix):
            return []
        key = name[len(self._prefix) :]
        return [binding for binding in candidates if binding.toggle_key == key]
