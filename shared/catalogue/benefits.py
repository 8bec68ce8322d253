"""Partner benefits (claim_then_effect, fail-closed): credit a partner's balance through the ledger, then tell them.

Money, so the bias is "never twice": the claim is taken first and the operation id is the
provider's idempotency key. A definite refusal (throttling) is a TransientError; an ambiguous
outcome propagates as LedgerOutcomeAmbiguous so the policy asks `confirm` before any resubmission.

The partner's notice is the credit's continuation (`on_success`), a job of its own (`email.partner-credited.v1`,
effect_then_claim): its request is written in the same transaction as the credit's SUCCEEDED, under
`<credit id>:next`, so a credit is noticed exactly when it succeeded, and its e-mail's duplicates (over loss)
never touch the money. A credit that fails, is cancelled or ends UNKNOWN sends no notice.

A credit above APPROVAL_THRESHOLD_CENTS is not this job's: it waits for an operator's approval first
(catalogue.approvals), and this job's message refuses it.
"""

from __future__ import annotations

from pydantic import Field

from catalogue.ledger import DynamoLedger, LedgerProvider
from catalogue.mail import Mailer, SesMailer
from catalogue.partners import DynamoPartnerDirectory, Partner, PartnerDirectory
from catalogue.settings import CatalogueSettings
from converge import Code, Confirmation, Identifier, JobContext, JobMessage, logger

MAX_CREDIT_CENTS = 100_000_00
APPROVAL_THRESHOLD_CENTS = 1_000_00
"""A credit above this waits for an operator's approval (`ledger.approved-credit.v1`, catalogue.approvals)."""


class PartnerBenefitCredit(JobMessage):
    partner_id: Identifier
    amount_cents: int = Field(gt=0, le=APPROVAL_THRESHOLD_CENTS)  # above it: the approved credit, never this job
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


class PartnerCreditNotice(JobMessage):
    partner_id: Identifier
    amount_cents: int = Field(gt=0, le=MAX_CREDIT_CENTS)
    benefit: Code


NOTICE_SUBJECT = "Your balance was credited"
NOTICE_TEXT = "Hello {name},\n\nyour balance was credited with {amount} ({benefit}).\n"


class PartnerCreditNoticeRunner:
    """E-mail a partner that a credit reached their balance (a closed partner, or one without an address: none)."""

    def __init__(self, partners: PartnerDirectory, mailer: Mailer) -> None:
        self.partners = partners
        self.mailer = mailer

    def load(self, message: PartnerCreditNotice, ctx: JobContext) -> Partner | None:
        partner = self.partners.get(message.partner_id)
        if partner is None or not partner.active or not partner.email:
            return None
        return partner

    def run(self, message: PartnerCreditNotice, partner: Partner, ctx: JobContext) -> None:
        amount = f"{message.amount_cents // 100}.{message.amount_cents % 100:02d}"
        text = NOTICE_TEXT.format(name=partner.name or "there", amount=amount, benefit=message.benefit)
        # The operation id (`<credit id>:next`) ties the e-mail to its operation, and so to the credit.
        text += f"\nReference: {ctx.operation_id}\n"
        self.mailer.send(partner.email, NOTICE_SUBJECT, text)
        logger.info("partner notified", partner_id=partner.partner_id, benefit=message.benefit)


def build_notice_runner() -> PartnerCreditNoticeRunner:
    settings = CatalogueSettings.from_env()
    return PartnerCreditNoticeRunner(
        DynamoPartnerDirectory(settings.require("app_table")), SesMailer(settings.require("sender_email"))
    )


def notice_of(message: PartnerBenefitCredit) -> dict[str, object]:
    """The notice's payload, from the credit's validated message (identifiers and the amount, as the credit's)."""
    return {"partner_id": message.partner_id, "amount_cents": message.amount_cents, "benefit": message.benefit}
