"""The runner pipeline, in DESIGN's order, for every record: validate, kill switch, peek, load,
policy, classify. It decides; the worker turns each decision into one SQS action.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from converge.clock import Clock, IdSource, RandomIds, SystemClock
from converge.errors import InvalidMessage, UnknownJobType
from converge.markers import MarkerStore
from converge.message import Envelope, validate_payload
from converge.observability import count, logger
from converge.operations import FINAL_STATES, Operation, OperationState, OperationStore, fingerprint
from converge.outcomes import Outcome, Result, classify, describe
from converge.policies import POLICIES, Attempt
from converge.registry import Registry
from converge.runner import JobContext
from converge.toggles import Toggles

LEASE_GRACE_SECONDS = 2.0
"""A lease outlives its holder's remaining Lambda time by this much, so it cannot expire under a live holder."""


@dataclass(frozen=True)
class Delivery:
    """One receipt of a message: its attempt number and the Lambda's remaining time."""

    message_id: str
    attempt: int
    max_receive_count: int
    remaining_ms: Callable[[], int]


_FAILED_STATE = {Outcome.REJECTED: OperationState.REJECTED, Outcome.UNKNOWN: OperationState.UNKNOWN}


class Pipeline:
    def __init__(
        self,
        registry: Registry,
        operations: OperationStore,
        markers: MarkerStore,
        toggles: Toggles,
        clock: Clock | None = None,
        ids: IdSource | None = None,
        time_margin_ms: int = 5_000,
    ) -> None:
        self.registry = registry
        self.operations = operations
        self.markers = markers
        self.toggles = toggles
        self.clock = clock or SystemClock()
        self.ids = ids or RandomIds()
        self.time_margin_ms = time_margin_ms

    def process(self, body: str, delivery: Delivery) -> Result:
        """Run one delivery through the pipeline and say what happened to it."""
        if delivery.remaining_ms() < self.time_margin_ms:
            return Result(Outcome.REQUEUE, "too little time left to start")
        try:
            envelope = Envelope.from_body(body)
        except InvalidMessage as exc:
            return self._reject(None, exc)
        logger.append_keys(
            operation_id=envelope.operation_id,
            job_type=envelope.job_type,
            correlation_id=envelope.correlation_id,
            attempt=delivery.attempt,
        )
        try:
            return self._process(envelope, delivery)
        finally:
            logger.remove_keys(["operation_id", "job_type", "correlation_id", "attempt"])

    def _process(self, envelope: Envelope, delivery: Delivery) -> Result:
        try:
            binding = self.registry.get(envelope.job_type)
            message = validate_payload(binding.message, envelope.payload)
        except (UnknownJobType, InvalidMessage) as exc:
            return self._reject(envelope, exc)
        max_attempts = min(binding.max_attempts, delivery.max_receive_count)
        ctx = JobContext(
            operation_id=envelope.operation_id,
            job_type=envelope.job_type,
            correlation_id=envelope.correlation_id,
            attempt=delivery.attempt,
            max_attempts=max_attempts,
            clock=self.clock,
            remaining_ms=delivery.remaining_ms,
            time_margin_ms=self.time_margin_ms,
        )

        # The kill switch is the first line of work: a disabled job reads nothing and runs nothing.
        # A cached "off" is confirmed with one fresh read before pausing (pausing is rare), so a job
        # whose toggle was just turned on, and resumed, is not paused again by a stale cache.
        key, default = binding.toggle_key, binding.default_enabled
        if not self.toggles.is_enabled(key, default) and not self.toggles.state(key, default, fresh=True).enabled:
            return self._pause(envelope)

        # Peek before loading: an operation that is already settled costs one read and nothing else.
        try:
            operation = self.operations.get(envelope.operation_id)
        except Exception as exc:
            return self._unrecorded(exc, ctx, "could not read the operation")
        if operation is None:
            return self._reject(envelope, InvalidMessage("no such operation; jobs are admitted through the jobs table"))
        if operation.job_type != envelope.job_type or operation.content_fingerprint != _fingerprint(envelope):
            return self._reject(envelope, InvalidMessage("message content differs from its stored operation"), False)
        if operation.state in FINAL_STATES:
            count("duplicate_skipped", binding.job_type)
            logger.info("operation already settled; duplicate delivery skipped", state=operation.state.value)
            return Result(Outcome.DUPLICATE, f"already {operation.state.value}")

        runner = self.registry.runner(binding.job_type)
        try:
            loaded = runner.load(message, ctx)
            if loaded is None:
                return self._finish(
                    operation, OperationState.NOOP, "nothing to do (already done or no longer needed)", ctx
                )
            attempt = Attempt(
                markers=self.markers,
                runner=runner,
                message=message,
                loaded=loaded,
                ctx=ctx,
                owner=f"{delivery.message_id}:{self.ids.new_id()}",
                lease_seconds=delivery.remaining_ms() / 1000 + LEASE_GRACE_SECONDS,
            )
            decision = POLICIES[binding.policy](attempt)
        except Exception as exc:
            return self._failure(operation, exc, ctx)
        return self._finish(operation, decision.state, decision.reason, ctx)

    # -- recording outcomes ----------------------------------------------------------------------------------

    def _finish(self, operation: Operation, state: OperationState, reason: str, ctx: JobContext) -> Result:
        """Write the terminal state. The write is conditional: if another delivery settled it first,
        this one was a duplicate."""
        try:
            done = self._transition(operation, state, reason, attempts=ctx.attempt)
        except Exception as exc:
            # The work is done but not recorded: a retry finds the lease or the claim and settles it.
            return self._unrecorded(exc, ctx, f"could not record {state.value}")
        outcome = Outcome.SUCCEEDED if state is OperationState.SUCCEEDED else Outcome(state.value.lower())
        if done is None:
            count("duplicate_skipped", ctx.job_type)
            logger.warning("operation was settled by another delivery meanwhile", intended=state.value)
            return Result(Outcome.DUPLICATE, "settled by another delivery")
        count(outcome.value, ctx.job_type)
        logger.info("operation settled", state=state.value, reason=reason)
        return Result(outcome, reason)

    def _failure(self, operation: Operation, exc: Exception, ctx: JobContext) -> Result:
        outcome = classify(exc, ctx.final_attempt)
        reason = describe(exc)
        error_class = exc.__class__.__name__
        if outcome in (Outcome.REQUEUE, Outcome.BUSY):
            logger.info("handing the message back", outcome=outcome.value, reason=reason)
            until = getattr(exc, "until", None)
            retry_after = max(0.0, until - self.clock.now()) if until is not None else None
            return Result(outcome, reason, error_class, retry_after=retry_after)
        if outcome is Outcome.RETRY:
            logger.warning("transient failure; will retry", reason=reason)
            self._transition(
                operation,
                OperationState.IN_PROGRESS,
                f"attempt {ctx.attempt} failed; retrying",
                attempts=ctx.attempt,
                last_error=reason,
            )
            count("retried", ctx.job_type)
            return Result(outcome, reason, error_class)
        state = _FAILED_STATE.get(outcome, OperationState.FAILED)
        logger.error("operation did not succeed", outcome=outcome.value, reason=reason)
        self._transition(operation, state, reason, attempts=ctx.attempt, last_error=reason)
        count(state.value.lower(), ctx.job_type)
        return Result(outcome, reason, error_class)

    def _unrecorded(self, exc: Exception, ctx: JobContext, what: str) -> Result:
        """A failure talking to the jobs table itself: back to the queue with a backoff, nothing written."""
        outcome = classify(exc, final_attempt=False)
        if outcome not in (Outcome.RETRY, Outcome.REQUEUE, Outcome.BUSY):
            outcome = Outcome.RETRY
        reason = f"{what}: {describe(exc)}"
        logger.warning("jobs table unavailable; will retry", reason=reason)
        count("retried", ctx.job_type)
        return Result(outcome, reason, exc.__class__.__name__)

    def _reject(self, envelope: Envelope | None, exc: Exception, mark: bool = True) -> Result:
        """Invalid input: recorded on its operation when there is one, and sent to the DLQ with the reason."""
        reason = describe(exc)
        logger.error("message rejected", reason=reason)
        count("rejected", envelope.job_type if envelope and envelope.job_type in self.registry else None)
        if envelope is not None and mark:
            operation = self.operations.get(envelope.operation_id)
            if operation is not None and operation.state not in FINAL_STATES:
                self._transition(operation, OperationState.REJECTED, reason, last_error=reason)
        return Result(Outcome.REJECTED, reason, exc.__class__.__name__)

    def _pause(self, envelope: Envelope) -> Result:
        """A disabled one-off job: the operation waits as PAUSED and the message is acknowledged."""
        operation = self.operations.get(envelope.operation_id)
        if operation is None:
            return self._reject(envelope, InvalidMessage("no such operation; jobs are admitted through the jobs table"))
        if operation.state in FINAL_STATES:
            return Result(Outcome.DUPLICATE, f"already {operation.state.value}")
        if operation.state is not OperationState.PAUSED:
            self._transition(operation, OperationState.PAUSED, "kill switch is off")
        count("paused", envelope.job_type)
        logger.info("job disabled; operation paused until its toggle is turned on")
        return Result(Outcome.PAUSED, "kill switch is off")

    def _transition(self, operation: Operation, state: OperationState, reason: str, **changes: Any) -> Operation | None:
        """A conditional transition that re-reads once if the item moved under us (e.g. a resume)."""
        done = self.operations.transition(operation, state, reason, **changes)
        if done is not None:
            return done
        current = self.operations.get(operation.operation_id)
        if current is None or current.state in FINAL_STATES:
            return None
        return self.operations.transition(current, state, reason, **changes)


def _fingerprint(envelope: Envelope) -> str:
    return fingerprint(envelope.job_type, envelope.payload)
