"""`converge batches show` and `converge batches list` on the local cloud: a batch's children run by the deployed
workers (counted under their own roles' grants), its progress, counts and callback as an operator sees them."""

from __future__ import annotations

import json

import boto3
import pytest
from typer.testing import CliRunner

from catalogue import BINDINGS
from converge.flow.registry import JobBinding, Policy, Queue, Registry
from converge.model.batches import BatchCallback, BatchChild
from converge.runtime import Converge
from converge.runtime.clients import Clients
from converge.screening.identifiers import Identifier
from converge.screening.message import JobMessage
from converge.screening.summary import BatchSummary
from converge_cli.main import app
from localcloud import LocalCloud
from localcloud.outputs import settings_from_outputs
from tests.conftest import local_aws

runner = CliRunner()


class ResetsSent(BatchSummary):
    campaign: Identifier


class Preview(JobMessage):
    user_id: Identifier


@pytest.fixture
def cloud(monkeypatch):
    local_aws(monkeypatch)
    with LocalCloud.start() as local:
        yield local


def producer(cloud) -> Converge:
    """A producer whose registry holds the reference jobs and a callback that takes a batch's summary."""
    summary = JobBinding("test.resets-sent.v1", ResetsSent, lambda: None, Queue.DEFAULT, Policy.EFFECT_THEN_CLAIM)
    preview = JobBinding("test.preview.v1", Preview, lambda: None, Queue.DEFAULT, Policy.EFFECT_THEN_CLAIM)
    registry = Registry([*BINDINGS, summary, preview])
    clients = Clients(dynamodb=boto3.client("dynamodb"), sqs=boto3.client("sqs"), ssm=boto3.client("ssm"))
    return Converge(settings_from_outputs(cloud.outputs), registry=registry, clients=clients)


def test_show_and_list_a_batch_before_and_after_its_children_run(cloud, monkeypatch):
    # Given a batch of three password-reset e-mails and one job the deployment does not know (its relay rejects it),
    # admitted and not yet run
    monkeypatch.setenv("COLUMNS", "200")
    users = ["u-1001", "u-1002", "u-1003"]
    children = [BatchChild(user, "email.password-reset.v1", {"user_id": user}) for user in users]
    children.append(BatchChild("preview", "test.preview.v1", {"user_id": "u-1001"}))
    producer(cloud).enqueue_batch("resets-1", children, BatchCallback("test.resets-sent.v1", {"campaign": "c-7"}))
    # When an operator shows it
    before = runner.invoke(app, ["batches", "show", "resets-1", "--json"])
    assert before.exit_code == 0, before.output
    view = json.loads(before.output)
    # Then it is open, nothing final yet, no callback
    assert (view["state"], view["total"], view["final"], view["callback"]["state"]) == ("open", 4, 0, None)
    assert view["callback"]["operation_id"] == "resets-1::callback"
    listed = json.loads(runner.invoke(app, ["batches", "list", "--json"]).output)["batches"]
    assert [(row["batch_id"], row["state"], row["final"]) for row in listed] == [("resets-1", "open", 0)]
    # When the deployed relay and workers run its children
    cloud.drain()
    # Then every child is counted by its worker's terminal write (the unknown one by the relay's refusal), and the
    # callback's request was written once
    after = json.loads(runner.invoke(app, ["batches", "show", "resets-1", "--json"]).output)
    assert after["state"] == "complete" and after["final"] == 4
    assert after["counts"]["REJECTED"] == 1 and sum(after["callback"]["counts"].values()) == 4
    assert after["callback"]["state"] is not None
    # and the table shows the progress bar and the callback
    shown = runner.invoke(app, ["batches", "show", "resets-1"])
    assert shown.exit_code == 0, shown.output
    assert "4/4 (100%)" in shown.output and "resets-1::callback" in shown.output
    # and the list holds it
    listed = json.loads(runner.invoke(app, ["batches", "list", "--json"]).output)
    rows = [(row["batch_id"], row["state"], row["total"], row["final"]) for row in listed["batches"]]
    assert rows == [("resets-1", "complete", 4, 4)]
    table = runner.invoke(app, ["batches", "list"])
    assert "resets-1" in table.output and "complete" in table.output
    # and asking for its completion again writes nothing
    again = json.loads(runner.invoke(app, ["batches", "complete", "resets-1", "--json"]).output)
    assert again == {"batch_id": "resets-1", "callback_written": False, "state": "complete"}
    # and cancelling it now cancels nothing (every child is final), and says so
    late = runner.invoke(app, ["batches", "cancel", "resets-1", "--reason", "too late", "--json"])
    assert late.exit_code == 0, late.output
    assert json.loads(late.output) == {"batch_id": "resets-1", "cancelled": 0, "too_late": 4, "callback_written": False}


def test_show_of_an_unknown_batch_is_a_clear_error(cloud):
    result = runner.invoke(app, ["batches", "show", "no-such-batch"])
    assert result.exit_code != 0
    assert "no-such-batch" in result.output and "Traceback" not in result.output


def test_enqueue_admits_a_batch_from_a_file_once_and_refuses_bad_lines_clearly(cloud, tmp_path):
    # Given children in a JSON-lines file, and a callback the reference catalogue has (any job; its message
    # must take the summary, which the reference jobs' do not)
    lines = [
        json.dumps({"key": u, "job_type": "email.password-reset.v1", "payload": {"user_id": u}}) for u in ("u-1", "u-2")
    ]
    children = tmp_path / "children.jsonl"
    children.write_text("\n".join(lines) + "\n")
    args = ["batches", "enqueue", "cli-b", "--children", str(children), "--callback", "email.password-reset.v1"]
    # When it is admitted with a callback whose message does not take the summary
    refused = runner.invoke(app, [*args, "--callback-payload", '{"user_id": "u-1"}'])
    # Then it is refused in one line, saying why, and nothing is written
    assert refused.exit_code == 2 and "BatchSummary" in refused.output and "Traceback" not in refused.output
    assert json.loads(runner.invoke(app, ["batches", "list", "--json"]).output)["batches"] == []
    # And a malformed line is named
    children.write_text(lines[0] + "\n{not json\n")
    bad = runner.invoke(app, [*args, "--json"])
    assert bad.exit_code == 2 and "line 2" in bad.output


def test_enqueue_admits_a_batch_once(cloud, tmp_path, monkeypatch):
    # Given a catalogue with a callback that takes the summary, and children in a JSON-lines file (on stdin)
    from converge_cli.support import target as target_module

    summary = JobBinding("test.resets-sent.v1", ResetsSent, lambda: None, Queue.DEFAULT, Policy.EFFECT_THEN_CLAIM)
    monkeypatch.setattr(target_module, "import_catalogue", lambda module: Registry([*BINDINGS, summary]))
    lines = [
        json.dumps({"key": u, "job_type": "email.password-reset.v1", "payload": {"user_id": u}}) for u in ("u-1", "u-2")
    ]
    args = ["batches", "enqueue", "cli-ok", "--children", "-", "--callback", "test.resets-sent.v1"]
    args += ["--callback-payload", '{"campaign": "c-9"}', "--json"]
    # When it is admitted, twice
    first = runner.invoke(app, args, input="\n".join(lines))
    again = runner.invoke(app, args, input="\n".join(lines))
    # Then the first call admitted it, open with two children, and the second wrote nothing
    assert first.exit_code == 0, first.output
    assert json.loads(first.output) == {"batch_id": "cli-ok", "created": True, "state": "open", "total": 2}
    assert json.loads(again.output)["created"] is False


def test_the_deployed_reconciler_finishes_a_lost_look_and_lists_a_stopped_admission_under_attention(cloud, monkeypatch):
    # Given a batch whose children all ran and were counted while every look at it after them was lost
    from converge.flow.batch_counter import BatchCounter
    from converge.model.batches import ADMISSION_GRACE_SECONDS
    from converge.store.batches import BatchesTable

    admit = producer(cloud)
    users = ["u-1001", "u-1002"]
    children = [BatchChild(user, "email.password-reset.v1", {"user_id": user}) for user in users]
    callback = BatchCallback("test.resets-sent.v1", {"campaign": "c-8"})
    admit.enqueue_batch("resets-2", children, callback)
    with monkeypatch.context() as patched:
        patched.setattr(BatchCounter, "_look", lambda *_: None)
        cloud.drain()
    assert admit.require_batches().require("resets-2").state.value == "open"
    # and another whose producer died after its record, before its children
    with monkeypatch.context() as patched:
        patched.setattr(BatchesTable, "write_chunk", lambda *_: (_ for _ in ()).throw(ConnectionError("died")))
        with pytest.raises(ConnectionError):
            admit.enqueue_batch("resets-3", children, callback)
    # When the deployed reconciler runs (its own role's grants), once the admission is old enough to be listed
    cloud.advance(ADMISSION_GRACE_SECONDS + 1)
    summary = cloud.invoke("ReconcilerFunction", {})
    # Then it wrote the first batch's callback and listed the second with the reason
    assert (summary["batch_callbacks_written"], summary["batch_admissions_stopped"], summary["batches_listed"]) == (
        1,
        1,
        1,
    )
    assert admit.require_batches().require("resets-2").state.value == "complete"
    listed = json.loads(runner.invoke(app, ["batches", "list", "--attention", "--json"]).output)["batches"]
    assert [row["batch_id"] for row in listed] == ["resets-3"]
    assert "admission stopped at 0 of 2" in listed[0]["attention"]
    # When the producer admits it again and the reconciler runs / Then nothing needs attention
    admit.enqueue_batch("resets-3", children, callback)
    cloud.drain()
    cloud.invoke("ReconcilerFunction", {})
    assert json.loads(runner.invoke(app, ["batches", "list", "--attention", "--json"]).output)["batches"] == []
