"""Monthly partner statements: a batch, one e-mail per partner, then a summary of the month's mailing.

The producer (billing, once a month) admits one batch (`statement_batch`): a child per partner
(`billing.partner-statement.v1`, effect_then_claim: duplicates over loss, as every e-mail) and the callback
(`billing.statements-sent.v1`, keyed_effect), which converge enqueues exactly once, when every statement is
final, with the batch's counts. The callback writes them to `statements/<batch id>/summary.json`: a re-run
overwrites the same object. A partner gone, closed or without an address gets no statement (a no-op, counted
as one on the batch).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Protocol

from catalogue.bindings import STATEMENT, STATEMENTS_SENT
from catalogue.ledger import DynamoLedger
from catalogue.mail import Mailer, SesMailer
from catalogue.partners import DynamoPartnerDirectory, Partner, PartnerDirectory
from catalogue.settings import CatalogueSettings
from catalogue.storage import ObjectStore, S3ObjectStore
from converge import (
    BatchCallback,
    BatchChild,
    BatchSummary,
    Identifier,
    JobContext,
    JobMessage,
    logger,
)

SUMMARY_PREFIX = "statements/"


class PartnerStatement(JobMessage):
    partner_id: Identifier
    month: Identifier


class StatementsSent(BatchSummary):
    """The callback's message: the month, and the batch's summary (batch_id, batch_total, batch_succeeded, ...)."""

    month: Identifier


class Balances(Protocol):
    def balance(self, partner_id: str) -> int: ...


STATEMENT_SUBJECT = "Your statement for {month}"
STATEMENT_TEXT = "Hello {name},\n\nyour balance at the end of {month} is {balance}.\n"


class PartnerStatementRunner:
    """E-mail a partner their month's balance (a partner gone, closed or without an address: nothing to do)."""

    def __init__(self, partners: PartnerDirectory, balances: Balances, mailer: Mailer) -> None:
        self.partners = partners
        self.balances = balances
        self.mailer = mailer

    def load(self, message: PartnerStatement, ctx: JobContext) -> Partner | None:
        partner = self.partners.get(message.partner_id)
        if partner is None or not partner.active or not partner.email:
            return None
        return partner

    def run(self, message: PartnerStatement, partner: Partner, ctx: JobContext) -> None:
        cents = self.balances.balance(partner.partner_id)
        balance = f"{cents // 100}.{cents % 100:02d}"
        text = STATEMENT_TEXT.format(name=partner.name or "there", month=message.month, balance=balance)
        # The operation id (`<batch>::<shard>:<partner>`) ties the e-mail to its batch and its partner.
        text += f"\nReference: {ctx.operation_id}\n"
        self.mailer.send(partner.email, STATEMENT_SUBJECT.format(month=message.month), text)
        logger.info("statement sent", partner_id=partner.partner_id, month=message.month)


class StatementsSummaryRunner:
    """Write the mailing's counts where billing reads them: one object per batch, overwritten by a re-run."""

    def __init__(self, store: ObjectStore) -> None:
        self.store = store

    def load(self, message: StatementsSent, ctx: JobContext) -> StatementsSent:
        return message

    def run(self, message: StatementsSent, summary: StatementsSent, ctx: JobContext) -> None:
        body = json.dumps(summary_of(message), sort_keys=True).encode()
        self.store.put(summary_key(message.batch_id), body, "application/json", operation_id=ctx.operation_id)
        logger.info("statements summarised", batch_id=message.batch_id, sent=message.batch_succeeded)


def summary_key(batch_id: str) -> str:
    return f"{SUMMARY_PREFIX}{batch_id}/summary.json"


def summary_of(message: StatementsSent) -> dict[str, object]:
    """What the summary object holds: the month, the batch and its counts."""
    return {
        "month": message.month,
        "batch_id": message.batch_id,
        "total": message.batch_total,
        "sent": message.batch_succeeded,
        "skipped": message.batch_noop,
        "failed": message.batch_failed,
        "rejected": message.batch_rejected,
        "cancelled": message.batch_cancelled,
        "expired": message.batch_expired,
    }


def statement_batch(month: str, partner_ids: Iterable[str]) -> tuple[str, list[BatchChild], BatchCallback]:
    """The month's batch: its id, a statement per partner (keyed by the partner), and the summary callback."""
    children = [
        BatchChild(partner_id, STATEMENT.job_type, {"partner_id": partner_id, "month": month})
        for partner_id in partner_ids
    ]
    return f"statements-{month}", children, BatchCallback(STATEMENTS_SENT.job_type, {"month": month})


def build_statement_runner() -> PartnerStatementRunner:
    settings = CatalogueSettings.from_env()
    return PartnerStatementRunner(
        DynamoPartnerDirectory(settings.require("app_table")),
        DynamoLedger(settings.require("ledger_table")),
        SesMailer(settings.require("sender_email")),
    )


def build_summary_runner() -> StatementsSummaryRunner:
    return StatementsSummaryRunner(S3ObjectStore(CatalogueSettings.from_env().require("documents_bucket")))
