"""The three idempotency policies, each a small unit: how the effect and its claim are ordered.

By the time a policy runs, the pipeline holds the operation's lease: one conditional write took it
IN_PROGRESS (refused if it is settled or leased by a live holder). Every policy returns the
terminal state to record and a reason, or raises; the pipeline then makes its one terminal write,
conditional on still holding the lease. For effect_then_claim that write *is* the claim, and for
claim_then_effect the lease is the claim, so the happy path is two writes and no read. A failure
gives the lease back (the pipeline's retry write), so a lease still held later means its holder
died, possibly after the effect: that is what `Lease.takeover` tells claim_then_effect.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from converge.flow.registry import Policy
from converge.flow.runner import Confirmation, JobContext
from converge.model.errors import OutcomeUnknown, PermanentError, TransientError
from converge.model.records import Lease
from converge.model.states import OperationState


@dataclass(frozen=True)
class Attempt:
    """Everything a policy needs for one execution."""

    runner: Any
    message: Any
    loaded: Any
    ctx: JobContext
    lease: Lease


@dataclass(frozen=True)
class Decision:
    state: OperationState
    reason: str


def effect_then_claim(attempt: Attempt) -> Decision:
    """Duplicates over loss: lease, effect, then the claim (the caller's terminal write).

    The lease keeps a concurrent delivery from sending too; a crash between the effect and the
    claim costs at worst one duplicate when the lease expires, never a loss. A failed effect
    never claims, so the retry really runs the effect again.
    """
    attempt.runner.run(attempt.message, attempt.loaded, attempt.ctx)
    return Decision(OperationState.SUCCEEDED, "effect applied, then claimed")


def keyed_effect(attempt: Attempt) -> Decision:
    """The effect is idempotent by key (content-addressed objects): a re-run overwrites the same thing.

    The lease only keeps two workers from doing the same work at once.
    """
    attempt.runner.run(attempt.message, attempt.loaded, attempt.ctx)
    return Decision(OperationState.SUCCEEDED, "keyed effect written")


def claim_then_effect(attempt: Attempt) -> Decision:
    """Money: the lease is the claim, then the provider is called with the operation id as its idempotency key.

    A claim taken over from an expired holder, or an ambiguous provider answer, is settled by asking
    the provider by the original identity before any resubmission; if it cannot tell, the
    operation becomes UNKNOWN and waits for an operator.
    """
    if attempt.lease.takeover:
        # A previous holder died holding the claim: it may or may not have reached the provider.
        settled = _settle(attempt, "claim taken over from an expired holder")
        if settled is not None:
            return settled
    try:
        attempt.runner.run(attempt.message, attempt.loaded, attempt.ctx)
    except (TransientError, PermanentError):
        # Transient: the provider refused before acting, safe to try again. Permanent: it failed for good.
        raise
    except Exception as exc:
        settled = _settle(attempt, f"ambiguous outcome ({exc.__class__.__name__})")
        if settled is not None:
            return settled
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


POLICIES = {
    Policy.EFFECT_THEN_CLAIM: effect_then_claim,
    Policy.CLAIM_THEN_EFFECT: claim_then_effect,
    Policy.KEYED_EFFECT: keyed_effect,
}
