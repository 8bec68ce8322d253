"""Continuations: the next operation's request is written in the same transaction as its parent's terminal write.

A money job credits a partner (claim_then_effect) and names what follows: on success a notice to the partner,
on failure or UNKNOWN a note to the finance team. Over moto; effects counted in a fake ledger, the next
operations read from the jobs table, DynamoDB calls counted as botocore sends them.
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from converge.flow.registry import JobBinding, Policy, Queue, Registry, Then
from converge.flow.runner import Confirmation, JobContext
from converge.model.clock import SequentialIds
from converge.model.errors import PermanentError
from converge.model.links import continuation_id
from converge.model.outcomes import Outcome
from converge.model.states import OperationState
from converge.runtime import Converge
from converge.runtime.clients import Clients

from .conftest import Notice, body_of, deliver, sent, tables_called


class Ledger:
    def __init__(self) -> None:
        self.credits: Counter[str] = Counter()
        self.fail: list[BaseException] = []
        self.lookup = True

    def load(self, message: Notice, ctx: JobContext) -> str:
        return "ready"

    def run(self, message: Notice, loaded: str, ctx: JobContext) -> None:
        if self.fail:
            raise self.fail.pop(0)
        self.credits[ctx.operation_id] += 1

    def confirm(self, message: Notice, ctx: JobContext) -> Confirmation:
        if not self.lookup:
            return Confirmation.UNKNOWABLE
        return Confirmation.APPLIED if self.credits[ctx.operation_id] else Confirmation.NOT_APPLIED


class Quiet:
    def load(self, message: Notice, ctx: JobContext) -> None:
        return None

    def run(self, message: Notice, loaded: Any, ctx: JobContext) -> None:  # pragma: no cover - load says no-op
        raise AssertionError("never run")


@pytest.fixture
def ledger() -> Ledger:
    return Ledger()


def credit_binding(ledger: Ledger, then_payload: Any = None) -> JobBinding:
    return JobBinding(
        "ledger.credit.v1",
        Notice,
        lambda: ledger,
        Queue.CRITICAL,
        Policy.CLAIM_THEN_EFFECT,
        on_success=Then("mail.partner-notice.v1", then_payload or (lambda m: {"user_id": str(m.user_id)})),
        on_failure=Then("mail.finance-note.v1", lambda m: {"user_id": str(m.user_id)}),
    )


def make_app(settings, clock, *bindings: JobBinding) -> Converge:
    registry = Registry(
        [
            *bindings,
            JobBinding("mail.partner-notice.v1", Notice, Quiet, Queue.DEFAULT, Policy.EFFECT_THEN_CLAIM),
            JobBinding("mail.finance-note.v1", Notice, Quiet, Queue.DEFAULT, Policy.EFFECT_THEN_CLAIM),
        ]
    )
    clients = Clients(dynamodb=boto3.client("dynamodb"), sqs=boto3.client("sqs"), ssm=boto3.client("ssm"))
    return Converge(settings, registry=registry, clients=clients, clock=clock, ids=SequentialIds("attempt"))


@pytest.fixture
def app(settings, clock, ledger) -> Converge:
    return make_app(settings, clock, credit_binding(ledger))


def enqueue(app: Converge) -> str:
    operation_id = f"op-{uuid.uuid4().hex[:8]}"
    app.enqueue("ledger.credit.v1", operation_id, {"user_id": str(uuid.uuid4())}, correlation_id="corr-1")
    return operation_id


def requests(app: Converge, prefix: str) -> dict[str, dict[str, Any]]:
    """The jobs table's requests whose id starts with `prefix` (the parent and what follows it)."""
    items = boto3.client("dynamodb").scan(TableName=app.settings.jobs_table)["Items"]
    return {item["operation_id"]["S"]: item for item in items if item["operation_id"]["S"].startswith(prefix)}


def test_a_parent_that_succeeds_writes_its_continuation_in_the_same_transaction(app, ledger, tables):
    # Given a credit whose binding names a partner notice on success
    operation_id = enqueue(app)
    body = body_of(app, operation_id)
    calls = sent(app.clients.dynamodb)
    # When it runs and succeeds
    assert deliver(app, operation_id, body=body).outcome is Outcome.SUCCEEDED
    # Then the lease and one transaction (the settle, then the notice's request): two calls, no read
    assert tables_called(calls) == [("UpdateItem", tables["state"]), ("TransactWriteItems", "")]
    # And the notice is a request under the derived id, naming its parent, with the parent's correlation id
    child = requests(app, operation_id)[f"{operation_id}:next"]
    assert child["job_type"]["S"] == "mail.partner-notice.v1"
    assert (child["parent_id"]["S"], child["correlation_id"]["S"]) == (operation_id, "corr-1")
    assert set(requests(app, operation_id)) == {operation_id, f"{operation_id}:next"}
    # And the receipts link both ways
    parent = app.operations.require(operation_id, steps=True).to_json()
    assert parent["continuations"] == [{"operation_id": f"{operation_id}:next", "follows": "next", "state": "ACCEPTED"}]
    assert app.operations.require(f"{operation_id}:next").to_json()["parent_id"] == operation_id


def test_a_job_without_continuations_settles_with_one_update_as_before(settings, clock, tables):
    # Given a job that names nothing to follow
    class Plain(Ledger):
        pass

    app = make_app(settings, clock, JobBinding("ledger.plain.v1", Notice, Plain, Queue.CRITICAL, Policy.KEYED_EFFECT))
    app.enqueue("ledger.plain.v1", "op-plain", {"user_id": str(uuid.uuid4())})
    body = body_of(app, "op-plain")
    calls = sent(app.clients.dynamodb)
    # When it runs, Then its terminal write is one UpdateItem, no transaction
    assert deliver(app, "op-plain", body=body).outcome is Outcome.SUCCEEDED
    assert tables_called(calls) == [("UpdateItem", tables["state"])] * 2


def test_a_parent_that_fails_writes_its_failure_continuation_and_not_the_success_one(app, ledger):
    # Given a credit the provider refuses for good
    operation_id = enqueue(app)
    ledger.fail.append(PermanentError("the partner account is closed"))
    # When it runs
    assert deliver(app, operation_id).outcome is Outcome.FAILED
    # Then only the failure continuation exists, and it is the binding's failure job (the finance note)
    written = requests(app, operation_id)
    assert set(written) == {operation_id, f"{operation_id}:on-failure"}
    assert written[f"{operation_id}:on-failure"]["job_type"]["S"] == "mail.finance-note.v1"


def test_a_failed_write_writes_neither_and_the_retry_writes_both_once(app, ledger, clock, monkeypatch):
    # Given DynamoDB failing the terminal transaction once (throttled): no crash can split parent and child
    operation_id = enqueue(app)
    real = app.clients.dynamodb.transact_write_items
    failures = [ClientError({"Error": {"Code": "ThrottlingException", "Message": "slow down"}}, "TransactWriteItems")]

    def flaky(**kwargs: Any) -> Any:
        if failures:
            raise failures.pop()
        return real(**kwargs)

    monkeypatch.setattr(app.clients.dynamodb, "transact_write_items", flaky)
    # When the delivery cannot record its outcome
    assert deliver(app, operation_id).outcome is Outcome.RETRY
    # Then neither the outcome nor the continuation is written
    assert app.operations.require(operation_id).state is OperationState.IN_PROGRESS
    assert set(requests(app, operation_id)) == {operation_id}
    # And the next delivery (the lease expired; the provider confirms the credit) writes both, once
    clock.advance(60)
    assert deliver(app, operation_id, attempt=2).outcome is Outcome.SUCCEEDED
    assert ledger.credits[operation_id] == 1
    assert set(requests(app, operation_id)) == {operation_id, f"{operation_id}:next"}


def test_a_resettled_parent_keeps_the_continuation_it_wrote_and_says_so(app, ledger):
    # Given a credit that failed (its failure note written), then retried by an operator, failing again
    operation_id = enqueue(app)
    ledger.fail.append(PermanentError("declined"))
    assert deliver(app, operation_id).outcome is Outcome.FAILED
    assert app.operator("cli:alice").retry(operation_id, "the partner reopened the account").applied
    ledger.fail.append(PermanentError("declined again"))
    # When the retry fails too
    assert deliver(app, operation_id, attempt=2).outcome is Outcome.FAILED
    # Then the failure note exists once, and the receipt says it existed already
    assert set(requests(app, operation_id)) == {operation_id, f"{operation_id}:on-failure"}
    operation = app.operations.require(operation_id)
    assert f"continuation {operation_id}:on-failure exists already" in operation.history[-1].reason
    # And the outcome written without it carries the retry's own error, not the first run's
    assert "declined again" in (operation.last_error or ""), operation.last_error


def test_a_cancelled_parent_starts_nothing(app):
    # Given a credit cancelled before it started
    operation_id = enqueue(app)
    assert app.operator("cli:alice").cancel(operation_id, "entered twice").applied
    # When its message arrives anyway
    deliver(app, operation_id)
    # Then no continuation exists
    assert set(requests(app, operation_id)) == {operation_id}


@pytest.mark.parametrize(("outcome", "follows"), [("succeeded", "next"), ("failed", "on-failure")])
def test_an_operators_resolve_writes_the_continuation_of_the_outcome_it_records(app, ledger, clock, outcome, follows):
    # Given a credit UNKNOWN (its response lost, the provider cannot be asked): its failure note is written
    operation_id = enqueue(app)
    ledger.fail.append(TimeoutError("lost"))
    ledger.lookup = False
    assert deliver(app, operation_id).outcome is Outcome.UNKNOWN
    assert set(requests(app, operation_id)) == {operation_id, f"{operation_id}:on-failure"}
    # When the operator resolves it
    done = app.operator("cli:alice").resolve(operation_id, outcome, "checked the ledger")
    # Then the continuation of that outcome exists exactly once
    assert done.applied
    assert continuation_id(operation_id, follows) in requests(app, operation_id)
    if outcome == "succeeded":
        assert set(requests(app, operation_id)) == {operation_id, f"{operation_id}:on-failure", f"{operation_id}:next"}
    else:  # written when it became UNKNOWN: kept, not written twice, and the receipt says so
        assert set(requests(app, operation_id)) == {operation_id, f"{operation_id}:on-failure"}
        assert "exists already" in app.operations.require(operation_id).history[-1].reason


def test_a_continuation_that_cannot_be_built_never_keeps_the_outcome_unrecorded(settings, clock, ledger, capsys):
    # Given a binding whose continuation payload is invalid for the next job
    app = make_app(settings, clock, credit_binding(ledger, then_payload=lambda m: {"user_id": "not a uuid"}))
    operation_id = enqueue(app)
    capsys.readouterr()
    # When it succeeds
    assert deliver(app, operation_id).outcome is Outcome.SUCCEEDED
    # Then the continuation not built is counted once, for the job type
    documents = [json.loads(line) for line in capsys.readouterr().out.splitlines() if '"_aws"' in line]
    counted = [doc for doc in documents if "continuation_not_built" in doc]
    assert [(doc["job_type"], doc["continuation_not_built"]) for doc in counted] == [("ledger.credit.v1", [1.0])], (
        documents
    )
    # And the outcome is recorded, says what was not written with it, and nothing else exists
    operation = app.operations.require(operation_id)
    assert operation.state is OperationState.SUCCEEDED
    assert "not written with it" in operation.history[-1].reason
    assert set(requests(app, operation_id)) == {operation_id}


def test_a_long_parent_id_derives_a_bounded_continuation_id():
    long_id = "x" * 128
    derived = continuation_id(long_id, "next")
    assert len(derived) <= 128 and derived.endswith(":next") and derived == continuation_id(long_id, "next")
    assert continuation_id("op-1", "on-failure") == "op-1:on-failure"


def test_a_continuation_follows_only_a_known_outcome_and_says_which_ones_are():
    with pytest.raises(ValueError) as refused:
        continuation_id("op-1", "on-success")
    assert str(refused.value) == "a continuation follows one of next, on-failure, not 'on-success'"


def test_a_continuation_id_keeps_its_parent_up_to_the_limit_and_a_digest_of_it_past_it():
    import hashlib

    # A parent whose derived id is exactly 128 characters keeps it as it is
    at_limit = "p" * (128 - len(":next"))
    assert continuation_id(at_limit, "next") == f"{at_limit}:next"
    # One character more: the parent's SHA-256 digest, its first 48 hex digits, stands in its place
    past = at_limit + "q"
    assert continuation_id(past, "next") == hashlib.sha256(past.encode()).hexdigest()[:48] + ":next"


def test_a_batch_child_settled_again_without_its_continuation_is_still_counted(
    settings, clock, ledger, batches_table, outcomes
):
    # Given a batch of one credit child whose binding writes a failure note, in a converge with batches
    from converge.model.batches import BatchCallback, BatchChild, BatchState, callback_id

    from .batch_fixtures import batch_bindings, counted

    with_batches = settings.model_copy(update={"batches_table": batches_table})
    _, summary = batch_bindings(outcomes)
    app = make_app(with_batches, clock, credit_binding(ledger), summary)
    child = BatchChild("c-0", "ledger.credit.v1", {"user_id": str(uuid.uuid4())})
    app.enqueue_batch("b-cont", [child], BatchCallback("mail.statement-summary.v1", {"month": "2026-11"}))
    (operation_id,) = [key for key in requests(app, "b-cont::")]
    # And the child UNKNOWN (its failure note written then), resolved by an operator as to retry, then failing
    ledger.fail.append(TimeoutError("lost"))
    ledger.lookup = False
    assert deliver(app, operation_id).outcome is Outcome.UNKNOWN
    assert app.operator("cli:alice").resolve(operation_id, "retry", "the partner says it never arrived").applied
    ledger.fail.append(PermanentError("declined"))
    ledger.lookup = True
    assert deliver(app, operation_id, attempt=2).outcome is Outcome.FAILED
    counted(app)
    # Then its note exists once (the settle was written again without it), and the counter counted the child all
    # the same: the batch is complete, its callback written, with the child counted FAILED
    assert set(requests(app, operation_id)) == {operation_id, f"{operation_id}:on-failure"}
    batch = app.require_batches().require("b-cont")
    assert (batch.state, batch.summary) == (BatchState.COMPLETE, {"FAILED": 1})
    assert callback_id("b-cont") in requests(app, "b-cont")
