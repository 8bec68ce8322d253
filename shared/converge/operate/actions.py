"""Operator actions: resolve, retry, redrive and kill switches, the one code every operator tool calls.

The CLI and the web console act through `Operator` (the runtime builds one: `converge.operator(actor)`),
and its redrive is the same `Redrive` the redrive function runs, so an action means the same wherever it
is taken. Each action reads the operation, asks the transition table, and writes
conditionally on the state it read; an action that does not apply (the operation is in another
state, or changed meanwhile) is an answer, `applied=False` with the reason, never an exception.
Only an unknown id (OperationNotFound) or bad arguments (InvalidAction) raise.

Every applied action appends a history entry to the operation's receipt that names who acted and
why ("resolved as succeeded by cli:alice: checked the ledger"), so the receipt says what happened
without the tool's own logs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from converge.flow.dispatch import Dispatcher, Outgoing
from converge.flow.names import find_binding
from converge.flow.registry import Registry
from converge.flow.settlement import Settlement
from converge.flow.toggles import Toggles, ToggleSource
from converge.model.errors import InvalidAction, InvalidMessage, NotRunnable, SendFailed, UnknownJobType
from converge.model.records import Operation, Refused, StepRecord, StepState, clip
from converge.model.settling import Settling
from converge.model.states import FINAL_STATES, OperationState, StuckKind
from converge.operate import cancel
from converge.operate.deadletters import DlqUrls
from converge.operate.redrive import Redrive
from converge.operate.redrive_decision import RedriveRequest, RedriveSummary
from converge.operate.results import ActionResult
from converge.store.operations import OperationStore
from converge.store.transact import TransactItem

PAUSED_COUNTED_AT_MOST = 1000
"""Turning a job on counts its PAUSED operations with one query of at most this many."""

SSM_DESCRIPTION_LIMIT = 1024


class Resolution(StrEnum):
    """An operator's decision on an UNKNOWN operation."""

    SUCCEEDED = "succeeded"  # established with the provider: the effect happened
    FAILED = "failed"  # established: it did not happen, and should not be tried again
    RETRY = "retry"  # established: it did not happen; run it again with the same identity


@dataclass(frozen=True)
class ToggleChange:
    """A kill switch set: what it was, what it is, and the paused work its turning on resumes."""

    job_type: str
    toggle: str
    parameter: str
    value: str
    changed: bool
    before: Mapping[str, Any]
    paused_to_resume: int
    message: str

    def to_json(self) -> dict[str, Any]:
        return {
            "job_type": self.job_type,
            "toggle": self.toggle,
            "parameter": self.parameter,
            "value": self.value,
            "changed": self.changed,
            "before": dict(self.before),
            "paused_to_resume": self.paused_to_resume,
            "paused_counted_at_most": PAUSED_COUNTED_AT_MOST,
            "message": self.message,
        }


class Operator:
    """The operator's actions on one deployment, taken in the name of `actor` ("cli:alice")."""

    def __init__(
        self,
        actor: str,
        operations: OperationStore,
        dispatcher: Dispatcher,
        schedules: cancel.Schedules,
        registry: Registry,
        toggles: Toggles,
        dlq_urls: DlqUrls,
        redriver: Callable[[str], Redrive],
        *,
        settlement: Settlement,
    ) -> None:
        """The runtime builds one (`Converge.operator`): `schedules` forgets a cancelled operation's schedule,
        `redriver` builds the DLQ adapter whose reopened operations name this actor, `settlement` writes a resolve
        or a cancel with its extensions' items (the continuation that follows, a batch's count)."""
        if not actor.strip():
            raise InvalidAction("an operator action needs an actor (who acts), such as 'cli:alice'")
        self.actor = clip(actor.strip())
        self._operations = operations
        self._dispatcher = dispatcher
        self._schedules = schedules
        self._registry = registry
        self._toggles = toggles
        self.dlq_urls = dlq_urls
        self._redriver = redriver
        self._settlement = settlement

    # -- one operation -----------------------------------------------------------------------------------------

    def resolve(self, operation_id: str, outcome: Resolution | str, reason: str) -> ActionResult:
        """Record what the operator established about an UNKNOWN operation (and for retry, send it again).

        `retry` is for an effect established NOT to have happened. The lease was given back when the
        operation became UNKNOWN, so the next attempt is a fresh claim, not a takeover that would ask
        the provider again (which is what made it UNKNOWN); the same identity means the provider's
        idempotency key is unchanged. Until a worker takes it, it is listed under STUCK.
        """
        decided = _outcome(outcome)
        why = _reason(reason)
        operations = self._operations
        operation = operations.with_steps(operations.require(operation_id))
        action = "resolve"
        before = operation.state
        if before is not OperationState.UNKNOWN:
            return self._refused(action, operation, _not_in(before, OperationState.UNKNOWN))
        unknown_job = self._not_in_catalogue(operation, "writes what follows its outcome (a continuation) or sends it")
        if unknown_job is not None:
            return self._refused(action, operation, unknown_job)
        step = operation.pending_step
        if step is not None:
            return self._resolve_step(operation, step, decided, why)
        note = f"resolved as {decided.value} by {self.actor}: {why}"
        if decided is Resolution.SUCCEEDED:
            moved = self._settle(operation, OperationState.SUCCEEDED, note)
        elif decided is Resolution.FAILED:
            moved = self._settle(operation, OperationState.FAILED, note, error=note)
        else:
            return self._send_again(action, operation, note, "resolved as retry: sent again with the same identity")
        return self._after(action, operation, moved, f"resolved as {decided.value}")

    def _resolve_step(self, operation: Operation, step: StepRecord, decided: Resolution, why: str) -> ActionResult:
        """An UNKNOWN operation of steps is unknown about one step: the resolve settles that step. Succeeded:
        the step is recorded done and the operation carries on after it; retry: the step's claim goes and it
        runs again with the same key; failed: the step and the operation are FAILED, nothing more runs."""
        markers = self._operations.markers
        assert markers is not None  # the step was read from them
        action = "resolve"
        note = f"step {step.name!r} resolved as {decided.value} by {self.actor}: {why}"
        if decided is Resolution.FAILED:
            if not markers.settle_step(operation.operation_id, step, StepState.FAILED, note):
                return self._refused(action, operation, f"step {step.name!r} changed meanwhile; show it and try again")
            moved = self._settle(operation, OperationState.FAILED, note, error=note)
            return self._after(action, operation, moved, f"step {step.name!r} resolved as failed")
        # Both send the operation again: what would be sent is built first, so a refusal (its request deleted or
        # changed) leaves the step's marker as it was. An action that is refused changes nothing.
        outgoing = self._outgoing(operation)
        if isinstance(outgoing, str):
            return self._refused(action, operation, outgoing)
        if decided is Resolution.SUCCEEDED:
            changed = markers.settle_step(operation.operation_id, step, StepState.DONE, note)
            done = f"step {step.name!r} resolved as succeeded: sent again to carry on after it"
        else:
            changed = markers.forget_step(operation.operation_id, step)
            done = f"step {step.name!r} resolved as retry: sent again to run it with the same key"
        if not changed:
            return self._refused(action, operation, f"step {step.name!r} changed meanwhile; show it and try again")
        return self._send_again(action, operation, note, done, outgoing)

    def _settle(self, operation: Operation, to: OperationState, note: str, error: str | None = None) -> bool:
        """Settle as the operator established, through the settlement: with the continuation that follows that
        outcome in the same transaction (exactly once: one an earlier settle wrote is kept, and the receipt says so)
        (a batch's child is counted again from the state table's stream). False when it changed since it was read."""
        settling = Settling(operation.operation_id, operation.job_type, to, operation.payload, operation.correlation_id)

        def write(noted: str, items: Sequence[TransactItem]) -> None:
            self._operations.state.transition_with(operation, to, noted, items, error=error)

        try:
            self._settlement.settle(settling, note, write)
        except Refused:
            return False
        return True

    def retry(self, operation_id: str, reason: str) -> ActionResult:
        """Run a FAILED operation again: reopened and re-dispatched with the same identity.

        Its stored request is sent (the same operation id, so the provider's idempotency key is
        unchanged); a copy of its message still in a DLQ is deleted by the next redrive once the
        operation settles, or absorbed by the lease if it arrives first.
        """
        why = _reason(reason)
        operation = self._operations.require(operation_id)
        if operation.state is not OperationState.FAILED:
            return self._refused("retry", operation, _not_in(operation.state, OperationState.FAILED))
        unknown_job = self._not_in_catalogue(operation, "sends it to its job's queue")
        if unknown_job is not None:
            return self._refused("retry", operation, unknown_job)
        note = f"retried by {self.actor}: {why}"
        return self._send_again("retry", operation, note, "retried: sent again with the same identity")

    def cancel(self, operation_id: str, reason: str) -> ActionResult:
        """Cancel an operation that has not started (ACCEPTED, SCHEDULED, PAUSED): CANCELLED, final.

        One that is running or settled is left alone and reported as too late; copies of it still in a
        queue, a schedule or a DLQ are no-ops when they arrive."""
        why = _reason(reason)
        done = cancel.cancel(
            self._operations, self._schedules, operation_id, why, self.actor, settlement=self._settlement
        )
        stored = self._operations.require(operation_id)
        return ActionResult("cancel", done.operation_id, done.before, done.after, done.applied, done.message, stored)

    def _outgoing(self, operation: Operation) -> Outgoing | str:
        """What sending the operation again would send (its stored request, routed to its job's queue), or why it
        cannot be sent: built before an action writes anything, so that an action refused changes nothing."""
        try:
            return self._dispatcher.outgoing(self._dispatcher.envelope_for(operation))
        except (NotRunnable, UnknownJobType, InvalidMessage) as exc:
            return str(exc)

    def _not_in_catalogue(self, operation: Operation, needs: str) -> str | None:
        """Why an action that needs the operation's binding is refused when the catalogue loaded here lacks it (an
        operator's tool started away from the project), or None."""
        if operation.job_type in self._registry:
            return None
        return (
            f"{operation.job_type} is not in the job catalogue loaded here: this action {needs}, which its binding "
            "decides; run it where the project's catalogue is loaded (nothing changed)"
        )

    def _send_again(
        self, action: str, operation: Operation, note: str, done: str, outgoing: Outgoing | None = None
    ) -> ActionResult:
        """Reopen (ACCEPTED, listed under STUCK until a worker takes it), then send its stored request (`outgoing`:
        built by the caller already, before its own writes)."""
        dispatcher = self._dispatcher
        if outgoing is None:
            built = self._outgoing(operation)  # before reopening: nothing to send, nothing changed
            if isinstance(built, str):
                return self._refused(action, operation, built)
            outgoing = built
        moved = self._operations.state.transition(
            operation,
            OperationState.ACCEPTED,
            note,
            stuck=(StuckKind.REOPENED, f"re-dispatched by {self.actor}; listed here until a worker takes it"),
            forget_lease=True,
        )
        if moved:
            # Reopened first: a worker meeting the message while the operation was still settled would drop it.
            try:
                dispatcher.send_one(outgoing)
            except SendFailed as exc:
                # Applied all the same: it is ACCEPTED and listed under STUCK, which the reconciler sends again.
                done = f"reopened, but not sent ({exc}); listed under STUCK, the reconciler sends it again"
        return self._after(action, operation, moved, done)

    def _after(self, action: str, operation: Operation, moved: bool, done: str) -> ActionResult:
        now = self._operations.require(operation.operation_id)
        if operation.steps is not None:
            now = self._operations.with_steps(now)
        message = done if moved else f"changed meanwhile: it is now {now.state.value}; show it and try again"
        return ActionResult(action, operation.operation_id, operation.state.value, now.state.value, moved, message, now)

    @staticmethod
    def _refused(action: str, operation: Operation, message: str) -> ActionResult:
        state = operation.state.value
        return ActionResult(action, operation.operation_id, state, state, False, message, operation)

    # -- dead letters --------------------------------------------------------------------------------------------

    def redrive(
        self,
        queue: str = "all",
        job_type: str | None = None,
        dry_run: bool = True,
        limit: int | None = None,
        progress: Callable[[dict[str, Any]], None] | None = None,
        **filters: Any,
    ) -> RedriveSummary:
        """Move dead letters back to their queue (a dry run unless told otherwise); the redrive report.

        `filters` are the other fields of RedriveRequest (error_classes, operation_ids, ages, rate).
        """
        fields: dict[str, Any] = {"queue": queue, "dry_run": dry_run, **filters}
        if job_type is not None:
            fields["job_types"] = [job_type]
        if limit is not None:
            fields["max_messages"] = limit
        return self.run_redrive(RedriveRequest.model_validate(fields), progress=progress)

    def run_redrive(
        self,
        request: RedriveRequest,
        remaining_ms: Callable[[], int] | None = None,
        progress: Callable[[dict[str, Any]], None] | None = None,
    ) -> RedriveSummary:
        """A redrive as the redrive function's event describes it; reopened operations name the actor."""
        return self.redriver().run(request, remaining_ms, progress)

    def redriver(self) -> Redrive:
        """The DLQ adapter wired to this deployment (also what reads DLQ counts and messages)."""
        return self._redriver(self.actor)

    # -- kill switches -------------------------------------------------------------------------------------------

    def set_toggle(self, name: str, on: bool, reason: str = "") -> ToggleChange:
        """Turn a job on or off (its SSM parameter), and count the PAUSED work turning it on resumes.

        The parameter's description records who set it and why. Nothing is written when the
        parameter already says so. The resumer re-dispatches paused work on the parameter's change
        event (and on its schedule), so the count is what it now picks up.
        """
        binding = find_binding(self._registry, name)
        toggles = self._toggles
        parameter = toggles.parameter_name(binding.toggle_key)
        value = "on" if on else "off"
        toggles.begin_batch()  # a fresh read even when this object read the parameter before
        before = toggles.state(binding.toggle_key, binding.default_enabled, fresh=True)
        changed = not (before.source is ToggleSource.PARAMETER and before.enabled == on)
        if changed:
            why = f"{value} by {self.actor}" + (f": {reason.strip()}" if reason.strip() else "")
            toggles.set(binding.toggle_key, value, why[:SSM_DESCRIPTION_LIMIT])
        paused = self._paused(binding.job_type) if on else 0
        was = f"{'on' if before.enabled else 'off'} ({before.source.value})"
        message = f"{was} -> {value}" if changed else f"already {value}; nothing written"
        return ToggleChange(
            binding.job_type,
            binding.toggle_key,
            parameter,
            value,
            changed,
            {"enabled": before.enabled, "source": before.source.value, "value": before.raw},
            paused,
            message,
        )

    def _paused(self, job_type: str) -> int:
        page = self._operations.listings.list_attention(OperationState.PAUSED, job_type, PAUSED_COUNTED_AT_MOST)
        return len(page.operations)


def _outcome(outcome: Resolution | str) -> Resolution:
    try:
        return Resolution(str(outcome).lower())
    except ValueError:
        choices = ", ".join(member.value for member in Resolution)
        raise InvalidAction(f"an UNKNOWN operation is resolved as one of {choices}, not {outcome!r}") from None


def _reason(reason: str) -> str:
    if not reason or not reason.strip():
        raise InvalidAction("a reason must say what you established; it is recorded in the operation's history")
    return reason.strip()


def _not_in(state: OperationState, wanted: OperationState) -> str:
    """Why an action for `wanted` operations does not apply to one in `state` (one line)."""
    if state is OperationState.UNKNOWN:
        return f"it is UNKNOWN, not {wanted.value}: resolve it (as retry if the effect did not happen)"
    if state is OperationState.REJECTED:
        return f"it is REJECTED, not {wanted.value}: its input is refused, so it would fail again"
    if state is OperationState.FAILED:
        return f"it is FAILED, not {wanted.value}: retry it to run it again"
    if state in FINAL_STATES:
        return f"too late: it is {state.value}, not {wanted.value}"
    return f"not now: it is {state.value}, not {wanted.value} (it has not settled)"
