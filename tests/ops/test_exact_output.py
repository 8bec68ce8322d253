"""What the commands print is what is stored: at 80 and at 200 columns, with data that looks like markup.

rich reads `:word:` as an emoji code and `[tag]` as markup, and narrow tables cut long cells. Each test
here stores values full of both (and of wide characters), runs the real command at COLUMNS=80 and
COLUMNS=200, and finds every stored value in the output exactly, on one line, uncut.
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from rich.console import Console
from typer.testing import CliRunner

from converge.model.records import Operation
from converge.model.states import OperationState
from converge.runtime import Converge
from converge_cli.commands.demo_run import DemoReport, print_report
from converge_cli.main import app as cli
from converge_cli.support.target import Target
from localcloud import LocalCloud
from tests.conftest import drive_to, local_aws

from .conftest import dead_letter, messages

runner = CliRunner()
WIDTHS = ["80", "200"]
DOCS = "partner-docs.upload.v1"
# Values that rich would rewrite (emoji codes, markup, a closing tag) and wide characters.
HOSTILE = "[bold]x:smile:[/bold] :new: 名前テスト [/]"
REASON = "provider said [red]no[/red] :fire: for 顧客 [link=http://x]here[/link]"


@pytest.fixture(scope="module")
def cloud() -> Iterator[LocalCloud]:
    with pytest.MonkeyPatch.context() as patch:
        local_aws(patch)
        with LocalCloud.start() as local:
            yield local


@pytest.fixture
def deployed(cloud: LocalCloud) -> Converge:
    sqs = cloud.client("sqs")
    for output in ("CriticalDlqUrl", "DefaultDlqUrl", "BulkDlqUrl"):
        for message in messages(cloud.outputs[output], hide=30):
            sqs.delete_message(QueueUrl=cloud.outputs[output], ReceiptHandle=message["ReceiptHandle"])
    return Target(stack="converge").converge


def run(width: str, *args: str) -> Any:
    result = runner.invoke(cli, list(args), env={"COLUMNS": width})
    assert result.exit_code == 0, result.output
    return result


def hostile_operation(converge: Converge, state: OperationState, tag: str) -> Operation:
    """An operation whose id is made of emoji codes, with a payload and reasons full of markup."""
    # A long id of nothing but emoji-code-looking words: cut or rewritten, it could not be copied back.
    operation_id = f"order:new:{tag}:ok:" + uuid.uuid4().hex + ":smile:" + "x" * 40
    # Written raw, as any producer may: the identifier types would refuse markup in a payload at enqueue,
    # but what a producer wrote is stored as written and must still print literally.
    payload = {"partner_id": "p:new:1", "upload_id": HOSTILE}
    converge.clients.dynamodb.put_item(
        TableName=converge.settings.jobs_table,
        Item={
            "operation_id": {"S": operation_id},
            "job_type": {"S": DOCS},
            "payload": {"M": {key: {"S": value} for key, value in payload.items()}},
            "correlation_id": {"S": f"corr:ok:{tag}"},
        },
    )
    admitted = converge.operations.require(operation_id)
    return drive_to(converge.operations, admitted, state, attempts=2, error=f"{REASON} ({tag})")


def lines_of(text: str) -> list[str]:
    return [line.rstrip() for line in text.splitlines()]


def on_one_line(value: str, output: str) -> bool:
    return any(value in line for line in lines_of(output))


@pytest.mark.parametrize("width", WIDTHS)
def test_ops_show_prints_ids_payload_and_reasons_as_stored(deployed, width):
    # Given a FAILED operation with an emoji-code id, a markup payload and a markup reason
    failed = hostile_operation(deployed, OperationState.FAILED, f"show{width}")
    # When it is shown at this width
    output = run(width, "ops", "show", failed.operation_id).stdout
    # Then every stored value is there, whole and on one line: nothing interpreted, nothing cut
    stored = deployed.operations.require(failed.operation_id)
    for value in (
        stored.operation_id,
        stored.job_type,
        stored.correlation_id,
        stored.last_error,
        json.dumps(stored.payload, sort_keys=True, ensure_ascii=False),
        *(entry.reason for entry in stored.history),
        *(entry.at for entry in stored.history),
    ):
        assert on_one_line(str(value), output), (value, output)
    assert "😄" not in output and "🆕" not in output and "🔥" not in output


@pytest.mark.parametrize("width", WIDTHS)
def test_ops_list_never_cuts_an_id_or_a_job_type(deployed, width):
    # Given UNKNOWN operations with long emoji-code ids
    unknown = [hostile_operation(deployed, OperationState.UNKNOWN, f"list{width}{n}") for n in range(2)]
    # When the attention list is printed at this width
    output = run(width, "ops", "list", "--state", "UNKNOWN", "--job-type", DOCS, "--limit", "1000").stdout
    # Then each id, its job type and its error appear whole, as stored
    for operation in unknown:
        assert on_one_line(operation.operation_id, output), output
    assert on_one_line(DOCS, output) and on_one_line(REASON, output), output
    assert "…" not in output and "😄" not in output
    # And what is printed round-trips: an id copied from the screen finds the operation
    copied = next(line for line in lines_of(output) if unknown[0].operation_id in line)
    token = next(word for word in copied.replace("│", " ").split() if word == unknown[0].operation_id)
    assert run(width, "ops", "show", token, "--json").stdout


@pytest.mark.parametrize("width", WIDTHS)
def test_toggles_and_jobs_list_print_whole_names(deployed, width):
    # When the toggles and the job types are listed at this width
    toggles = run(width, "toggles", "list").stdout
    jobs = run(width, "jobs", "list").stdout
    # Then every job type and full parameter name is there, uncut
    for row in json.loads(run(width, "toggles", "list", "--json").stdout):
        assert on_one_line(row["job_type"], toggles) and on_one_line(row["parameter"], toggles), toggles
    for row in json.loads(run(width, "jobs", "list", "--json").stdout):
        assert on_one_line(row["job_type"], jobs) and on_one_line(row["toggle_parameter"], jobs), jobs
    assert "…" not in toggles + jobs


@pytest.mark.parametrize("width", WIDTHS)
def test_dlq_list_and_show_print_messages_as_stored(deployed, cloud, width):
    # Given a dead letter of a hostile operation, with a markup reason attribute
    dlq = cloud.outputs["DefaultDlqUrl"]
    failed = hostile_operation(deployed, OperationState.FAILED, f"dlq{width}")
    dead_letter(dlq, failed, error_reason=REASON)
    [message] = messages(dlq)
    # When the DLQ is listed and the message shown at this width
    listed = run(width, "dlq", "list", "--queue", "default").stdout
    shown = run(width, "dlq", "show", message["MessageId"]).stdout
    # Then ids and the reason are whole in the listing, and the body is exactly the stored one
    for value in (message["MessageId"], failed.operation_id, REASON):
        assert on_one_line(value, listed), listed
    assert on_one_line(message["Body"], shown) and on_one_line(REASON, shown)
    assert "😄" not in listed + shown


@pytest.mark.parametrize("width", WIDTHS)
def test_the_demo_report_names_every_state_and_job_type_in_full(width):
    # Given a report with long job types and every state column
    report = DemoReport(
        job_types={
            "email.partner-verification.v1": Counter(accepted=3, succeeded=1, noop=2),
            "ledger.partner-benefits.v1": Counter(accepted=1, succeeded=1, resumed=1),
            "email.no-such-job.v1": Counter(accepted=1, rejected=1),
        },
        effects={"ses": 2},
    )
    # When it is printed at this width (as `converge demo` prints it when piped)
    console = Console(width=int(width), markup=False, emoji=False, highlight=False, record=True)
    with console.capture() as captured:
        print_report(console, report)
    output = captured.get()
    # Then the job types are whole, and "resumed" and "rejected" cannot be mistaken for each other
    for name in [*report.job_types, "resumed", "rejected", "succeeded"]:
        assert on_one_line(name, output), output
    assert "…" not in output


@pytest.mark.parametrize("width", WIDTHS)
def test_ops_list_of_any_state_by_correlation_id_prints_whole_values(deployed, width):
    # Given a SUCCEEDED operation (no index lists it) with an emoji-code id and correlation id
    settled = hostile_operation(deployed, OperationState.SUCCEEDED, f"scan{width}")
    # When SUCCEEDED operations of its correlation id from the last hour are listed at this width
    args = ["ops", "list", "--state", "succeeded", "--correlation-id", f"corr:ok:scan{width}", "--since", "1h"]
    output = run(width, *args).stdout
    # Then it is there whole, and the output says the listing was a scan
    assert on_one_line(settled.operation_id, output), output
    assert on_one_line(DOCS, output) and "SUCCEEDED" in output
    assert "no index serves this listing" in output and "🆕" not in output
    # And the JSON page holds it with its correlation id, and says where it came from
    page = json.loads(run(width, *args, "--json").stdout)
    assert [(row["operation_id"], row["correlation_id"]) for row in page["operations"]] == [
        (settled.operation_id, f"corr:ok:scan{width}")
    ]
    assert page["source"] == "scan" and page["evaluated"] >= 1


@pytest.mark.parametrize("width", WIDTHS)
def test_ops_retry_prints_the_id_as_stored(deployed, width):
    # Given a FAILED operation with an emoji-code id
    failed = hostile_operation(deployed, OperationState.FAILED, f"retry{width}")
    # When it is retried at this width
    output = runner.invoke(
        cli, ["ops", "retry", failed.operation_id, "--reason", "[b]fixed[/b] :ok:", "--yes"], env={"COLUMNS": width}
    )
    # Then the line names the id whole, and the receipt keeps the reason literally
    assert output.exit_code == 0, output.output
    assert on_one_line(f"{failed.operation_id} retried: sent again with the same identity", output.stdout)
    assert on_one_line("FAILED -> ACCEPTED", output.stdout)
    reasons = [entry.reason for entry in deployed.operations.require(failed.operation_id).history]
    assert any(reason.endswith(": [b]fixed[/b] :ok:") for reason in reasons)
