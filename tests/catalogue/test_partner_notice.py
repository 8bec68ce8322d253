"""The partner's notice of a credit (effect_then_claim), the money job's continuation: one e-mail naming its
operation, none for a partner who is gone, closed or has no address."""

from __future__ import annotations

import pytest

from catalogue import examples
from catalogue.benefits import PartnerCreditNotice, build_notice_runner
from catalogue.records import partner_key
from tests.catalogue.conftest import App

JOB = "email.partner-credited.v1"


def test_the_partner_is_told_the_amount_and_the_benefit_once_naming_the_operation(app: App) -> None:
    # Given a credit's notice (as its continuation writes it, under "<credit id>:next")
    runner = build_notice_runner()
    message = PartnerCreditNotice(partner_id=examples.PARTNER, amount_cents=2505, benefit="referral")
    ctx = app.ctx(JOB, operation_id="credit-7:next")
    # When it runs
    runner.run(message, runner.load(message, ctx), ctx)
    # Then one e-mail goes to the partner's address, with the amount, the benefit and the operation
    [sent] = app.sent_emails()
    assert sent.destinations["ToAddresses"] == ["billing@atelier-nord.example.com"]
    assert "25.05 (referral)" in sent.body and "Reference: credit-7:next" in sent.body


@pytest.mark.parametrize(
    ("partner_id", "change"),
    [
        ("p-missing", None),
        (examples.PARTNER, "SET #status = :closed"),
        (examples.SECOND_PARTNER, "REMOVE email"),
    ],
    ids=["gone", "closed", "no address"],
)
def test_a_partner_gone_closed_or_without_an_address_gets_no_notice(
    app: App, partner_id: str, change: str | None
) -> None:
    # Given the partner is gone, closed, or has no address
    if change:
        app.clients["dynamodb"].update_item(
            TableName=app.data.app_table,
            Key={"pk": {"S": partner_key(partner_id)}},
            UpdateExpression=change,
            **(
                {
                    "ExpressionAttributeNames": {"#status": "status"},
                    "ExpressionAttributeValues": {":closed": {"S": "closed"}},
                }
                if "status" in change
                else {}
            ),
        )
    # When the notice loads / Then there is nothing to do (a successful no-op), and nothing is sent
    message = PartnerCreditNotice(partner_id=partner_id, amount_cents=100, benefit="promo")
    assert build_notice_runner().load(message, app.ctx(JOB)) is None
    assert app.sent_emails() == []
