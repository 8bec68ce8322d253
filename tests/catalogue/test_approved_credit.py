"""A partner credit above the approval threshold (catalogue.approvals), through the whole local cloud: the credit
function enqueues it, it waits SCHEDULED for the signal `approval`, and an operator's decision (or three days
without one) settles it. Each test counts the ledger rows and e-mails in the emulated services and reads the stored
receipt (its steps, its wait's note, its signals)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from catalogue import examples
from catalogue.approvals import APPROVAL, APPROVAL_TIMEOUT
from catalogue.benefits import APPROVAL_THRESHOLD_CENTS
from catalogue.bindings import APPROVED_CREDIT, PARTNER_BENEFITS
from catalogue.ledger import DynamoLedger
from converge.model.errors import InvalidMessage
from converge.model.states import OperationState
from converge.model.submission import SignalSubmission
from converge.runtime import Converge
from localcloud import LocalCloud, effects
from localcloud.bound import runtime_for
from localcloud.server import catalogue_seeder

LARGE = APPROVAL_THRESHOLD_CENTS + 150_000


@pytest.fixture(scope="module")
def cloud() -> Iterator[LocalCloud]:
    with LocalCloud.start(seeders=[catalogue_seeder]) as local:
        effects.instrument(local)
        converge = runtime_for(local)
        local.client("ssm").put_parameter(
            Name=converge.settings.toggle_parameter(APPROVED_CREDIT.toggle_key),
            Value="on",
            Type="String",
            Overwrite=True,
        )
        yield local


@pytest.fixture
def converge(cloud: LocalCloud) -> Converge:
    return runtime_for(cloud)


def request_credit(cloud: LocalCloud, request_id: str, amount_cents: int, partner_id: str = examples.PARTNER) -> Any:
    """The benefits team's call of the credit function, as it makes it."""
    event = {"request_id": request_id, "partner_id": partner_id, "amount_cents": amount_cents, "benefit": "award"}
    return cloud.invoke("PartnerCreditFunction", event)


def made(cloud: LocalCloud, operation_id: str) -> dict[str, int]:
    counted = effects.count(cloud).for_operation(operation_id)
    return {"ledger": counted["ledger"], "ses": counted["ses"]}


def waiting(cloud: LocalCloud, converge: Converge, request_id: str) -> dict[str, Any]:
    """A large credit requested and run until it waits: its receipt as `converge ops show --json` prints it."""
    answer = request_credit(cloud, request_id, LARGE)
    assert answer == {"operation_id": request_id, "created": True, "awaits_approval": True}
    cloud.drain()
    return converge.operations.require(request_id, steps=True).to_json()


def steps_of(converge: Converge, operation_id: str) -> dict[str, tuple[str, str]]:
    operation = converge.operations.require(operation_id, steps=True)
    return {step.name: (step.state.value, step.note) for step in operation.steps or ()}


def balance(cloud: LocalCloud, partner_id: str = examples.PARTNER) -> int:
    return DynamoLedger(cloud.outputs["LedgerTableName"], cloud.client("dynamodb")).balance(partner_id)


def test_a_large_credit_waits_for_its_approval_listed_with_its_timeout_crediting_nothing(cloud, converge) -> None:
    # Given a credit above the threshold, requested through the application's credit function
    before = balance(cloud)
    # When the cloud drains
    shown = waiting(cloud, converge, "large-credit-waits")
    # Then it waits SCHEDULED for the approval, until three days from now, listed, and nothing is credited or sent
    assert (shown["state"], shown["job_type"]) == ("SCHEDULED", APPROVED_CREDIT.job_type)
    assert (shown["waiting"], shown["waiting_for"]) == (APPROVAL, "signal")
    started = converge.operations.require("large-credit-waits").state_record.run_at or 0
    assert started - cloud.clock.now() == pytest.approx(APPROVAL_TIMEOUT.total_seconds(), abs=120)
    listed = {row["operation_id"] for row in converge.operations.listings.iter_attention("SCHEDULED")}
    assert "large-credit-waits" in listed
    assert made(cloud, "large-credit-waits") == {"ledger": 0, "ses": 0} and balance(cloud) == before


def test_an_approved_credit_is_credited_once_and_the_partner_told_once(cloud, converge) -> None:
    # Given a large credit waiting for its approval
    waiting(cloud, converge, "large-credit-approved")
    before = balance(cloud)
    # When an operator approves it, the console's form sent twice (a double click: the same signal), and the cloud
    # drains, and its dispatch is delivered again
    decision = {"decision": "approved", "operator_id": "op-7"}
    first = converge.signals.send(SignalSubmission("large-credit-approved", APPROVAL, decision, sent_by="console:ops"))
    again = converge.signals.send(SignalSubmission("large-credit-approved", APPROVAL, decision, sent_by="console:ops"))
    cloud.drain()
    approved = converge.operations.require("large-credit-approved")
    cloud.client("sqs").send_message(
        QueueUrl=cloud.outputs["CriticalQueueUrl"], MessageBody=converge.dispatcher.envelope_for(approved).to_body()
    )
    cloud.drain()
    # Then one signal was kept, the credit made once (one ledger row, the balance up by its amount), one e-mail
    assert (first.answer.value, first.woke, again.answer.value) == ("accepted", True, "duplicate")
    assert converge.operations.require("large-credit-approved").state is OperationState.SUCCEEDED
    assert made(cloud, "large-credit-approved") == {"ledger": 1, "ses": 1}
    assert balance(cloud) == before + LARGE
    # And the receipt says the signal resumed the wait, then the credit and the notice ran
    steps = steps_of(converge, "large-credit-approved")
    assert list(steps) == [APPROVAL, "credit", "tell-credited"]
    assert steps[APPROVAL] == ("done", f"resumed by signal {first.signal_id!r}")
    assert steps["credit"][0] == "done"


@pytest.mark.parametrize("by", ["rejected", "timed out"])
def test_a_rejected_or_lapsed_credit_credits_nothing_and_the_partner_is_told(cloud, converge, by: str) -> None:
    operation_id = f"large-credit-{by.replace(' ', '-')}"
    # Given a large credit waiting for its approval
    waiting(cloud, converge, operation_id)
    before = balance(cloud)
    # When an operator rejects it, or three days pass without a decision (the timeout's one-time schedule fires)
    if by == "rejected":
        sent = converge.signals.send(
            SignalSubmission(operation_id, APPROVAL, {"decision": "rejected"}, sent_by="cli:ops")
        )
        assert sent.answer.value == "accepted"
    else:
        cloud.advance(APPROVAL_TIMEOUT.total_seconds() + 60)
    cloud.drain()
    # Then nothing is credited, and the partner is told once
    assert converge.operations.require(operation_id).state is OperationState.SUCCEEDED
    assert made(cloud, operation_id) == {"ledger": 0, "ses": 1} and balance(cloud) == before
    told = "tell-rejected" if by == "rejected" else "tell-expired"
    steps = steps_of(converge, operation_id)
    assert list(steps) == [APPROVAL, told]
    assert steps[APPROVAL][1] == ("timed out" if by == "timed out" else "resumed by signal " + repr(sent.signal_id))
    # And a decision sent after it is answered so, and changes nothing
    late = converge.signals.send(SignalSubmission(operation_id, APPROVAL, {"decision": "approved"}, sent_by="cli:late"))
    assert late.answer.value == "ended"
    cloud.drain()
    assert made(cloud, operation_id) == {"ledger": 0, "ses": 1}


def test_a_credit_at_the_threshold_is_the_plain_credit_and_a_larger_one_cannot_skip_the_approval(
    cloud, converge
) -> None:
    # Given a credit exactly at the threshold / When the credit function is called
    answer = request_credit(cloud, "credit-at-threshold", APPROVAL_THRESHOLD_CENTS)
    # Then it is the plain money job, as before (no approval)
    assert answer["awaits_approval"] is False
    assert converge.operations.require("credit-at-threshold").job_type == PARTNER_BENEFITS.job_type
    # And the plain money job refuses a larger amount enqueued directly: no large credit goes around the approval
    payload = {"partner_id": examples.PARTNER, "amount_cents": APPROVAL_THRESHOLD_CENTS + 1, "benefit": "award"}
    with pytest.raises(InvalidMessage, match="amount_cents"):
        converge.enqueue(PARTNER_BENEFITS.job_type, "credit-around-approval", payload)
