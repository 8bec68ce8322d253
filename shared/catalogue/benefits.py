"""Partner benefits (claim_then_effect, fail-closed): credit a partner's balance through the ledger.

Money, so the bias is "never twice": the claim is taken first and the operation id is the
provider's idempotency key. A definite refusal (throttling) is a TransientError; an ambiguous
outcome propagates as LedgerOutcomeAmbiguous so the policy asks `confirm` before any resubmission.
"""

from __future__ import annotations

from pydantic import Field

from catalogue import examples
from catalogue.ledger import DynamoLedger, LedgerProvider
from catalogue.partners import DynamoPartnerDirectory, Partner, PartnerDirectory
from catalogue.settings import CatalogueSettings
from converge import Code, Confirmation, Identifier, JobBinding, JobContext, JobMessage, Policy, Queue, logger

MAX_CREDIT_CENTS = 100_000_00


class PartnerBenefitCredit(JobMessage):
    partner_id: Identifier
    amount_cents: int = Field(gt=0, le=MAX_CREDIT_CENTS)
    benefit: Code


class PartnerBenefitRunner:
    def __init__(self, partners: PartnerDirectory, ledger: LedgerProvider) -> None:
        self.partners = partners
        self.ledger = ledger

    def load(self, message: PartnerBenefitCredit, ctx: JobContext) -> Partner | None:
        partner = self.partners.get(message.partner_id)
        if partner is None or not partner.active:
            return None
        return partner

    def run(self, message: PartnerBenefitCredit, partner: Partner, ctx: JobContext) -> None:
        entry = self.ledger.credit(ctx.operation_id, partner.partner_id, message.amount_cents)
        logger.info(
            "partner credited",
            partner_id=partner.partner_id,
            amount_cents=message.amount_cents,
            benefit=message.benefit,
            entry_id=entry.entry_id,
        )

    def confirm(self, message: PartnerBenefitCredit, ctx: JobContext) -> Confirmation:
        if not self.ledger.can_lookup:
            return Confirmation.UNKNOWABLE
        entry = self.ledger.lookup(ctx.operation_id)
        return Confirmation.APPLIED if entry is not None else Confirmation.NOT_APPLIED


def build_runner() -> PartnerBenefitRunner:
    settings = CatalogueSettings.from_env()
    return PartnerBenefitRunner(
        DynamoPartnerDirectory(settings.require("app_table")), DynamoLedger(settings.require("ledger_table"))
    )


PARTNER_BENEFITS = JobBinding(
    job_type="ledger.partner-benefits.v1",
    message=PartnerBenefitCredit,
    runner=build_runner,
    queue=Queue.CRITICAL,
    policy=Policy.CLAIM_THEN_EFFECT,
    default_enabled=False,  # moves money: a missing or unreadable toggle must never start it
    description="Credit a partner's balance through the ledger, keyed by the operation id.",
    example_payload={"partner_id": examples.PARTNER, "amount_cents": 2500, "benefit": "referral-bonus"},
)
