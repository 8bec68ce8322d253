"""docs/signals.md: its examples run as written, over moto, with fake providers that count.

The page's Python blocks run in order in one namespace (the first declares the job, the next enqueues it, waits,
signals and resumes it); its bash block is the operator's `converge signal`, read for its arguments and sent through
the same call the CLI's command makes, to the page's operation waiting for its approval; its http block is a request
to the enqueue API's signal route, handed to the function as API Gateway hands it (its caller the operation's), its
answer compared with the block's.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import boto3
import pytest

from converge.api.routes import HttpApp
from converge.api.signals import SignalApi
from converge.flow.pipeline import Delivery
from converge.flow.registry import Registry
from converge.model.submission import SignalSubmission, Submission
from converge.runtime import Converge
from converge.runtime.clients import Clients
from tests.readme.blocks import blocks

from .test_signal_items import producer_table

PAGE = Path(__file__).resolve().parents[2] / "docs" / "signals.md"


class Ledger:
    def __init__(self) -> None:
        self.credits: list[str] = []

    def credit(self, key: str, credit_id: str) -> str:
        self.credits.append(credit_id)
        return f"tx-{len(self.credits)}"


class Mail:
    def __init__(self) -> None:
        self.asked: list[str] = []
        self.told: list[tuple[str, str]] = []

    def ask_operator(self, credit_id: str) -> None:
        self.asked.append(credit_id)

    def tell(self, partner_id: str, what: str) -> None:
        self.told.append((partner_id, what))


class NoJobRoutes:
    """The job routes' part, which a signal request never reaches (but for the invocation's context)."""

    def register_context(self, context: Any) -> None:
        pass


def python_blocks() -> list[str]:
    return [block.text for block in blocks(PAGE) if block.language == "python"]


@pytest.fixture
def page(settings) -> dict[str, Any]:
    """The page's namespace after its first block, with a converge that runs the job it declares."""
    namespace: dict[str, Any] = {"LEDGER": Ledger(), "MAIL": Mail()}
    exec(compile(python_blocks()[0], f"{PAGE.name}: the job", "exec", dont_inherit=True), namespace)
    app = Converge(
        settings,
        registry=Registry(namespace["BINDINGS"]),
        clients=Clients(dynamodb=boto3.client("dynamodb"), sqs=boto3.client("sqs"), ssm=boto3.client("ssm")),
    )
    attempts: dict[str, int] = {}

    def deliver(operation_id: str) -> Any:
        attempts[operation_id] = attempts.get(operation_id, 0) + 1
        body = app.dispatcher.envelope_for(app.operations.require(operation_id)).to_body()
        return app.pipeline.process(body, Delivery(f"m-{attempts[operation_id]}", 1, 5, lambda: 30_000))

    namespace.update(app=app, deliver=deliver)
    return namespace


def test_the_page_has_the_examples_this_test_runs():
    assert [block.language for block in blocks(PAGE)] == ["python", "python", "bash", "http", "python"]


def test_the_approval_example_credits_once_and_a_later_signal_is_answered_ended(page, settings):
    # Given the page's job (its three-day timeout would need a one-time schedule, which these settings have no group
    # for: its message is sent at once instead, which the signal comes before anyway)
    page["app"].delays.send = lambda outgoing, run_at: page["app"].dispatcher.send_one(outgoing)
    # When its second example runs, Then every assertion it makes holds
    exec(compile(python_blocks()[1], f"{PAGE.name}: send a signal", "exec", dont_inherit=True), page)
    # And the operator was asked once, the partner credited once and told once
    assert page["MAIL"].asked == ["cr-4711"] and page["LEDGER"].credits == ["cr-4711"]
    receipt = page["app"].operations.require("credit-4711", steps=True).to_json()
    approval = next(step for step in receipt["steps"] if step["name"] == "approval")
    assert (approval["policy"], approval["note"]) == ("wait_for", "resumed by signal 'ap-1'")


def test_the_command_line_example_sends_the_signal_it_names(page):
    # Given the page's operation waiting for its approval
    app = page["app"]
    app.delays.send = lambda outgoing, run_at: None  # its timeout's message: not needed here
    app.enqueue("ledger.approved-credit.v1", "credit-4711", {"partner_id": "p-2001", "credit_id": "cr-4711"})
    assert page["deliver"]("credit-4711").outcome.value == "waiting"
    # When the page's command is read and sent as the CLI sends it
    [command] = [block.text for block in blocks(PAGE) if block.language == "bash"]
    words = shlex.split(command)
    assert words[:4] == ["converge", "signal", "credit-4711", "approval"]
    payload = json.loads(words[words.index("--payload") + 1])
    signal_id = words[words.index("--signal-id") + 1]
    receipt = app.signals.send(SignalSubmission(words[2], words[3], payload, signal_id, sent_by="cli:docs"))
    # Then it is kept and wakes the operation, which resumes credited
    assert (receipt.answer.value, receipt.woke) == ("accepted", True)
    assert page["deliver"]("credit-4711").outcome.value == "succeeded"
    assert page["LEDGER"].credits == ["cr-4711"]


def test_the_http_example_is_the_routes_request_and_answer(page):
    # Given the page's operation, enqueued by a service over the API (its caller), waiting for its approval
    app, caller = page["app"], "arn:aws:iam::123456789012:role/partner-portal"
    app.delays.send = lambda outgoing, run_at: None  # its timeout's message: not needed here
    payload = {"partner_id": "p-2001", "credit_id": "cr-4711"}
    app.admit(Submission("ledger.approved-credit.v1", "credit-4711", payload, None, submitted_by=caller))
    assert page["deliver"]("credit-4711").outcome.value == "waiting"
    # When the page's request is handed to the API's function as API Gateway would, signed by that caller
    [example] = [block.text for block in blocks(PAGE) if block.language == "http"]
    request, response = example.split("\n\nHTTP/1.1 ")
    request_line, body = request.split("\n\n")
    method, path = request_line.splitlines()[0].split()
    _, operations, operation_id, signals, name = path.split("/")
    assert (method, operations, signals) == ("POST", "operations", "signals")
    event = {
        "routeKey": "POST /operations/{operation_id}/signals/{name}",
        "pathParameters": {"operation_id": operation_id, "name": name},
        "headers": {"content-type": "application/json"},
        "body": body,
        "requestContext": {"authorizer": {"iam": {"userArn": caller}}},
    }
    routes = HttpApp(NoJobRoutes(), signals=lambda: SignalApi(app.signals, app.operations))  # type: ignore[arg-type]
    answered = routes.handle(event, None)
    # Then the answer is the page's, status and body, and the operation resumes credited
    status, shown = response.split("\n", 1)[0], json.loads(response.rsplit("\n\n", 1)[1])
    assert (answered["statusCode"], json.loads(answered["body"])) == (int(status.split()[0]), shown)
    assert page["deliver"]("credit-4711").outcome.value == "succeeded"
    assert page["LEDGER"].credits == ["cr-4711"]


def test_the_transaction_example_signals_with_the_producers_own_write_and_the_answer_is_recorded(page):
    # Given the page's first approval credited (its second example), and the producer's own table
    page["app"].delays.send = lambda outgoing, run_at: page["app"].dispatcher.send_one(outgoing)
    exec(compile(python_blocks()[1], f"{PAGE.name}: send a signal", "exec", dont_inherit=True), page)
    dynamodb = producer_table("approvals")
    written: list[str] = []

    def relay() -> None:
        """The relay fed the stream record of each signal item the page wrote (INSERT), as the stream carries it."""
        table = page["app"].settings.jobs_table
        items = [i for i in dynamodb.scan(TableName=table)["Items"] if "::signal:" in i["operation_id"]["S"]]
        records = [{"eventName": "INSERT", "dynamodb": {"NewImage": i, "SequenceNumber": "1"}} for i in items]
        written.extend(item["operation_id"]["S"] for item in items)
        assert page["app"].relay.handle({"Records": records}) == {"batchItemFailures": []}

    page.update(dynamodb=dynamodb, relay=relay)
    # When its transaction example runs, Then every assertion it makes holds
    exec(compile(python_blocks()[2], f"{PAGE.name}: in a transaction", "exec", dont_inherit=True), page)
    # And the producer's own write committed with the signal item, which the relay read once
    assert dynamodb.get_item(TableName="approvals", Key={"pk": {"S": "credit#cr-4712"}})["Item"]["decision"]["S"] == (
        "approved"
    )
    assert written == ["credit-4712::signal:approval:ap-3"]
    assert page["MAIL"].told == [("p-2001", "credited"), ("p-2001", "credited")]
