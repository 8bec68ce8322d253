"""docs/steps-and-continuations.md: its examples run as written, over moto, with fake providers that count.

The page's Python blocks run in order in one namespace (the first declares the job, the next enqueues and
delivers it); its bash block is the operator's resolve, read for its arguments and taken through the same
operator action the CLI's command calls, on an operation made UNKNOWN at the step it names.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import boto3
import pytest

from converge.flow.pipeline import Delivery
from converge.flow.registry import Registry
from converge.model.errors import TransientError
from converge.runtime import Converge
from converge.runtime.clients import Clients
from tests.readme.blocks import blocks

PAGE = Path(__file__).resolve().parents[2] / "docs" / "steps-and-continuations.md"


class Renderer:
    def render(self, cv_id: str) -> bytes:
        return f"%PDF {cv_id}".encode()


class Storage:
    def __init__(self) -> None:
        self.puts = 0

    def put(self, cv_id: str, body: bytes) -> str:
        self.puts += 1
        return f"cv/{cv_id}.pdf"


class Payments:
    def __init__(self) -> None:
        self.keys: dict[str, int] = {}
        self.charges = 0

    def charge(self, key: str, cv_id: str) -> str:
        self.charges += 1
        self.keys[key] = self.keys.get(key, 0) + 1
        return f"ch-{self.charges}"

    def charged(self, key: str) -> bool:
        return key in self.keys


class Mail:
    def __init__(self) -> None:
        self.sent = 0
        self.fail_next = False

    def send_link(self, cv_id: str, key: str) -> str:
        if self.fail_next:
            self.fail_next = False
            raise TransientError("the mail provider timed out before sending")
        self.sent += 1
        return f"msg-{self.sent}"


def python_blocks() -> list[str]:
    return [block.text for block in blocks(PAGE) if block.language == "python"]


@pytest.fixture
def page(settings) -> dict[str, Any]:
    """The page's namespace after its first block, with a converge that runs the job it declares."""
    namespace: dict[str, Any] = {
        "RENDERER": Renderer(),
        "STORAGE": Storage(),
        "PAYMENTS": Payments(),
        "MAIL": Mail(),
    }
    exec(compile(python_blocks()[0], f"{PAGE.name}: the job", "exec", dont_inherit=True), namespace)
    dynamodb = boto3.client("dynamodb")
    app = Converge(
        settings,
        registry=Registry(namespace["BINDINGS"]),
        clients=Clients(dynamodb=dynamodb, sqs=boto3.client("sqs"), ssm=boto3.client("ssm")),
    )
    attempts: dict[str, int] = {}

    def deliver(operation_id: str) -> Any:
        attempts[operation_id] = attempts.get(operation_id, 0) + 1
        operation = app.operations.require(operation_id)
        body = app.dispatcher.envelope_for(operation).to_body()
        return app.pipeline.process(body, Delivery(f"m-{operation_id}", attempts[operation_id], 5, lambda: 30_000))

    namespace.update(app=app, deliver=deliver)
    return namespace


def test_the_page_has_the_examples_this_test_runs():
    assert len(python_blocks()) == 4
    assert [block.language for block in blocks(PAGE)] == ["python", "python", "bash", "python", "python"]


def test_the_job_of_three_steps_runs_each_effect_once_and_a_retry_runs_none_again(page):
    # Given the job the page declares, When its second example runs (a failed e-mail, then the retry),
    # Then every assertion it makes holds
    exec(compile(python_blocks()[1], f"{PAGE.name}: a retry", "exec", dont_inherit=True), page)
    # And the providers saw one object stored, one charge (by the step's key) and one e-mail
    assert page["PAYMENTS"].keys == {"publish-cv-42:charge": 1}
    assert (page["STORAGE"].puts, page["MAIL"].sent) == (1, 1)


def test_the_resolve_example_settles_the_step_it_names(page, monkeypatch):
    # Given the page's job made UNKNOWN at its charge: the delivery died after charging, the provider cannot say
    app, payments = page["app"], page["PAYMENTS"]
    app.enqueue("cv.publish.v1", "publish-cv-42", {"cv_id": "cv-42"})
    real_charge = payments.charge

    def charge_then_die(key: str, cv_id: str) -> str:
        real_charge(key, cv_id)
        raise KeyboardInterrupt  # the worker's process dies: no marker, the lease kept

    monkeypatch.setattr(payments, "charge", charge_then_die)
    with pytest.raises(KeyboardInterrupt):
        page["deliver"]("publish-cv-42")
    monkeypatch.setattr(payments, "charged", lambda key: (_ for _ in ()).throw(RuntimeError("no lookup API")))
    assert app.operations.require("publish-cv-42").state_record.lease_owner  # the dead worker's lease, kept
    boto3.client("dynamodb").update_item(  # and expired
        TableName=app.settings.state_table,
        Key={"operation_id": {"S": "publish-cv-42"}},
        UpdateExpression="SET lease_until = :gone",
        ExpressionAttributeValues={":gone": {"N": "0"}},
    )
    unknown = page["deliver"]("publish-cv-42")
    assert unknown.outcome.value == "unknown" and "step 'charge'" in unknown.reason
    # When the operator runs the page's command
    [command] = [block.text for block in blocks(PAGE) if block.language == "bash"]
    words = shlex.split(command)
    assert words[:4] == ["converge", "ops", "resolve", "publish-cv-42"]
    outcome, reason = words[words.index("--as") + 1], words[words.index("--reason") + 1]
    done = app.operator("cli:docs").resolve("publish-cv-42", outcome, reason)
    # Then the step is recorded done and the operation carries on after it: the e-mail goes, no second charge
    assert done.applied and "step 'charge' resolved as succeeded" in done.message
    assert page["deliver"]("publish-cv-42").outcome.value == "succeeded"
    assert payments.keys == {"publish-cv-42:charge": 1} and page["MAIL"].sent == 1


class Counting:
    """A runner that counts its effects (the credit, the notice)."""

    def __init__(self) -> None:
        self.done: list[str] = []

    def load(self, message: Any, ctx: Any) -> str:
        return "ready"

    def run(self, message: Any, loaded: str, ctx: Any) -> None:
        self.done.append(ctx.operation_id)

    def confirm(self, message: Any, ctx: Any) -> Any:
        raise AssertionError("not asked on the happy path")


def test_the_continuation_example_notifies_the_partner_once_after_the_credit(settings):
    # Given the page's two bindings, the credit naming the notice that follows it
    credit, notice = Counting(), Counting()
    namespace: dict[str, Any] = {"CREDIT_RUNNER": credit, "NOTICE_RUNNER": notice}
    exec(compile(python_blocks()[3], f"{PAGE.name}: continuations", "exec", dont_inherit=True), namespace)
    app = Converge(
        settings,
        registry=Registry(namespace["BINDINGS"]),
        clients=Clients(dynamodb=boto3.client("dynamodb"), sqs=boto3.client("sqs"), ssm=boto3.client("ssm")),
    )
    boto3.client("ssm").put_parameter(Name="/converge/test/toggles/ledger.credit-partner", Value="on", Type="String")
    app.enqueue("ledger.credit-partner.v1", "credit-9", {"partner_id": "p-2001"})

    def deliver(operation_id: str) -> Any:
        body = app.dispatcher.envelope_for(app.operations.require(operation_id)).to_body()
        return app.pipeline.process(body, Delivery(f"m-{operation_id}", 1, 5, lambda: 30_000))

    # When the credit runs, then the request its settle wrote is delivered (twice: a redelivery)
    assert deliver("credit-9").outcome.value == "succeeded"
    assert deliver("credit-9:next").outcome.value == "succeeded"
    assert deliver("credit-9:next").outcome.value == "duplicate_skipped"
    # Then the partner was credited once and notified once, and the two receipts link
    assert (credit.done, notice.done) == (["credit-9"], ["credit-9:next"])
    child = app.operations.require("credit-9:next", steps=True).to_json()
    assert (child["payload"], child["parent_id"]) == ({"partner_id": "p-2001"}, "credit-9")
    parent = app.operations.require("credit-9", steps=True).to_json()
    assert parent["continuations"] == [{"operation_id": "credit-9:next", "follows": "next", "state": "SUCCEEDED"}]


def test_the_wait_example_resumes_after_three_days_and_sends_the_last_call_once(settings):
    # Given the page's reminder runner, bound as a job
    from converge.flow.registry import JobBinding, Policy, Queue
    from converge.model.clock import FakeClock

    from .conftest import Notice

    class Mailbox:
        def __init__(self) -> None:
            self.sent: list[str] = []

        def send(self, user_id: Any, what: str) -> str:
            self.sent.append(what)
            return what

    class Replies:
        def replied(self, user_id: Any) -> bool:
            return False

    namespace: dict[str, Any] = {}
    exec(compile(python_blocks()[2], f"{PAGE.name}: a wait", "exec", dont_inherit=True), namespace)
    mailbox, clock = Mailbox(), FakeClock()
    binding = JobBinding(
        "mail.remind.v1",
        Notice,
        lambda: namespace["RemindRunner"](mailbox, Replies()),
        Queue.DEFAULT,
        Policy.EFFECT_THEN_CLAIM,
    )
    app = Converge(
        settings,
        registry=Registry([binding]),
        clients=Clients(dynamodb=boto3.client("dynamodb"), sqs=boto3.client("sqs"), ssm=boto3.client("ssm")),
        clock=clock,
    )
    app.enqueue("mail.remind.v1", "remind-1", {"user_id": "2c9d6c2e-8f5e-4c43-9a51-0d2b9d0c1f00"})

    def deliver(n: int) -> str:
        body = app.dispatcher.envelope_for(app.operations.require("remind-1")).to_body()
        return app.pipeline.process(body, Delivery(f"m-{n}", 1, 5, lambda: 30_000)).outcome.value

    # When it runs, waits, and is delivered again after three days
    assert deliver(1) == "waiting"
    assert app.operations.require("remind-1").to_json()["waiting"] == "three-days"
    clock.advance(3 * 24 * 3600)
    assert deliver(2) == "succeeded"
    # Then the reminder went once and the last call once
    assert mailbox.sent == ["reminder", "last call"]
