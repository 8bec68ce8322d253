"""A large partner credit: it waits for an operator's approval before the ledger is touched (docs/signals.md).

A credit above APPROVAL_THRESHOLD_CENTS is enqueued as this job (catalogue.producers routes it), not as the plain
credit (`ledger.partner-benefits.v1`, which refuses an amount above the threshold, so no large credit skips the
approval). The job waits for the signal `approval` for three days at most, SCHEDULED and listed meanwhile; an
operator sends it from the console's approve/reject form, `converge signal` or the HTTP API, its payload's
`decision` saying `approved` or `rejected`. Then:

- approved: the `credit` step (claim_then_effect: the claim first, the ledger keyed by the operation id, asked by
  that key when an answer was lost), then the partner told it was credited (`tell-credited`);
- rejected: nothing credited, the partner told (`tell-rejected`);
- no decision within three days: nothing credited, the partner told the request lapsed (`tell-expired`).

Each e-mail is its own step (effect_then_claim): a crash between the send and its marker sends that one again,
never the credit. The operation ends SUCCEEDED on every path; its steps and the wait's note (resumed by which
signal, or timed out) say which one it took.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from pydantic import Field

from catalogue.benefits import APPROVAL_THRESHOLD_CENTS, MAX_CREDIT_CENTS
from catalogue.ledger import DynamoLedger, LedgerProvider
from catalogue.mail import Mailer, SesMailer
from catalogue.partners import DynamoPartnerDirectory, Partner, PartnerDirectory
from catalogue.settings import CatalogueSettings
from converge import Code, Confirmation, Identifier, JobContext, JobMessage, logger

APPROVAL = "approval"
"""The signal the credit waits for (public, like a step's name)."""
APPROVAL_TIMEOUT = timedelta(days=3)
APPROVED = "approved"
"""The payload's `decision` that lets the credit through; anything else (the console's `rejected`) does not."""

SUBJECTS = {
    "credited": "Your balance was credited",
    "rejected": "Your credit was not approved",
    "expired": "Your credit request lapsed",
}
TEXTS = {
    "credited": "Hello {name},\n\nyour balance was credited with {amount} ({benefit}), as approved.\n",
    "rejected": "Hello {name},\n\nthe credit of {amount} ({benefit}) was not approved; nothing was credited.\n",
    "expired": "Hello {name},\n\nthe credit of {amount} ({benefit}) was not approved within three days; "
    "nothing was credited.\n",
}


class LargePartnerCredit(JobMessage):
    partner_id: Identifier
    amount_cents: int = Field(gt=APPROVAL_THRESHOLD_CENTS, le=MAX_CREDIT_CENTS)
    benefit: Code


class ApprovedCreditRunner:
    """Wait for the approval, then credit and tell, or only tell (the module docstring says each path)."""

    def __init__(self, partners: PartnerDirectory, ledger: LedgerProvider, mailer: Mailer) -> None:
        self.partners = partners
        self.ledger = ledger
        self.mailer = mailer

    def load(self, message: LargePartnerCredit, ctx: JobContext) -> Partner | None:
        partner = self.partners.get(message.partner_id)
        if partner is None or not partner.active:
            return None  # nobody to credit: no approval asked for
        return partner

    def run(self, message: LargePartnerCredit, partner: Partner, ctx: JobContext) -> None:
        approval = ctx.wait_for(APPROVAL, timeout=APPROVAL_TIMEOUT)
        if approval.timed_out:
            outcome = "expired"
        elif approval.payload.get("decision") == APPROVED:
            outcome = "credited"
            ctx.step(
                "credit",
                lambda _key: self._credit(message, partner, ctx),
                policy="claim_then_effect",
                confirm=lambda _key: self._confirm(ctx),
            )
        else:
            outcome = "rejected"
        if partner.email:
            ctx.step(f"tell-{outcome}", lambda _key: self._tell(message, partner, outcome, ctx))
        logger.info(
            "large credit decided",
            partner_id=partner.partner_id,
            amount_cents=message.amount_cents,
            outcome=outcome,
            signal_id=approval.signal_id,
        )

    def _credit(self, message: LargePartnerCredit, partner: Partner, ctx: JobContext) -> dict[str, Any]:
        # Keyed by the operation id, as every credit is: the ledger writes one entry however often it is asked.
        entry = self.ledger.credit(ctx.operation_id, partner.partner_id, message.amount_cents)
        return {"entry_id": entry.entry_id}

    def _confirm(self, ctx: JobContext) -> Confirmation:
        if not self.ledger.can_lookup:
            return Confirmation.UNKNOWABLE
        found = self.ledger.lookup(ctx.operation_id)
        return Confirmation.APPLIED if found is not None else Confirmation.NOT_APPLIED

    def _tell(self, message: LargePartnerCredit, partner: Partner, outcome: str, ctx: JobContext) -> None:
        amount = f"{message.amount_cents // 100}.{message.amount_cents % 100:02d}"
        text = TEXTS[outcome].format(name=partner.name or "there", amount=amount, benefit=message.benefit)
        text += f"\nReference: {ctx.operation_id}\n"  # ties the e-mail to its operation, and so to the credit
        self.mailer.send(partner.email, SUBJECTS[outcome], text)


def build_runner() -> ApprovedCreditRunner:
    settings = CatalogueSettings.from_env()
    return ApprovedCreditRunner(
        DynamoPartnerDirectory(settings.require("app_table")),
        DynamoLedger(settings.require("ledger_table")),
        SesMailer(settings.require("sender_email")),
    )
