"""The approved credit's `credit` step against the ledger (catalogue.approvals): claimed first and keyed by the
operation id, so an answer lost on the way back is settled by asking the ledger by that key, never by crediting
again; a ledger that cannot be asked leaves the operation UNKNOWN for an operator, the partner told nothing."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from catalogue import examples
from catalogue.approvals import APPROVAL, LargePartnerCredit, build_runner
from catalogue.benefits import APPROVAL_THRESHOLD_CENTS
from catalogue.bindings import APPROVED_CREDIT
from catalogue.ledger import DynamoLedger, LedgerMode, LedgerOutcomeAmbiguous
from converge.flow.steps import Steps
from converge.model.errors import OutcomeUnknown
from converge.store.markers import MarkerStore
from converge.store.signals import SignalStore
from tests.catalogue.conftest import App

LARGE = APPROVAL_THRESHOLD_CENTS + 150_000


class LostAnswer:
    """The ledger applies the credit, then its answer is lost on the way back (a read timeout)."""

    def __init__(self, ledger: DynamoLedger) -> None:
        self.ledger = ledger
        self.can_lookup = ledger.can_lookup

    def credit(self, idempotency_key: str, partner_id: str, amount_cents: int) -> Any:
        self.ledger.credit(idempotency_key, partner_id, amount_cents)
        raise LedgerOutcomeAmbiguous("the ledger's answer was lost (ReadTimeoutError)")

    def lookup(self, idempotency_key: str) -> Any:
        return self.ledger.lookup(idempotency_key)


def approved_delivery(app: App, operation_id: str) -> tuple[Any, LargePartnerCredit, Any]:
    """A delivery of a large credit whose approval was sent before it ran (kept, and handed over at the wait)."""
    dynamodb, markers = app.clients["dynamodb"], app.outputs["MarkersTableName"]
    SignalStore(markers, dynamodb, app.clock).receive(operation_id, APPROVAL, "ap-1", {"decision": "approved"}, "op")
    ctx = app.ctx(APPROVED_CREDIT.job_type, operation_id=operation_id)
    assert ctx.steps is not None
    steps = Steps(
        MarkerStore(markers, dynamodb, app.clock),
        operation_id,
        "worker-1",
        True,
        APPROVED_CREDIT.policy,
        app.clock,
        SignalStore(markers, dynamodb, app.clock),
    )
    message = LargePartnerCredit(partner_id=examples.PARTNER, amount_cents=LARGE, benefit="award")
    return replace(ctx, steps=steps), message, DynamoLedger(app.data.ledger_table, dynamodb)


def test_an_approved_credit_whose_answer_was_lost_is_asked_by_its_key_and_made_once(app: App) -> None:
    # Given an approved large credit, and a ledger that applies it but whose answer is lost
    ctx, message, ledger = approved_delivery(app, "credit-lost-answer")
    runner = build_runner()
    runner.ledger = LostAnswer(ledger)
    before = ledger.balance(examples.PARTNER)
    # When it runs
    runner.run(message, runner.load(message, ctx), ctx)
    # Then the ledger was asked by the operation id, found the credit, and nothing was credited again
    assert [entry.idempotency_key for entry in ledger.entries(examples.PARTNER)] == ["credit-lost-answer"]
    assert ledger.balance(examples.PARTNER) == before + LARGE
    assert len(app.sent_emails()) == 1


def test_an_approved_credit_on_a_ledger_that_cannot_be_asked_becomes_unknown_and_tells_nobody(app: App) -> None:
    # Given an approved large credit, a ledger that neither deduplicates nor can be asked, and a lost answer
    ctx, message, ledger = approved_delivery(app, "credit-unknowable")
    ledger.set_mode(LedgerMode.NONE)
    runner = build_runner()
    runner.ledger = LostAnswer(ledger)
    # When it runs / Then the operation's outcome is for an operator to settle, naming the credit step
    with pytest.raises(OutcomeUnknown, match="'credit'"):
        runner.run(message, runner.load(message, ctx), ctx)
    # And the partner was told nothing: no e-mail before the credit is known
    assert app.sent_emails() == []
