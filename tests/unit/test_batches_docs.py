"""docs/batches.md: its examples run as written, over moto, with a fake mail provider that counts.

The page's Python blocks run in order in one namespace (the jobs, the admission, following the batch, the batch
once complete), with `converge`'s runtime the test's own; between them the test delivers the children (one
statement fails) and, at the end, the callback. The bash blocks (the operator's listing of the failed
children, the batch's cancel, the listing of batches that need attention) are read for their arguments and
answered by the same functions the CLI's commands call.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import boto3
import pytest

import converge
from converge.flow.pipeline import Delivery
from converge.flow.registry import Registry
from converge.model.errors import PermanentError
from converge.model.states import OperationState
from converge.runtime import Converge
from converge.runtime.clients import Clients
from tests.readme.blocks import blocks
from tests.unit.batch_fixtures import counted

PAGE = Path(__file__).resolve().parents[2] / "docs" / "batches.md"


class Mail:
    def __init__(self) -> None:
        self.statements: list[tuple[str, str]] = []
        self.summaries: list[tuple[str, int, int]] = []
        self.bounces = {"p-2002"}

    def send_statement(self, partner_id: str, month: str) -> None:
        if partner_id in self.bounces:
            raise PermanentError(f"no address on file for {partner_id}")
        self.statements.append((partner_id, month))

    def send_summary(self, month: str, sent: int, failed: int) -> None:
        self.summaries.append((month, sent, failed))


def python_blocks() -> list[str]:
    return [block.text for block in blocks(PAGE) if block.language == "python"]


def run_block(index: int, namespace: dict[str, Any], what: str) -> None:
    exec(compile(python_blocks()[index], f"{PAGE.name}: {what}", "exec", dont_inherit=True), namespace)


@pytest.fixture
def page(settings, batches_table, monkeypatch) -> dict[str, Any]:
    """The page's namespace after its first block, and `converge`'s runtime a converge that runs its jobs."""
    namespace: dict[str, Any] = {"MAIL": Mail()}
    run_block(0, namespace, "the jobs")
    app = Converge(
        settings.model_copy(update={"batches_table": batches_table}),
        registry=Registry(namespace["BINDINGS"]),
        clients=Clients(dynamodb=boto3.client("dynamodb"), sqs=boto3.client("sqs"), ssm=boto3.client("ssm")),
    )
    monkeypatch.setattr(converge, "_runtime", lambda: app)
    for toggle in ("billing.partner-statement", "billing.statements-sent"):
        boto3.client("ssm").put_parameter(Name=f"/converge/test/toggles/{toggle}", Value="on", Type="String")

    def deliver(operation_id: str) -> Any:
        body = app.dispatcher.envelope_for(app.operations.require(operation_id)).to_body()
        return app.pipeline.process(body, Delivery(f"m-{operation_id}", 1, 5, lambda: 30_000))

    namespace.update(app=app, deliver=deliver)
    return namespace


def test_the_page_has_the_examples_this_test_runs():
    assert len(python_blocks()) == 4
    assert [block.language for block in blocks(PAGE)] == [
        "python",
        "python",
        "python",
        "bash",
        "python",
        "bash",
        "bash",
    ]


def test_the_statements_batch_runs_each_child_once_and_its_callback_once_with_the_counts(page, capsys):
    app, deliver, mail = page["app"], page["deliver"], page["MAIL"]
    # When the page admits its batch (twice: the second writes nothing)
    run_block(1, page, "the admission")
    batch = converge.get_batch("statements-2026-11")
    children = [batch.child_id(position, partner) for position, partner in enumerate(("p-2001", "p-2002", "p-2003"))]
    # and its children are delivered, one of them twice (a redelivery), one failing for good
    outcomes = [deliver(child).outcome.value for child in [*children, children[0]]]
    assert outcomes == ["succeeded", "failed", "succeeded", "duplicate_skipped"]
    counted(app)  # the batch counter reads the state table's stream, as its function does on AWS
    # Then following it shows every child final, counted once
    run_block(2, page, "following it")
    assert "complete 3/3 final" in capsys.readouterr().out
    # and the operator's command lists the failed child
    show, cancel, attention = [block.text for block in blocks(PAGE) if block.language == "bash"]
    words = shlex.split(show)
    assert words[:3] == ["converge", "batches", "show"] and "--failed" in words
    batches = app.require_batches()
    shown = batches.require(words[3])
    assert list(batches.children(shown, app.operations.state, only=OperationState.FAILED)) == [(children[1], "FAILED")]
    # and the batch is complete, its callback written once with the summary
    run_block(3, page, "the batch once complete")
    callback = app.operations.require("statements-2026-11::callback")
    assert callback.payload == {
        "month": "2026-11",
        "batch_id": "statements-2026-11",
        "batch_total": 3,
        "batch_succeeded": 2,
        "batch_noop": 0,
        "batch_failed": 1,
        "batch_rejected": 0,
        "batch_cancelled": 0,
        "batch_expired": 0,
    }
    # When the callback runs (and a copy of it arrives again)
    assert deliver("statements-2026-11::callback").outcome.value == "succeeded"
    assert deliver("statements-2026-11::callback").outcome.value == "duplicate_skipped"
    # Then the statements went once each and the summary once, with the counts
    assert sorted(mail.statements) == [("p-2001", "2026-11"), ("p-2003", "2026-11")]
    assert mail.summaries == [("2026-11", 2, 1)]
    # And the page's cancel, once every child is final, cancels nothing and writes no second callback
    words = shlex.split(cancel)
    assert words[:4] == ["converge", "batches", "cancel", "statements-2026-11"]
    done = app.cancel_batch(words[3], words[words.index("--reason") + 1], "cli:docs")
    assert (done.cancelled, done.too_late, done.callback_written) == (0, 3, False)
    # And the listing of batches that need attention lists none: this one is complete
    assert shlex.split(attention) == ["converge", "batches", "list", "--attention"]
    assert batches.table.batches(50, None, listed_only=True) == ([], None)
