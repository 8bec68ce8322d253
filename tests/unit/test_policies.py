"""Each idempotency policy on its own: the order of lease, effect and claim, over a real state record."""

from __future__ import annotations

import boto3
import pytest

from converge.flow.policies import Attempt, claim_then_effect, effect_then_claim, keyed_effect
from converge.flow.runner import Confirmation, JobContext
from converge.model.clock import FakeClock
from converge.model.errors import OutcomeUnknown, PermanentError, TransientError
from converge.model.records import Subject
from converge.model.request import fingerprint
from converge.model.states import OperationState
from converge.store.operations import OperationStore

PAYLOAD = {"user_id": "00000000-0000-4000-8000-000000000001"}
SUBJECT = Subject("op-1", "mail.notice.v1", fingerprint("mail.notice.v1", PAYLOAD))


class Steps:
    """A runner that records what it did, and the operation's state record at the moment of the effect."""

    def __init__(self, store, fail=None, confirm=Confirmation.NOT_APPLIED):
        self.store = store
        self.fail = fail
        self.answer = confirm
        self.log: list[str] = []

    def run(self, message, loaded, ctx):
        record = self.store.state.record(ctx.operation_id)
        self.log.append(f"effect(state={record.state.value}, leased={record.lease_owner is not None})")
        if self.fail:
            raise self.fail

    def confirm(self, message, ctx):
        self.log.append("confirm")
        return self.answer


@pytest.fixture
def clock():
    return FakeClock()


@pytest.fixture
def store(tables, clock):
    return OperationStore(tables["jobs"], tables["state"], boto3.client("dynamodb"), clock=clock)


def attempt(store, runner, owner="w1"):
    lease = store.state.acquire(SUBJECT, owner, 32)
    ctx = JobContext("op-1", "mail.notice.v1", None, 1, 3, FakeClock(), lambda: 30_000)
    return Attempt(runner, message=None, loaded=True, ctx=ctx, lease=lease)


def test_effect_then_claim_runs_under_the_lease_and_leaves_the_claim_to_the_terminal_write(store):
    # Given a lease taken / When the policy runs
    runner = Steps(store)
    decision = effect_then_claim(attempt(store, runner))
    # Then the effect ran while the operation was IN_PROGRESS under the lease, and nothing is claimed yet
    assert runner.log == ["effect(state=IN_PROGRESS, leased=True)"]
    assert decision.state is OperationState.SUCCEEDED
    assert store.state.record("op-1").state is OperationState.IN_PROGRESS


def test_a_failed_effect_propagates_and_claims_nothing(store):
    runner = Steps(store, fail=TransientError("down"))
    with pytest.raises(TransientError):
        effect_then_claim(attempt(store, runner))
    assert store.state.record("op-1").state is OperationState.IN_PROGRESS


def test_keyed_effect_runs_under_a_lease(store):
    runner = Steps(store)
    assert keyed_effect(attempt(store, runner)).state is OperationState.SUCCEEDED
    assert runner.log == ["effect(state=IN_PROGRESS, leased=True)"]


def test_claim_then_effect_runs_the_effect_under_its_claim_without_asking_on_a_fresh_claim(store):
    runner = Steps(store)
    assert claim_then_effect(attempt(store, runner)).state is OperationState.SUCCEEDED
    assert runner.log == ["effect(state=IN_PROGRESS, leased=True)"]


def test_claim_then_effect_asks_the_provider_before_resubmitting_after_a_takeover(store, clock):
    # Given a claim whose holder died (it never gave its lease back, and the lease is over)
    store.state.acquire(SUBJECT, "dead-worker", 30)
    clock.advance(31)
    # When another delivery takes it over and the provider says the effect was applied
    runner = Steps(store, confirm=Confirmation.APPLIED)
    decision = claim_then_effect(attempt(store, runner, owner="w2"))
    # Then it is settled without a second call to the provider
    assert runner.log == ["confirm"]
    assert decision.state is OperationState.SUCCEEDED


def test_claim_then_effect_after_a_takeover_runs_once_when_the_provider_has_nothing(store, clock):
    store.state.acquire(SUBJECT, "dead-worker", 30)
    clock.advance(31)
    runner = Steps(store, confirm=Confirmation.NOT_APPLIED)
    assert claim_then_effect(attempt(store, runner, owner="w2")).state is OperationState.SUCCEEDED
    assert runner.log == ["confirm", "effect(state=IN_PROGRESS, leased=True)"]


def test_claim_then_effect_is_unknown_when_the_provider_cannot_tell(store):
    runner = Steps(store, fail=TimeoutError("read timed out"), confirm=Confirmation.UNKNOWABLE)
    with pytest.raises(OutcomeUnknown):
        claim_then_effect(attempt(store, runner))
    assert runner.log == ["effect(state=IN_PROGRESS, leased=True)", "confirm"]


def test_claim_then_effect_retries_when_the_provider_confirms_nothing_happened(store):
    runner = Steps(store, fail=TimeoutError("read timed out"), confirm=Confirmation.NOT_APPLIED)
    with pytest.raises(TransientError, match="not applied"):
        claim_then_effect(attempt(store, runner))
    assert runner.log == ["effect(state=IN_PROGRESS, leased=True)", "confirm"]


def test_claim_then_effect_does_not_ask_about_a_refusal_or_a_permanent_failure(store):
    for error in (TransientError("throttled before acting"), PermanentError("account closed")):
        runner = Steps(store, fail=error, confirm=Confirmation.APPLIED)
        taken = attempt(store, runner)
        with pytest.raises(type(error)):
            claim_then_effect(taken)
        assert "confirm" not in runner.log
        store.state.release(taken.lease, "handed back")  # as the pipeline does, so the next attempt is no takeover
