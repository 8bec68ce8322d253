"""The three idempotency policies, each a small unit: how the effect and its claim are ordered.

Every policy returns the terminal state to record and a reason, or raises. The pipeline writes
that terminal state as a conditional transition of the operation; for `effect_then_claim` that
write *is* the claim, so the happy path costs one lease and one claim, nothing more.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from converge.errors import LeaseHeld, OutcomeUnknown, PermanentError, TransientError
from converge.markers import MarkerStore
from converge.operations import OperationState
from converge.registry import Policy
from converge.runner import Confirmation, JobContext


@dataclass(frozen=True)
class Attempt:
    """Everything a policy needs for one execution."""

    markers: MarkerStore
    runner: Any
    message: Any
    loaded: Any
    ctx: JobContext
    owner: str
    lease_seconds: float

    @property
    def handler(self) -> str:
        return self.ctx.job_type


@dataclass(frozen=True)
class Decision:
    state: OperationState
    reason: str


def effect_then_claim(attempt: Attempt) -> Decision:
    """Duplicates over loss: lease, effect, then the claim (the caller's terminal write).

    The lease keeps a concurrent delivery from sending too; a crash between the effect and the
    claim costs at worst one duplicate when the lease expires, never a loss. A failed effect
    releases the lease and never claims, so the retry really runs the effect again.
    """
    lease = attempt.markers.lease(attempt.handler, attempt.ctx.operation_id, attempt.owner, attempt.lease_seconds)
    if not lease.acquired:
        raise LeaseHeld(_held_reason(lease.holder), _until(lease.holder))
    try:
        attempt.runner.run(attempt.message, attempt.loaded, attempt.ctx)
    except BaseException:
        attempt.markers.release(attempt.handler, attempt.ctx.operation_id, attempt.owner)
        raise
    return Decision(OperationState.SUCCEEDED, "effect applied, then claimed")


def keyed_effect(attempt: Attempt) -> Decision:
    """The effect is idempotent by key (content-addressed objects): a re-run overwrites the same thing.

    The lease only keeps two workers from doing the same work at once.
    """
    lease = attempt.markers.lease(attempt.handler, attempt.ctx.operation_id, attempt.owner, attempt.lease_seconds)
    if not lease.acquired:
        raise LeaseHeld(_held_reason(lease.holder), _until(lease.holder))
    try:
        attempt.runner.run(attempt.message, attempt.loaded, attempt.ctx)
    except BaseException:
        attempt.markers.release(attempt.handler, attempt.ctx.operation_id, attempt.owner)
        raise
    return Decision(OperationState.SUCCEEDED, "keyed effect written")


def claim_then_effect(attempt: Attempt) -> Decision:
    """Money: claim first, then call the provider with the operation id as its idempotency key.

    A claim taken over from an expired holder, or an ambiguous provider answer, is settled by asking
    the provider by the original identity before any resubmission; if it cannot tell, the
    operation becomes UNKNOWN and waits for an operator.
    """
    handler, key = attempt.handler, attempt.ctx.operation_id
    claim = attempt.markers.claim(handler, key, attempt.owner, lease_seconds=attempt.lease_seconds)
    if not claim.claimed:
        raise LeaseHeld(_held_reason(claim.holder), _until(claim.holder))
    if claim.previous is not None:
        # A previous holder died after claiming: it may or may not have reached the provider.
        settled = _settle(attempt, "claim taken over from an expired holder")
        if settled is not None:
            return settled
    try:
        attempt.runner.run(attempt.message, attempt.loaded, attempt.ctx)
    except TransientError:
        # The provider refused before acting (throttled, unavailable): safe to try again.
        attempt.markers.release(handler, key, attempt.owner)
        raise
    except PermanentError:
        raise
    except Exception as exc:
        settled = _settle(attempt, f"ambiguous outcome ({exc.__class__.__name__})")
        if settled is not None:
            return settled
        attempt.markers.release(handler, key, attempt.owner)
        raise TransientError("the provider confirms the effect was not applied; retrying") from exc
    return Decision(OperationState.SUCCEEDED, "claimed, then effect applied")


def _settle(attempt: Attempt, why: str) -> Decision | None:
    """Ask the provider by identity. None means "not applied": go ahead with the effect."""
    try:
        answer = attempt.runner.confirm(attempt.message, attempt.ctx)
    except Exception as exc:
        raise OutcomeUnknown(f"{why}; asking the provider failed: {exc}") from exc
    if answer is Confirmation.APPLIED:
        return Decision(OperationState.SUCCEEDED, f"{why}; the provider confirms it was applied")
    if answer is Confirmation.UNKNOWABLE:
        raise OutcomeUnknown(f"{why}; the provider can neither deduplicate nor be queried")
    return None


def _until(holder: Any) -> float | None:
    return None if holder is None else float(holder.lease_until)


def _held_reason(holder: Any) -> str:
    if holder is None:
        return "the work is held by another delivery"
    return f"{holder.status.value.lower()} by another delivery until {holder.lease_until:.0f}"


POLICIES = {
    Policy.EFFECT_THEN_CLAIM: effect_then_claim,
    Policy.CLAIM_THEN_EFFECT: claim_then_effect,
    Policy.KEYED_EFFECT: keyed_effect,
}
