"""The ledger provider and the partner-benefits runner: one row per effect, and honest confirmations."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError, ReadTimeoutError

from catalogue import examples
from catalogue.benefits import PartnerBenefitCredit, PartnerBenefitRunner, build_runner
from catalogue.ledger import DynamoLedger, IdempotencyKeyReused, LedgerMode, LedgerOutcomeAmbiguous
from catalogue.partners import DynamoPartnerDirectory
from converge.flow.policies import Attempt, claim_then_effect
from converge.flow.runner import Confirmation
from converge.model.errors import OutcomeUnknown, PermanentError, TransientError
from converge.model.records import Lease, Subject
from converge.model.states import OperationState
from converge.store.operations import OperationStore
from tests.catalogue.conftest import App
from tests.conftest import REGION

JOB = "ledger.partner-benefits.v1"
CREDIT = PartnerBenefitCredit(partner_id=examples.PARTNER, amount_cents=2_500, benefit="referral-bonus")


def ledger(app: App, client: Any = None) -> DynamoLedger:
    return DynamoLedger(app.data.ledger_table, client or app.clients["dynamodb"], app.clock)


def runner_over(app: App, client: Any = None) -> PartnerBenefitRunner:
    return PartnerBenefitRunner(
        DynamoPartnerDirectory(app.data.app_table, app.clients["dynamodb"]), ledger(app, client)
    )


class LosesResponses:
    """A DynamoDB client whose transactions are applied, but whose answers never arrive."""

    def __init__(self, real: Any) -> None:
        self._real = real

    def transact_write_items(self, **kwargs: Any) -> Any:
        self._real.transact_write_items(**kwargs)
        raise ReadTimeoutError(endpoint_url="https://dynamodb.us-east-1.amazonaws.com")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


class Throttled(LosesResponses):
    """A DynamoDB client that refuses every transaction before applying it."""

    def transact_write_items(self, **kwargs: Any) -> Any:
        raise ClientError({"Error": {"Code": "ThrottlingException", "Message": "slow down"}}, "TransactWriteItems")


# -- the provider -----------------------------------------------------------------------------------------------


def test_dedup_mode_a_repeated_key_returns_the_original_entry_and_writes_no_second_row(app: App) -> None:
    # Given the ledger in its default "dedup" mode (as seeded)
    provider = ledger(app)
    assert provider.mode() is LedgerMode.DEDUP
    # When the same idempotency key is credited twice
    first = provider.credit("op-1", examples.PARTNER, 2_500)
    second = provider.credit("op-1", examples.PARTNER, 2_500)
    # Then one row exists, the second answer is the original entry, the balance moved once, and lookup finds it
    assert second == first
    assert len(provider.entries()) == 1
    assert provider.balance(examples.PARTNER) == app.data.balances[examples.PARTNER] + 2_500
    assert provider.can_lookup and provider.lookup("op-1") == first
    assert provider.lookup("op-unknown") is None


def test_dedup_mode_a_key_reused_for_a_different_credit_is_refused(app: App) -> None:
    # Given a credit under a key / When the key is reused for another amount / Then a permanent refusal, no row
    provider = ledger(app)
    provider.credit("op-1", examples.PARTNER, 2_500)
    with pytest.raises(IdempotencyKeyReused):
        provider.credit("op-1", examples.PARTNER, 9_999)
    assert len(provider.entries()) == 1


def test_none_mode_every_credit_is_a_new_row_and_nothing_can_be_looked_up(app: App) -> None:
    # Given the ledger switched to "none" (no deduplication, no lookup)
    provider = ledger(app)
    provider.set_mode(LedgerMode.NONE)
    # When the same key is credited twice
    provider.credit("op-1", examples.PARTNER, 2_500)
    provider.credit("op-1", examples.PARTNER, 2_500)
    # Then two rows exist (a duplicate effect), and the provider cannot be queried
    assert len(provider.entries(examples.PARTNER)) == 2
    assert provider.balance(examples.PARTNER) == app.data.balances[examples.PARTNER] + 5_000
    assert not provider.can_lookup
    with pytest.raises(LookupError):
        provider.lookup("op-1")


def test_a_lost_response_is_ambiguous_not_transient_or_permanent(app: App) -> None:
    # Given a ledger whose answer is lost after it applied the credit
    provider = ledger(app, LosesResponses(app.clients["dynamodb"]))
    # When a credit is made
    with pytest.raises(LedgerOutcomeAmbiguous) as raised:
        provider.credit("op-1", examples.PARTNER, 2_500)
    # Then the error is neither of converge's definite classes, and the credit did happen
    assert not isinstance(raised.value, (TransientError, PermanentError))
    assert len(ledger(app).entries()) == 1


def test_throttling_before_the_action_is_transient(app: App) -> None:
    # Given a throttled ledger / When a credit is made / Then TransientError and no row
    with pytest.raises(TransientError):
        ledger(app, Throttled(app.clients["dynamodb"])).credit("op-1", examples.PARTNER, 2_500)
    assert ledger(app).entries() == []


# -- the runner -------------------------------------------------------------------------------------------------


def test_a_missing_or_closed_partner_is_a_noop(app: App) -> None:
    # Given a closed partner
    app.clients["dynamodb"].update_item(
        TableName=app.data.app_table,
        Key={"pk": {"S": f"partner#{examples.SECOND_PARTNER}"}},
        UpdateExpression="SET #s = :closed",
        ExpressionAttributeNames={"#s": "status"},
        ExpressionAttributeValues={":closed": {"S": "closed"}},
    )
    runner = build_runner()
    # When credits for it, or for an unknown partner, are loaded / Then there is nothing to do
    for partner_id in (examples.SECOND_PARTNER, "p-unknown"):
        message = PartnerBenefitCredit(partner_id=partner_id, amount_cents=100, benefit="referral-bonus")
        assert runner.load(message, app.ctx(JOB)) is None


def test_the_runner_credits_under_the_operation_id_and_confirms_by_it(app: App) -> None:
    # Given the runner built from the environment
    runner = build_runner()
    ctx = app.ctx(JOB)
    assert runner.confirm(CREDIT, ctx) is Confirmation.NOT_APPLIED
    # When it runs twice for the same operation
    runner.run(CREDIT, runner.load(CREDIT, ctx), ctx)
    runner.run(CREDIT, runner.load(CREDIT, ctx), ctx)
    # Then one row, keyed by the operation id, and confirm says APPLIED
    [entry] = ledger(app).entries()
    assert entry.idempotency_key == ctx.operation_id
    assert runner.confirm(CREDIT, ctx) is Confirmation.APPLIED


def test_in_none_mode_confirm_is_unknowable(app: App) -> None:
    # Given the ledger in "none" mode / When the runner is asked what happened / Then it cannot know
    ledger(app).set_mode("none")
    assert build_runner().confirm(CREDIT, app.ctx(JOB)) is Confirmation.UNKNOWABLE


# -- through claim_then_effect ----------------------------------------------------------------------------------


def attempt(app: App, tables: dict[str, str], runner: PartnerBenefitRunner) -> Attempt:
    ctx = app.ctx(JOB)
    store = OperationStore(
        tables["jobs"], tables["state"], boto3.client("dynamodb", region_name=REGION), clock=app.clock
    )
    lease = store.state.acquire(Subject(ctx.operation_id, JOB, "fingerprint"), "delivery-1", 60)
    assert isinstance(lease, Lease)
    return Attempt(runner, CREDIT, runner.load(CREDIT, ctx), ctx, lease)


def test_a_lost_response_in_dedup_mode_is_settled_as_applied_by_asking_the_provider(
    app: App, tables: dict[str, str]
) -> None:
    # Given a ledger that applies the credit but loses its answer
    runner = runner_over(app, LosesResponses(app.clients["dynamodb"]))
    # When claim_then_effect runs the job
    decision = claim_then_effect(attempt(app, tables, runner))
    # Then the provider's lookup settles it: SUCCEEDED, with exactly one ledger row
    assert decision.state is OperationState.SUCCEEDED
    assert "applied" in decision.reason
    assert len(ledger(app).entries()) == 1


def test_a_lost_response_in_none_mode_becomes_unknown(app: App, tables: dict[str, str]) -> None:
    # Given a ledger that can neither deduplicate nor be queried, and that loses its answer
    ledger(app).set_mode(LedgerMode.NONE)
    runner = runner_over(app, LosesResponses(app.clients["dynamodb"]))
    # When claim_then_effect runs the job
    # Then the outcome is UNKNOWN (an operator decides), and the one effect is visible in the ledger
    with pytest.raises(OutcomeUnknown):
        claim_then_effect(attempt(app, tables, runner))
    assert len(ledger(app).entries()) == 1
