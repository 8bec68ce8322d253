"""What the policies tell when they cannot go ahead: who holds the work, and why an outcome is UNKNOWN.

Through the pipeline, over moto: the reasons checked here are what a BUSY delivery logs and what an
UNKNOWN operation stores for the operator who has to settle it.
"""

from __future__ import annotations

import uuid
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from converge.flow.registry import JobBinding, Policy, Queue, Registry
from converge.flow.runner import Confirmation
from converge.model.clock import SequentialIds
from converge.model.outcomes import Outcome
from converge.model.states import OperationState
from converge.runtime import Converge
from converge.runtime.clients import Clients

from .conftest import Notice, body_of, deliver, set_toggle
from .sqs_deliveries import hold_lease


def enqueue(app, job_type="mail.notice.v1"):
    operation_id = f"op-{uuid.uuid4().hex[:8]}"
    app.enqueue(job_type, operation_id, {"user_id": str(uuid.uuid4())})
    return operation_id


@pytest.mark.parametrize(
    ("job_type", "left"),
    [
        ("mail.notice.v1", 60),  # effect_then_claim
        ("files.copy.v1", 60),  # keyed_effect
        ("money.credit.v1", 60),  # claim_then_effect: the lease is the claim
        ("mail.notice.v1", 0.4),  # a hold about to end: come back in under a second
    ],
)
def test_a_busy_delivery_says_who_holds_the_work_and_until_when(app, recorder, clock, job_type, left):
    # Given another delivery holding the operation's lease for a while longer
    set_toggle("money.credit", "on")
    operation_id = enqueue(app, job_type)
    hold_lease(app, operation_id, "another-delivery", left)
    # When this delivery arrives
    result = deliver(app, operation_id)
    # Then it is BUSY, comes back when that hold ends, and says so
    assert result.outcome is Outcome.BUSY
    assert result.retry_after == pytest.approx(left, abs=0.01)
    assert result.reason == f"leased by another delivery until {clock.now() + left:.0f}"
    assert recorder.effects == []


class HolderGoneBeforeItIsRead:
    """DynamoDB as seen by a delivery that loses a lease race to a holder who gives it back at once:
    the failed write does not return the winner's record, and by the time it is read the lease is back."""

    def __init__(self, real: Any, state_table: str, holder: Any) -> None:
        self._real = real
        self._table = state_table
        self._holder = holder  # gives its lease back when called

    def update_item(self, **kwargs: Any) -> Any:
        try:
            return self._real.update_item(**kwargs)
        except ClientError as exc:
            if kwargs["TableName"] != self._table:
                raise
            raise ClientError({"Error": exc.response["Error"]}, "UpdateItem") from None

    def get_item(self, **kwargs: Any) -> Any:
        if kwargs["TableName"] == self._table:
            self._holder()
        return self._real.get_item(**kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


def test_a_race_lost_to_a_holder_that_is_already_gone_is_retried_and_runs_nothing(app, settings, recorder, clock):
    # Given a lease held by another delivery that gives it back just after this one's write fails
    operation_id = enqueue(app)
    held = hold_lease(app, operation_id, "another-delivery", 60)
    body = body_of(app, operation_id)
    real = boto3.client("dynamodb")
    racing = Converge(
        settings,
        registry=app.registry,
        clients=Clients(
            dynamodb=HolderGoneBeforeItIsRead(
                real, settings.state_table, lambda: app.operations.state.release(held, "attempt 1 failed; retrying")
            ),
            sqs=boto3.client("sqs"),
            ssm=boto3.client("ssm"),
        ),
        clock=clock,
        ids=SequentialIds("racing"),
    )
    # When this delivery runs
    result = deliver(racing, operation_id, body=body)
    # Then it is neither busy nor settled but retried (the operation moved under it), and nothing ran
    assert (result.outcome, result.retry_after) == (Outcome.RETRY, None)
    assert result.reason == "the operation moved to IN_PROGRESS meanwhile"
    assert recorder.effects == []
    assert app.operations.require(operation_id).state_record.lease_owner is None


class Ledger:
    """A provider keyed by the operation id that remembers what it was asked for, and can be asked back."""

    def __init__(self) -> None:
        self.credited: dict[str, str] = {}  # operation id -> user credited
        self.lose_next_response = False
        self.lookup_fails = False

    def run(self, message: Notice, loaded: Any, ctx: Any) -> None:
        self.credited[ctx.operation_id] = str(message.user_id)
        if self.lose_next_response:
            self.lose_next_response = False
            raise TimeoutError("read timed out after the provider applied the credit")

    def load(self, message: Notice, ctx: Any) -> str:
        return "active"

    def confirm(self, message: Notice, ctx: Any) -> Confirmation:
        if self.lookup_fails:
            raise ConnectionError("ledger lookup unreachable")
        # The provider is asked about this very message: same operation, same user
        applied = self.credited.get(ctx.operation_id) == str(message.user_id)
        return Confirmation.APPLIED if applied else Confirmation.NOT_APPLIED


@pytest.fixture
def ledger(settings, clock):
    provider = Ledger()
    registry = Registry()
    registry.register(
        JobBinding(
            job_type="money.ledger.v1",
            message=Notice,
            runner=lambda: provider,
            queue=Queue.CRITICAL,
            policy=Policy.CLAIM_THEN_EFFECT,
            default_enabled=True,
            max_attempts=3,
        )
    )
    app = Converge(
        settings,
        registry=registry,
        clients=Clients(dynamodb=boto3.client("dynamodb"), sqs=boto3.client("sqs"), ssm=boto3.client("ssm")),
        clock=clock,
        ids=SequentialIds("ledger"),
    )
    return app, provider


def test_a_lost_response_is_settled_by_asking_the_provider_about_the_same_message(ledger):
    # Given a credit whose response is lost after the provider applied it
    app, provider = ledger
    operation_id = enqueue(app, "money.ledger.v1")
    provider.lose_next_response = True
    # When the delivery settles the ambiguity
    result = deliver(app, operation_id)
    # Then the provider, asked about this message, confirms it: SUCCEEDED, credited once
    assert result.outcome is Outcome.SUCCEEDED
    assert len(provider.credited) == 1
    stored = app.operations.require(operation_id)
    assert stored.history[-1].reason == "ambiguous outcome (TimeoutError); the provider confirms it was applied"


def test_an_unknown_outcome_records_why_for_the_operator_who_settles_it(ledger):
    # Given a lost response and a provider that cannot be asked
    app, provider = ledger
    operation_id = enqueue(app, "money.ledger.v1")
    provider.lose_next_response = True
    provider.lookup_fails = True
    # When the delivery tries to settle it
    result = deliver(app, operation_id)
    # Then the operation is UNKNOWN and its stored error says what was ambiguous and why it stayed so
    assert result.outcome is Outcome.UNKNOWN
    stored = app.operations.require(operation_id)
    assert stored.state is OperationState.UNKNOWN
    assert stored.last_error == (
        "OutcomeUnknown: ambiguous outcome (TimeoutError); asking the provider failed: ledger lookup unreachable"
    )


def test_an_unknowable_outcome_records_that_the_provider_cannot_tell(app, recorder):
    # Given the money job on, a lost response, and a provider that can neither deduplicate nor be queried
    set_toggle("money.credit", "on")
    operation_id = enqueue(app, "money.credit.v1")
    recorder.drop_response = True
    recorder.provider_can_lookup = False
    # When the delivery tries to settle it / Then the stored error says exactly that
    assert deliver(app, operation_id).outcome is Outcome.UNKNOWN
    assert app.operations.require(operation_id).last_error == (
        "OutcomeUnknown: ambiguous outcome (TimeoutError); the provider can neither deduplicate nor be queried"
    )


@pytest.mark.parametrize(
    ("job_type", "receipt"),
    [
        ("mail.notice.v1", "effect applied, then claimed"),
        ("files.copy.v1", "keyed effect written"),
        ("money.credit.v1", "claimed, then effect applied"),
    ],
)
def test_the_receipt_of_a_success_says_in_which_order_the_policy_worked(app, recorder, clock, job_type, receipt):
    # Given a job of each policy, switched on, whose first delivery took the lease and died
    set_toggle("money.credit", "on")
    operation_id = enqueue(app, job_type)
    hold_lease(app, operation_id, "dead-delivery", 30)
    clock.advance(31)
    # When it succeeds, on its second attempt (money's provider confirms nothing was applied)
    result = deliver(app, operation_id, attempt=2)
    # Then the result and the stored history give the policy's own account of the order, and the attempt
    assert (result.outcome, result.reason) == (Outcome.SUCCEEDED, receipt)
    stored = app.operations.require(operation_id)
    assert (stored.history[-1].reason, stored.attempts) == (receipt, 2)


def test_a_lost_response_the_provider_denies_is_retried_with_that_reason(ledger):
    # Given a credit whose call failed ambiguously, and a provider that confirms it did not apply it
    app, provider = ledger
    operation_id = enqueue(app, "money.ledger.v1")
    real_run = provider.run

    def time_out_before_the_provider(message, loaded, ctx):
        raise TimeoutError("connect timeout")

    provider.run = time_out_before_the_provider
    # When the delivery settles it
    result = deliver(app, operation_id)
    # Then it is retried, the stored error saying the provider confirmed nothing was applied
    assert result.outcome is Outcome.RETRY
    stored = app.operations.require(operation_id)
    assert stored.last_error == "TransientError: the provider confirms the effect was not applied; retrying"
    # And the retry runs the effect, once
    provider.run = real_run
    assert deliver(app, operation_id, attempt=2, message_id="m-2").outcome is Outcome.SUCCEEDED
    assert list(provider.credited) == [operation_id]


class LambdaDied(BaseException):
    """The function stopped mid-invocation (timeout, out of memory): nothing after this line runs."""


def test_a_claim_whose_holder_died_is_taken_over_once_its_lease_ends(ledger, clock):
    # Given a delivery that claimed the credit and died before calling the provider
    app, provider = ledger
    operation_id = enqueue(app, "money.ledger.v1")
    real_run = provider.run

    def die(message, loaded, ctx):
        raise LambdaDied()

    provider.run = die
    with pytest.raises(LambdaDied):
        deliver(app, operation_id)
    provider.run = real_run
    # When the next delivery comes after the dead holder's lease (its time left, plus grace)
    clock.advance(35)
    result = deliver(app, operation_id, attempt=2, message_id="m-2")
    # Then it takes the claim over, asks the provider first (nothing applied), and credits once
    assert result.outcome is Outcome.SUCCEEDED
    assert list(provider.credited) == [operation_id]
    assert app.operations.require(operation_id).history[-1].reason == "claimed, then effect applied"


def test_a_takeover_after_the_dead_holder_did_apply_the_effect_is_settled_without_a_second_one(ledger, clock):
    # Given a delivery that credited and died before recording it
    app, provider = ledger
    operation_id = enqueue(app, "money.ledger.v1")
    real_run = provider.run

    def credit_then_die(message, loaded, ctx):
        real_run(message, loaded, ctx)
        raise LambdaDied()

    provider.run = credit_then_die
    with pytest.raises(LambdaDied):
        deliver(app, operation_id)
    provider.run = real_run
    # When the next delivery takes the expired claim over
    clock.advance(35)
    result = deliver(app, operation_id, attempt=2, message_id="m-2")
    # Then the provider confirms the credit, nothing is credited again, and the receipt says why
    assert result.outcome is Outcome.SUCCEEDED
    assert list(provider.credited) == [operation_id]
    assert app.operations.require(operation_id).history[-1].reason == (
        "claim taken over from an expired holder; the provider confirms it was applied"
    )


class MessageReader:
    """A runner whose effect depends on the message it is given (as every real one does)."""

    def __init__(self):
        self.users: list[str] = []

    def load(self, message, ctx):
        return "active"

    def run(self, message, loaded, ctx):
        self.users.append(str(message.user_id))

    def confirm(self, message, ctx):
        return Confirmation.NOT_APPLIED


@pytest.mark.parametrize("policy", [Policy.EFFECT_THEN_CLAIM, Policy.KEYED_EFFECT, Policy.CLAIM_THEN_EFFECT])
def test_every_policy_hands_the_runner_the_validated_message(settings, clock, policy):
    # Given a job of this policy whose runner reads the message
    runner = MessageReader()
    registry = Registry()
    registry.register(
        JobBinding(
            job_type="test.reader.v1",
            message=Notice,
            runner=lambda: runner,
            queue=Queue.CRITICAL,
            policy=policy,
            default_enabled=True,
            max_attempts=3,
        )
    )
    app = Converge(
        settings,
        registry=registry,
        clients=Clients(dynamodb=boto3.client("dynamodb"), sqs=boto3.client("sqs"), ssm=boto3.client("ssm")),
        clock=clock,
        ids=SequentialIds("reader"),
    )
    user = str(uuid.uuid4())
    app.enqueue("test.reader.v1", "op-read", {"user_id": user})
    # When it runs / Then the effect was applied for the message's own user
    assert deliver(app, "op-read").outcome is Outcome.SUCCEEDED
    assert runner.users == [user]
