"""Each idempotency policy on its own: the order of lease, effect and claim, over real marker items."""

from __future__ import annotations

import boto3
import pytest

from converge.clock import FakeClock
from converge.errors import LeaseHeld, OutcomeUnknown, TransientError
from converge.markers import MarkerStatus, MarkerStore
from converge.operations import OperationState
from converge.policies import Attempt, claim_then_effect, effect_then_claim, keyed_effect
from converge.runner import Confirmation, JobContext


class Steps:
    """A runner that records what it did and what the markers table held when it did it."""

    def __init__(self, store, fail=None, confirm=Confirmation.NOT_APPLIED):
        self.store = store
        self.fail = fail
        self.answer = confirm
        self.log: list[str] = []

    def run(self, message, loaded, ctx):
        marker = self.store.peek(ctx.job_type, ctx.operation_id)
        self.log.append(f"effect(marker={marker.status.value if marker else None})")
        if self.fail:
            raise self.fail

    def confirm(self, message, ctx):
        self.log.append("confirm")
        return self.answer


@pytest.fixture
def store(tables):
    return MarkerStore(tables["markers"], boto3.client("dynamodb"), FakeClock())


def attempt(store, runner, owner="w1"):
    ctx = JobContext("op-1", "mail.notice.v1", None, 1, 3, FakeClock(), lambda: 30_000)
    return Attempt(store, runner, message=None, loaded=True, ctx=ctx, owner=owner, lease_seconds=32)


def test_effect_then_claim_leases_then_runs_and_leaves_the_claim_to_the_terminal_write(store):
    runner = Steps(store)
    decision = effect_then_claim(attempt(store, runner))
    assert runner.log == ["effect(marker=LEASED)"]
    assert decision.state is OperationState.SUCCEEDED


def test_effect_then_claim_refuses_while_another_lease_is_live(store):
    store.lease("mail.notice.v1", "op-1", "other", 60)
    runner = Steps(store)
    with pytest.raises(LeaseHeld):
        effect_then_claim(attempt(store, runner))
    assert runner.log == []


def test_a_failed_effect_releases_the_lease_so_the_retry_runs_again(store):
    runner = Steps(store, fail=TransientError("down"))
    with pytest.raises(TransientError):
        effect_then_claim(attempt(store, runner))
    assert store.peek("mail.notice.v1", "op-1") is None


def test_keyed_effect_runs_under_a_lease(store):
    runner = Steps(store)
    assert keyed_effect(attempt(store, runner)).state is OperationState.SUCCEEDED
    assert runner.log == ["effect(marker=LEASED)"]


def test_claim_then_effect_claims_before_the_effect(store):
    runner = Steps(store)
    assert claim_then_effect(attempt(store, runner)).state is OperationState.SUCCEEDED
    assert runner.log == ["effect(marker=CLAIMED)"]
    assert store.peek("mail.notice.v1", "op-1").status is MarkerStatus.CLAIMED


def test_claim_then_effect_asks_the_provider_before_resubmitting_after_a_takeover(store):
    # Given a claim whose holder died (its lease is already over)
    store.claim("mail.notice.v1", "op-1", "dead-worker", lease_seconds=-1)
    # When the provider says the effect was applied / Then it is settled without a second call
    runner = Steps(store, confirm=Confirmation.APPLIED)
    decision = claim_then_effect(attempt(store, runner))
    assert runner.log == ["confirm"]
    assert decision.state is OperationState.SUCCEEDED


def test_claim_then_effect_is_unknown_when_the_provider_cannot_tell(store):
    runner = Steps(store, fail=TimeoutError("read timed out"), confirm=Confirmation.UNKNOWABLE)
    with pytest.raises(OutcomeUnknown):
        claim_then_effect(attempt(store, runner))
    assert runner.log == ["effect(marker=CLAIMED)", "confirm"]


def test_claim_then_effect_retries_when_the_provider_confirms_nothing_happened(store):
    runner = Steps(store, fail=TimeoutError("read timed out"), confirm=Confirmation.NOT_APPLIED)
    with pytest.raises(TransientError):
        claim_then_effect(attempt(store, runner))
    # The claim is released, so the retry claims afresh rather than taking over and asking again
    assert store.peek("mail.notice.v1", "op-1") is None
