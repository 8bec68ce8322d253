"""Monthly statements: a batch of one e-mail per partner (effect_then_claim) and a summary callback (keyed_effect)."""

from __future__ import annotations

import json

from catalogue import examples
from catalogue.statements import (
    PartnerStatement,
    StatementsSent,
    build_statement_runner,
    build_summary_runner,
    statement_batch,
    summary_key,
)
from converge.flow.registry import load_catalogue
from converge.model.batches import child_id, shard_count, shard_of
from tests.catalogue.conftest import App

STATEMENT = "billing.partner-statement.v1"
SUMMARY = "billing.statements-sent.v1"
MONTH = examples.STATEMENT_MONTH


def test_a_partner_is_emailed_their_balance_once_naming_the_child_operation(app: App) -> None:
    # Given the statement of an active partner, as a child of the month's batch
    runner = build_statement_runner()
    message = PartnerStatement(partner_id=examples.PARTNER, month=MONTH)
    operation_id = child_id(f"statements-{MONTH}", examples.PARTNER, 0)
    ctx = app.ctx(STATEMENT, operation_id=operation_id)
    # When it runs
    runner.run(message, runner.load(message, ctx), ctx)
    # Then one e-mail goes to the partner's address, with the month's balance and the child's operation id
    [sent] = app.sent_emails()
    assert sent.destinations["ToAddresses"] == ["billing@atelier-nord.example.com"]
    balance = app.data.balances[examples.PARTNER]
    assert f"Your statement for {MONTH}" in sent.subject
    assert f"{balance // 100}.{balance % 100:02d}" in sent.body
    assert f"Reference: {operation_id}" in sent.body


def test_a_closed_or_unknown_partner_gets_no_statement(app: App) -> None:
    # Given a closed partner (seeded) and one that does not exist
    runner = build_statement_runner()
    for partner_id in (examples.CLOSED_PARTNER, "p-missing"):
        message = PartnerStatement(partner_id=partner_id, month=MONTH)
        # When the statement loads / Then there is nothing to do (a no-op, counted as one on the batch)
        assert runner.load(message, app.ctx(STATEMENT)) is None
    assert app.sent_emails() == []


def test_the_summary_writes_the_counts_once_to_its_batch_key(app: App) -> None:
    # Given the callback's message as converge completes it (the month, and the batch's summary)
    runner = build_summary_runner()
    batch_id = f"statements-{MONTH}"
    message = StatementsSent(
        month=MONTH, batch_id=batch_id, batch_total=3, batch_succeeded=2, batch_noop=1, batch_failed=0
    )
    ctx = app.ctx(SUMMARY, operation_id=f"{batch_id}::callback")
    # When it runs twice (a redelivery)
    runner.run(message, runner.load(message, ctx), ctx)
    runner.run(message, runner.load(message, ctx), ctx)
    # Then one object holds the counts, under the batch's key, naming its operation
    objects = app.objects("statements/")
    assert list(objects) == [summary_key(batch_id)]
    assert json.loads(objects[summary_key(batch_id)]) == {
        "month": MONTH,
        "batch_id": batch_id,
        "total": 3,
        "sent": 2,
        "skipped": 1,
        "failed": 0,
        "rejected": 0,
        "cancelled": 0,
        "expired": 0,
    }
    head = app.clients["s3"].head_object(Bucket=app.data.documents_bucket, Key=summary_key(batch_id))
    assert head["Metadata"]["operation-id"] == f"{batch_id}::callback"


def test_the_months_batch_has_one_valid_child_per_partner_keyed_by_the_partner() -> None:
    # Given every seeded partner
    registry = load_catalogue("catalogue")
    # When billing builds the month's batch
    batch_id, children, callback = statement_batch(MONTH, examples.PARTNERS)
    # Then it has one child per partner, keyed by the partner, each payload valid for its job
    assert batch_id == f"statements-{MONTH}"
    assert [child.key for child in children] == list(examples.PARTNERS)
    for child in children:
        assert child.job_type == STATEMENT
        registry.get(STATEMENT).message_class().model_validate(dict(child.payload))
    # And its callback is the summary, for the month
    assert (callback.job_type, dict(callback.payload)) == (SUMMARY, {"month": MONTH})
    # And each child's operation id names its batch and its partner
    closed = child_id(batch_id, examples.CLOSED_PARTNER, shard_of(2, shard_count(len(children))))
    assert closed == f"{batch_id}::0:{examples.CLOSED_PARTNER}"
