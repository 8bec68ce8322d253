"""The operator commands (ops, toggles, dlq) against the local cloud: the template deployed into moto.

The CLI finds the deployment as on AWS: the stack's outputs, through the default credential chain
(dummy environment credentials here; the local cloud runs in this process under moto).
"""

from __future__ import annotations

import inspect
import json
import math
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from typer.testing import CliRunner

from converge.model.records import ConflictEntry, Lease, Operation, Subject
from converge.model.states import OperationState
from converge.runtime import Converge
from converge_cli.main import app as cli
from converge_cli.support.target import Target
from localcloud import LocalCloud
from tests.conftest import drive_to, local_aws

from .conftest import body_of, dead_letter, messages

runner = CliRunner()
EMAIL = "email.password-reset.v1"
LEDGER_PAYLOAD = {"partner_id": "p-2001", "amount_cents": 500, "benefit": "welcome"}


@pytest.fixture(scope="module")
def cloud() -> Iterator[LocalCloud]:
    with pytest.MonkeyPatch.context() as patch:
        local_aws(patch)
        with LocalCloud.start() as local:
            yield local


@pytest.fixture
def deployed(cloud: LocalCloud) -> Iterator[Converge]:
    """The deployment as the CLI sees it, with every queue and DLQ empty at the start of each test."""
    sqs = cloud.client("sqs")
    for prefix in ("Critical", "Default", "Bulk"):
        for output in (f"{prefix}QueueUrl", f"{prefix}DlqUrl"):
            for message in messages(cloud.outputs[output], hide=30):  # PurgeQueue: once a minute only
                sqs.delete_message(QueueUrl=cloud.outputs[output], ReceiptHandle=message["ReceiptHandle"])
    yield Target(stack="converge").converge


def run(*args: str, input: str | None = None) -> Any:
    result = runner.invoke(cli, list(args), input=input, env={"CONVERGE_ACTOR": "cli:test-operator"})
    return result


def json_of(result: Any) -> Any:
    """The command's JSON document. With --remote the local cloud runs the Lambda in this process, so its
    EMF metric lines (stdout, as in CloudWatch) come first; the document starts at a bare `{` or `[` line."""
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    start = next(n for n, line in enumerate(lines) if line in ("{", "[", "[]", "{}"))
    return json.loads("\n".join(lines[start:]))


def operation(converge: Converge, state: OperationState, job_type: str = EMAIL) -> Operation:
    operation_id = f"op-{uuid.uuid4().hex[:10]}"
    payload = {"user_id": "u-1003"} if job_type == EMAIL else {"partner_id": "p-2001", "upload_id": "up-6001"}
    admitted = converge.enqueue(job_type, operation_id, payload, f"corr-{operation_id}").operation
    return drive_to(converge.operations, admitted, state, attempts=2)


# -- ops ---------------------------------------------------------------------------------------------------------


def test_ops_show_prints_the_stored_receipt(deployed):
    # Given a FAILED operation
    failed = operation(deployed, OperationState.FAILED)
    # When it is shown as JSON
    shown = json_of(run("ops", "show", failed.operation_id, "--json"))
    # Then it carries state, attempts, history and last error
    assert shown["operation_id"] == failed.operation_id and shown["job_type"] == EMAIL
    assert (shown["state"], shown["attempts"], shown["last_error"]) == ("FAILED", 2, "boom")
    assert [entry["state"] for entry in shown["history"]] == ["ACCEPTED", *["IN_PROGRESS"] * 3, "FAILED"]
    # And the current outcome's error (attempt 2's) apart from the earlier ones, not repeated among them
    assert [error["attempt"] for error in shown["errors"]] == [1]
    assert set(shown["history"][0]) == {"state", "at", "reason"}
    # And the human view names it, its current error once, and under "earlier errors" only attempt 1's
    human = run("ops", "show", failed.operation_id)
    assert human.exit_code == 0 and failed.operation_id in human.stdout and "FAILED" in human.stdout
    earlier = human.stdout.split("earlier errors")[1].split("history")[0]
    assert "#1" in earlier and "#2" not in earlier
    assert [line.split() for line in human.stdout.splitlines() if line.startswith("error")] == [["error", "boom"]]


def test_ops_show_lists_the_steps_of_an_operation(deployed):
    # Given an operation whose delivery recorded two steps, the second claimed but not known to be done
    failed = operation(deployed, OperationState.UNKNOWN)
    markers = deployed.operations.markers
    assert markers is not None
    markers.record_step(failed.operation_id, "store", 1, "keyed_effect", "w-1", {"object": "cv/1.pdf"}, "written")
    markers.claim_step(failed.operation_id, "charge", 2, "claim_then_effect", "w-1")
    # When it is shown, as JSON and for a human
    shown = json_of(run("ops", "show", failed.operation_id, "--json"))
    human = run("ops", "show", failed.operation_id)
    # Then both list each step in the runner's order: name, policy, state and recorded result
    assert [(s["name"], s["policy"], s["state"], s["result"]) for s in shown["steps"]] == [
        ("store", "keyed_effect", "done", {"object": "cv/1.pdf"}),
        ("charge", "claim_then_effect", "claimed", None),
    ]
    table = human.stdout.split("steps (")[1].split("history")[0]
    assert table.index("store") < table.index("charge") and "cv/1.pdf" in table and "claimed" in table


def test_ops_list_pages_through_the_attention_index(deployed):
    # Given three UNKNOWN operations
    unknown = {operation(deployed, OperationState.UNKNOWN).operation_id for _ in range(3)}
    # When they are listed two at a time, following the `next` token
    first = json_of(run("ops", "list", "--state", "UNKNOWN", "--job-type", EMAIL, "--limit", "2", "--json"))
    seen = [row["operation_id"] for row in first["operations"]]
    token = first["next"]
    while token:
        page = json_of(run("ops", "list", "--state", "UNKNOWN", "--limit", "2", "--next", token, "--json"))
        seen += [row["operation_id"] for row in page["operations"]]
        token = page["next"]
    # Then every one appears once, with its state
    assert unknown <= set(seen) and len(seen) == len(set(seen))
    assert len(first["operations"]) == 2 and first["operations"][0]["state"] == "UNKNOWN"
    # And each row names its job type, though the worker that settled it never wrote one before
    assert {row["job_type"] for row in first["operations"]} == {EMAIL}
    # And a token that is not one is a clear usage error
    bad = run("ops", "list", "--state", "UNKNOWN", "--next", "not-a-token!")
    assert bad.exit_code == 2 and "--next" in bad.stderr
    # And so is a job type nobody registered
    unknown_type = run("ops", "list", "--state", "UNKNOWN", "--job-type", "no.such.v1")
    assert unknown_type.exit_code == 2 and "unknown job type 'no.such.v1'" in unknown_type.stderr


def test_ops_list_shows_stuck_and_conflicted_operations_with_their_reasons(deployed):
    # Given an open operation listed as STUCK, and a settled one a producer wrote other content for
    stuck = operation(deployed, OperationState.IN_PROGRESS)
    assert deployed.operations.state.mark_stuck(stuck.state_record, "dead_lettered", "its message is in the DLQ")
    settled = operation(deployed, OperationState.SUCCEEDED)
    entry = ConflictEntry("2030-01-01T00:00:00.000Z", "other", EMAIL, "jobs table: other content")
    assert deployed.operations.state.record_conflict(settled.operation_id, entry, settled.fingerprint)
    # When an operator lists each
    stuck_rows = json_of(run("ops", "list", "--state", "STUCK", "--json"))["operations"]
    conflict_rows = json_of(run("ops", "list", "--state", "CONFLICT", "--json"))["operations"]
    # Then each is there with what says why, in JSON and in the table
    [row] = [r for r in stuck_rows if r["operation_id"] == stuck.operation_id]
    assert (row["state"], row["stuck_kind"], row["stuck_reason"]) == (
        "IN_PROGRESS",
        "dead_lettered",
        "its message is in the DLQ",
    )
    [row] = [r for r in conflict_rows if r["operation_id"] == settled.operation_id]
    assert row["state"] == "SUCCEEDED" and row["conflicts"][0]["source"] == "jobs table: other content"
    human = run("ops", "list", "--state", "STUCK")
    assert human.exit_code == 0 and "DLQ" in human.output  # the reason column (wrapped to the width)
    # And the receipt shows the conflict apart from the state
    shown = json_of(run("ops", "show", settled.operation_id, "--json"))
    assert shown["state"] == "SUCCEEDED" and [c["fingerprint"] for c in shown["conflicts"]] == ["other"]


@pytest.mark.parametrize(("resolution", "state"), [("succeeded", "SUCCEEDED"), ("failed", "FAILED")])
def test_ops_resolve_records_the_operators_decision(deployed, resolution, state):
    # Given an UNKNOWN operation
    unknown = operation(deployed, OperationState.UNKNOWN)
    # When an operator resolves it
    shown = json_of(
        run("ops", "resolve", unknown.operation_id, "--as", resolution, "--reason", "ledger checked", "--json")
    )
    # Then it is in the decided state, the actor and the reason in its history
    assert (shown["applied"], shown["before"], shown["after"]) == (True, "UNKNOWN", state)
    assert shown["operation"]["state"] == state
    reason = shown["operation"]["history"][-1]["reason"]
    assert reason == f"resolved as {resolution} by cli:test-operator: ledger checked"
    assert deployed.operations.require(unknown.operation_id).state.value == state


def test_ops_resolve_retry_redispatches_the_same_identity_as_a_fresh_claim(deployed, cloud):
    # Given an UNKNOWN operation (its claim was given back when it became UNKNOWN)
    unknown = operation(deployed, OperationState.UNKNOWN)
    queue = cloud.outputs["CriticalQueueUrl"]
    # When it is resolved as retry
    result = run("ops", "resolve", unknown.operation_id, "--as", "retry", "--reason", "provider has no record")
    # Then it is ACCEPTED again with the operator's reason, listed under STUCK until a worker takes it ...
    assert result.exit_code == 0, result.output
    resolved = deployed.operations.require(unknown.operation_id)
    assert resolved.state is OperationState.ACCEPTED
    assert "provider has no record" in resolved.history[-1].reason
    assert resolved.state_record.stuck_kind == "reopened" and resolved.state_record.lease_owner is None
    # ... and its stored request is on its queue again, with the same identity
    [sent] = messages(queue)
    assert json.loads(sent["Body"])["operation_id"] == unknown.operation_id
    assert json.loads(sent["Body"])["payload"] == unknown.payload


def test_ops_resolve_refuses_an_operation_that_is_not_unknown(deployed):
    # Given a FAILED operation
    failed = operation(deployed, OperationState.FAILED)
    # When an operator tries to resolve it
    result = run("ops", "resolve", failed.operation_id, "--as", "succeeded", "--reason", "sure")
    # Then a one-line error, non-zero, no traceback, and the operation is untouched
    assert result.exit_code == 2
    assert "is FAILED, not UNKNOWN" in result.stderr and "Traceback" not in result.output
    assert deployed.operations.require(failed.operation_id).state is OperationState.FAILED


def test_ops_retry_asks_first_and_reruns_a_failed_operation(deployed, cloud):
    # Given a FAILED operation
    failed = operation(deployed, OperationState.FAILED)
    queue = cloud.outputs["CriticalQueueUrl"]
    # When an operator declines the confirmation, nothing changes (exit 1)
    declined = run("ops", "retry", failed.operation_id, "--reason", "provider fixed", input="n\n")
    assert declined.exit_code == 1 and "nothing changed" in declined.stderr
    assert deployed.operations.require(failed.operation_id).state is OperationState.FAILED and not messages(queue)
    # When they confirm
    result = run("ops", "retry", failed.operation_id, "--reason", "provider fixed", "--json", input="y\n")
    # Then it is ACCEPTED again, its request on its queue, the actor and reason in the receipt
    shown = json_of(result)
    assert (shown["applied"], shown["before"], shown["after"]) == (True, "FAILED", "ACCEPTED")
    assert "last error" in result.stderr  # what was about to run again, shown before the question
    [sent] = messages(queue)
    assert json.loads(sent["Body"])["operation_id"] == failed.operation_id
    history = deployed.operations.require(failed.operation_id).history
    assert history[-1].reason == "retried by cli:test-operator: provider fixed"


@pytest.mark.parametrize(
    ("state", "says"),
    [(OperationState.SUCCEEDED, "too late: it is SUCCEEDED, not FAILED"), (OperationState.UNKNOWN, "resolve it")],
)
def test_ops_retry_of_another_state_is_refused_with_exit_2(deployed, state, says):
    other = operation(deployed, state)
    result = run("ops", "retry", other.operation_id, "--reason", "again", "--yes")
    assert result.exit_code == 2 and says in result.stderr and "Traceback" not in result.output
    as_json = run("ops", "retry", other.operation_id, "--reason", "again", "--yes", "--json")
    assert as_json.exit_code == 2 and json.loads(as_json.stderr)["error"] == "not_applied"
    assert deployed.operations.require(other.operation_id).history == other.history


def test_ops_list_recent_and_refused_states(deployed):
    # Given a fresh SUCCEEDED operation
    done = operation(deployed, OperationState.SUCCEEDED)
    # When recent operations are listed (no --state)
    page = json_of(run("ops", "list", "--since", "10m", "--job-type", EMAIL, "--limit", "1000", "--json"))
    # Then it is among them, and the page says it came from a scan
    assert done.operation_id in [row["operation_id"] for row in page["operations"]] and page["source"] == "scan"
    # And a state that does not exist, or a bad age, is a clear error
    bad = run("ops", "list", "--state", "DONE")
    assert bad.exit_code == 2 and "not a state" in bad.stderr
    assert run("ops", "list", "--since", "soon").exit_code == 2


def test_an_unknown_operation_is_a_clear_error(deployed):
    result = run("ops", "show", "op-does-not-exist")
    assert result.exit_code == 2
    assert result.stderr.strip() == "error: no operation 'op-does-not-exist'"


def test_an_unknown_stack_is_a_clear_error(deployed):
    result = run("ops", "show", "anything", "--stack", "no-such-stack")
    assert result.exit_code == 4
    assert "unknown stack 'no-such-stack'" in result.stderr and "Traceback" not in result.output


# -- toggles -----------------------------------------------------------------------------------------------------


def test_toggles_list_shows_each_jobs_state_and_its_source(deployed):
    # Given the deployed template (fail-closed jobs have a parameter deployed "off")
    rows = {row["job_type"]: row for row in json_of(run("toggles", "list", "--json"))}
    # Then a fail-closed job is off from its parameter, an ordinary one on by default
    assert (rows["ledger.partner-benefits.v1"]["enabled"], rows["ledger.partner-benefits.v1"]["source"]) == (
        False,
        "parameter",
    )
    assert rows[EMAIL]["enabled"] is True and rows[EMAIL]["source"] == "default"
    assert rows[EMAIL]["parameter"] == "/converge/dev/toggles/email.password-reset"


def test_toggles_set_writes_the_parameter_and_refuses_unknown_names(deployed, cloud):
    # When a job is turned off by its name without version
    result = run("toggles", "set", "email.password-reset", "off")
    # Then its parameter says off, and the listing shows it off from the parameter
    assert result.exit_code == 0, result.output
    ssm = cloud.client("ssm")
    assert ssm.get_parameter(Name="/converge/dev/toggles/email.password-reset")["Parameter"]["Value"] == "off"
    rows = {row["job_type"]: row for row in json_of(run("toggles", "list", "--json"))}
    assert (rows[EMAIL]["enabled"], rows[EMAIL]["source"]) == (False, "parameter")
    # And with its version, back on
    assert run("toggles", "set", EMAIL, "on").exit_code == 0
    assert ssm.get_parameter(Name="/converge/dev/toggles/email.password-reset")["Parameter"]["Value"] == "on"
    # And an unknown name is a clear error that writes nothing
    unknown = run("toggles", "set", "email.no-such", "on")
    assert unknown.exit_code == 2 and "unknown job type 'email.no-such'" in unknown.stderr


# -- dlq ---------------------------------------------------------------------------------------------------------


def test_dlq_list_counts_by_job_type_and_error_class_and_loses_nothing(deployed, cloud):
    # Given three dead letters in the critical DLQ: two of one error class, one moved there by SQS itself
    dlq = cloud.outputs["CriticalDlqUrl"]
    for _ in range(2):
        dead_letter(dlq, operation(deployed, OperationState.FAILED), error_class="ProviderDown")
    dead_letter(dlq, operation(deployed, OperationState.IN_PROGRESS), error_class=None)
    # When they are listed
    report = json_of(run("dlq", "list", "--queue", "critical", "--json"))
    # Then they are grouped with a sample each
    [critical] = report["queues"]
    groups = {(group["job_type"], group["error_class"]): group for group in critical["groups"]}
    assert groups[(EMAIL, "ProviderDown")]["count"] == 2
    assert groups[(EMAIL, "MaxReceiveCountExceeded")]["count"] == 1
    assert groups[(EMAIL, "ProviderDown")]["sample"]["error_reason"] == "the provider said no"
    # And every message is still there and visible
    assert len(messages(dlq)) == 3
    assert run("dlq", "list").exit_code == 0


def test_dlq_redrive_in_process_moves_failed_work_back(deployed, cloud):
    # Given a FAILED operation's message and a settled one's in the critical DLQ
    dlq, source = cloud.outputs["CriticalDlqUrl"], cloud.outputs["CriticalQueueUrl"]
    failed = operation(deployed, OperationState.FAILED)
    dead_letter(dlq, failed)
    dead_letter(dlq, operation(deployed, OperationState.SUCCEEDED))
    # When a dry run looks first
    dry = json_of(run("dlq", "redrive", "--queue", "critical", "--dry-run", "--json"))
    assert (dry["dry_run"], dry["moved"], dry["skipped_converged"]) == (True, 1, 1)
    assert len(messages(dlq)) == 2 and not messages(source)
    # When it is redriven for real, with the human summary
    result = run("dlq", "redrive", "--queue", "critical", "--rate", "100")
    # Then the failed one is back on its queue, reopened; the settled one deleted
    assert result.exit_code == 0, result.output
    assert "moved" in result.stdout
    [message] = messages(source)
    assert message["Body"] == body_of(failed)
    assert not messages(dlq)
    assert deployed.operations.require(failed.operation_id).state is OperationState.ACCEPTED


def test_dlq_redrive_filters_by_operation_id_and_age(deployed, cloud):
    # Given two FAILED operations' messages, just dead-lettered
    dlq = cloud.outputs["CriticalDlqUrl"]
    wanted, other = operation(deployed, OperationState.FAILED), operation(deployed, OperationState.FAILED)
    dead_letter(dlq, wanted)
    dead_letter(dlq, other)
    # When only messages older than an hour are asked for, none match
    old = json_of(run("dlq", "redrive", "--older-than", "1h", "--json"))
    assert (old["moved"], old["not_matched"]) == (0, 2)
    # When one operation id, newer than ten minutes, is asked for
    summary = json_of(run("dlq", "redrive", "--operation-id", wanted.operation_id, "--newer-than", "10m", "--json"))
    # Then only it moved
    assert (summary["moved"], summary["not_matched"]) == (1, 1)
    assert deployed.operations.require(other.operation_id).state is OperationState.FAILED


def test_dlq_redrive_remote_runs_the_deployed_function(deployed, cloud):
    # Given a FAILED operation's message in the default DLQ
    dlq, source = cloud.outputs["DefaultDlqUrl"], cloud.outputs["DefaultQueueUrl"]
    failed = operation(deployed, OperationState.FAILED, job_type="partner-docs.upload.v1")
    dead_letter(dlq, failed)
    # When the deployed redrive Lambda is invoked through the CLI
    summary = json_of(run("dlq", "redrive", "--remote", "--queue", "default", "--json"))
    # Then it moved the message back to the default queue (the function's DLQ_URL settings came from the template)
    assert summary["moved"] == 1 and summary["dry_run"] is False
    assert [json.loads(m["Body"])["operation_id"] for m in messages(source)] == [failed.operation_id]
    # And a bad request comes back as a clear error from the function
    bad = run("dlq", "redrive", "--remote", "--job-type", "no.such.v1")
    assert bad.exit_code == 2 and "unknown job type 'no.such.v1'" in bad.stderr


def test_invalid_redrive_options_are_clear_errors(deployed):
    for args, expected in [
        (("--rate", "0"), "rate_per_second"),
        (("--older-than", "yesterday"), "--older-than"),
        (("--max", "0"), "max_messages"),
        (("--job-type", "no.such.v1"), "unknown job type"),
    ]:
        result = run("dlq", "redrive", *args)
        assert result.exit_code == 2, (args, result.output)
        assert expected in result.stderr and "Traceback" not in result.output


def test_the_lambda_answers_a_bad_console_event_with_an_error(cloud):
    # Given the deployed function; When invoked with a bad event; Then it says why instead of crashing
    answer = cloud.invoke("DlqRedriveFunction", {"queue": "somewhere"})
    assert "queue" in answer["error"]
    invoked = boto3.client("lambda").invoke(
        FunctionName=cloud.outputs["RedriveFunctionName"], Payload=b'{"queue": "all", "dry_run": true}'
    )
    assert json.loads(invoked["Payload"].read())["dry_run"] is True


# -- dlq show / delete / purge, toggles set's report, ops show's outcome ----------------------------------------


def test_dlq_show_prints_one_message_in_full_and_leaves_it(deployed, cloud):
    # Given a dead letter of a FAILED operation
    dlq = cloud.outputs["CriticalDlqUrl"]
    failed = operation(deployed, OperationState.FAILED)
    dead_letter(dlq, failed)
    [message] = messages(dlq)
    # When it is shown by its message id, and by its operation id
    by_message = json_of(run("dlq", "show", message["MessageId"], "--json"))
    by_operation = json_of(run("dlq", "show", failed.operation_id, "--json"))
    # Then it is the stored message, its error and its operation's attempts (as `ops show` counts them), and it
    # is still in the DLQ, visible
    assert by_message == {**by_operation, "receive_count": by_message["receive_count"]}
    assert (
        by_message["attempts"]
        == failed.attempts
        == json_of(run("ops", "show", failed.operation_id, "--json"))["attempts"]
    )
    assert (by_message["body"], by_message["operation_id"], by_message["error_class"]) == (
        message["Body"],
        failed.operation_id,
        "ProviderDown",
    )
    assert by_message["error_reason"] == "the provider said no" and by_message["readable"] is True
    assert [m["MessageId"] for m in messages(dlq)] == [message["MessageId"]]
    # And an id that is nowhere is a clear error
    missing = run("dlq", "show", "no-such-message")
    assert missing.exit_code == 2 and "no message 'no-such-message'" in missing.stderr


def test_dlq_delete_asks_first_and_deletes_only_that_message(deployed, cloud):
    # Given two dead letters
    dlq = cloud.outputs["CriticalDlqUrl"]
    for _ in range(2):
        dead_letter(dlq, operation(deployed, OperationState.FAILED))
    doomed, kept = (m["MessageId"] for m in messages(dlq))
    # When a dry run looks first: nothing is deleted
    dry = json_of(run("dlq", "delete", doomed, "--dry-run", "--json"))
    assert (dry["would_delete"], dry["deleted"]) == ([doomed], [])
    assert len(messages(dlq)) == 2
    # When the operator answers no: nothing is deleted, exit 1
    declined = runner.invoke(cli, ["dlq", "delete", doomed], input="n\n")
    assert declined.exit_code == 1 and "nothing deleted" in declined.stderr
    assert len(messages(dlq)) == 2
    # When the operator answers yes: only that message is gone
    confirmed = runner.invoke(cli, ["dlq", "delete", doomed], input="y\n")
    assert confirmed.exit_code == 0, confirmed.output
    assert "deleted 1 message(s)" in confirmed.stdout
    assert [m["MessageId"] for m in messages(dlq)] == [kept]


def test_dlq_purge_deletes_the_unreadable_messages_only(deployed, cloud):
    # Given a readable dead letter and two unreadable ones (not converge messages at all)
    dlq = cloud.outputs["DefaultDlqUrl"]
    dead_letter(dlq, operation(deployed, OperationState.FAILED, job_type="partner-docs.upload.v1"))
    sqs = cloud.client("sqs")
    for body in ("not json at all", '{"surprise": [1, 2]}'):
        sqs.send_message(QueueUrl=dlq, MessageBody=body)
    # When a dry run lists them: the two unreadable ones, nothing deleted
    dry = json_of(run("dlq", "purge", "--queue", "default", "--dry-run", "--json"))
    assert len(dry["would_delete"]) == 2 and len(messages(dlq)) == 3
    # When purged with --yes (no question asked)
    purged = json_of(run("dlq", "purge", "--queue", "default", "--yes", "--json"))
    # Then exactly those two are gone; the readable one stays for a redrive
    assert sorted(purged["deleted"]) == sorted(dry["would_delete"])
    [left] = messages(dlq)
    assert json.loads(left["Body"])["job_type"] == "partner-docs.upload.v1"


def test_the_redrive_commands_defaults_are_the_functions():
    from converge.operate.redrive_decision import RedriveRequest
    from converge_cli.commands.dlq import redrive_command

    defaults = {name: parameter.default for name, parameter in inspect.signature(redrive_command).parameters.items()}
    request = RedriveRequest()
    assert (defaults["queue"].value, defaults["max_messages"], defaults["rate"], defaults["dry_run"]) == (
        request.queue,
        request.max_messages,
        request.rate_per_second,
        request.dry_run,
    )


def test_toggles_set_says_what_changed_and_what_resumes(deployed, cloud):
    # Given the money job off (as deployed) with two PAUSED operations waiting
    for _ in range(2):
        admitted = deployed.enqueue("ledger.partner-benefits.v1", f"op-{uuid.uuid4().hex[:10]}", LEDGER_PAYLOAD)
        assert deployed.operations.state.transition(admitted.operation, OperationState.PAUSED, "toggle off") is not None
    assert run("toggles", "set", "ledger.partner-benefits", "off").exit_code == 0
    # When it is turned on
    result = json_of(run("toggles", "set", "ledger.partner-benefits", "on", "--json"))
    human_again = run("toggles", "set", "ledger.partner-benefits", "on")
    # Then the change is reported (from off, by its parameter) with the paused work the resumer picks up
    assert result["changed"] is True and result["before"] == {"enabled": False, "source": "parameter", "value": "off"}
    assert result["paused_to_resume"] >= 2
    # And setting it to what it already is writes nothing and says so
    assert "already on" in human_again.stdout and "nothing written" in human_again.stdout
    parameter = cloud.client("ssm").get_parameter(Name="/converge/dev/toggles/ledger.partner-benefits")["Parameter"]
    assert parameter["Value"] == "on"
    version = parameter["Version"]
    run("toggles", "set", "ledger.partner-benefits", "on")
    assert cloud.client("ssm").get_parameter(Name=parameter["Name"])["Parameter"]["Version"] == version
    run("toggles", "set", "ledger.partner-benefits", "off")


def test_ops_show_separates_the_current_outcome_from_earlier_errors(deployed):
    # Given an operation that failed, was redriven, and then succeeded (its earlier errors kept apart)
    failed = operation(deployed, OperationState.FAILED)
    store = deployed.operations
    assert store.state.transition(failed, OperationState.ACCEPTED, "redriven", count_redrive=True)
    subject = Subject(failed.operation_id, failed.job_type, failed.request.fingerprint)
    lease = store.state.acquire(subject, "test-worker-again", 30)
    assert isinstance(lease, Lease) and store.state.settle(lease, OperationState.SUCCEEDED, "sent") is None
    settled = store.require(failed.operation_id)
    assert settled.state is OperationState.SUCCEEDED and settled.last_error is None
    # When it is shown
    output = run("ops", "show", failed.operation_id).stdout
    # Then the outcome line says SUCCEEDED, and the old error is listed apart as an earlier one
    outcome = next(line for line in output.splitlines() if line.startswith("outcome"))
    assert "SUCCEEDED" in outcome and "boom" not in outcome
    assert not any(line.startswith("error ") for line in output.splitlines())
    earlier = output.split("earlier errors")[1].split("history")[0]
    assert "boom" in earlier and "#2" in earlier  # the failed attempt, with its error


# -- status ------------------------------------------------------------------------------------------------------


def publish_as_aws_would(cloud: LocalCloud, job_type: str, succeeded: int, queue_url: str, age: float) -> None:
    """The figures CloudWatch holds on AWS: a function's EMF count (job_type + service) and SQS's queue age."""
    cloudwatch = cloud.client("cloudwatch")
    dimensions = [{"Name": "job_type", "Value": job_type}, {"Name": "service", "Value": "converge"}]
    # A minute old, as a function's count is by the time CloudWatch serves it: the query's end time travels
    # in whole seconds, so a datum stamped in the very second of the query would fall outside its window.
    stamp = datetime.now(UTC) - timedelta(seconds=60)
    cloudwatch.put_metric_data(
        Namespace="Converge",
        MetricData=[
            {
                "MetricName": "succeeded",
                "Dimensions": dimensions,
                "Value": succeeded,
                "Unit": "Count",
                "Timestamp": stamp,
            }
        ],
    )
    cloudwatch.put_metric_data(
        Namespace="AWS/SQS",
        MetricData=[
            {
                "MetricName": "ApproximateAgeOfOldestMessage",
                "Dimensions": [{"Name": "QueueName", "Value": queue_url.rsplit("/", 1)[1]}],
                "Value": age,
                "Timestamp": stamp,
            }
        ],
    )


@pytest.mark.parametrize("width", ["80", "200"])
def test_status_shows_queues_toggles_attention_and_outcomes(deployed, cloud, width):
    # Given UNKNOWN and FAILED operations, a dead letter, and what CloudWatch would hold
    earlier = json_of(run("status", "--json"))
    before = earlier["attention"]
    succeeded_before = earlier["outcomes_last_hour"].get(EMAIL, {}).get("succeeded", 0)
    unknown = operation(deployed, OperationState.UNKNOWN)
    failed = operation(deployed, OperationState.FAILED)
    dead_letter(cloud.outputs["CriticalDlqUrl"], failed)
    publish_as_aws_would(cloud, EMAIL, 3, cloud.outputs["CriticalDlqUrl"], 42.0)
    # When the status is asked for
    snapshot = json_of(run("status", "--json"))
    # Then each attention key counts what it lists, the DLQ its letter (and its age), the toggles their state
    assert snapshot["attention"]["UNKNOWN"] == before["UNKNOWN"] + 1
    assert snapshot["attention"]["FAILED"] == before["FAILED"] + 1
    assert set(snapshot["attention"]) == {"FAILED", "PAUSED", "REJECTED", "UNKNOWN", "STUCK", "CONFLICT"} | {
        "SCHEDULED",
        "CANCELLED",
        "EXPIRED",
    }
    critical = next(entry for entry in snapshot["queues"] if entry["queue"] == "critical")
    assert (critical["dlq"]["visible"], critical["dlq"]["oldest_age_seconds"]) == (1, 42.0)  # the maximum
    assert critical["oldest_age_seconds"] is None  # nothing published for the queue itself: unknown, not 0
    toggles = {row["job_type"]: row for row in snapshot["toggles"]}
    assert (toggles["ledger.partner-benefits.v1"]["enabled"], toggles[EMAIL]["enabled"]) == (False, True)
    # And the last hour's outcomes per job type are the EMF counts
    assert snapshot["outcomes_last_hour"][EMAIL]["succeeded"] == succeeded_before + 3
    # And the human view at this width holds every job type whole and the counts
    human = runner.invoke(cli, ["status"], env={"COLUMNS": width})
    assert human.exit_code == 0, human.output
    lines = human.stdout.splitlines()
    for job_type in toggles:
        assert any(job_type in line for line in lines), human.stdout
    assert "needs attention" in human.stdout and "outcomes, last hour" in human.stdout
    assert unknown.operation_id not in human.stdout  # counts, not listings
    # And every attention key keeps its label, beside its count, at 80 columns too (nine keys side by side would
    # not fit: their table once lost its first label, CANCELLED)
    attention_lines = human.stdout.split("needs attention")[1].split("outcomes, last hour")[0].splitlines()
    for key in snapshot["attention"]:
        [line] = [line.split() for line in attention_lines if key in line.split()]
        assert [part for part in line if part.rstrip("+").isdigit()], (key, line)
    assert max(len(line) for line in lines) <= int(width)


def test_status_shows_the_rate_limits_keys_that_jobs_wait_on(deployed):
    # Given the image partner's pace taken for a minute ahead, as a flood of ad images (or its 429) leaves it
    limits = deployed.rate_limits
    assert limits is not None
    limiter = limits.limiter("ad-image-partner")
    now = deployed.clock.now()
    for _ in range(limiter.burst + 51):  # the burst, then fifty more (a minute of its pace): the next waits
        limits.reserve(limiter, "*", 1, now)
    try:
        snapshot, human = _status_of_a_busy_key()
        # (a unit's interval is 1.2 s: a slow machine's seconds between the reservations and the status let as
        # many units start)
        started = math.ceil((deployed.clock.now() - now) / limiter.interval)
    finally:  # the key given back: the demo's ad images after this test start at once
        key = {"pk": {"S": "limit#ad-image-partner"}, "sk": {"S": "key#*"}}
        deployed.clients.dynamodb.delete_item(TableName=deployed.settings.markers_table, Key=key)
    # Then the key is listed with its pace, how many units are queued and when the next may start
    [row] = [row for row in snapshot["rate_limits"] if row["limiter"] == "ad-image-partner"]
    assert (row["key"], row["pace"]) == ("*", "50 per 60 s, burst 10")
    assert 50 - started <= row["queued"] <= 51 and row["next_start"] > snapshot["at"]
    # And the human view shows it in its own table
    assert human.exit_code == 0, human.output
    assert "rate limits" in human.stdout and "ad-image-partner" in human.stdout


def test_limits_pause_lists_and_releases_a_key(deployed):
    # Given the image partner's key paused for ten minutes by an operator
    paused = json_of(run("limits", "pause", "ad-image-partner", "--seconds", "600", "--yes", "--json"))
    try:
        # When the limits are listed, Then the key waits, its next start past the pause
        [limiter] = [row for row in json_of(run("limits", "list", "--json")) if row["limiter"] == "ad-image-partner"]
        [waiting] = limiter["waiting"]
        assert waiting["key"] == "*" and waiting["next_start"] >= paused["paused_until"]
        human = run("limits", "list")
        assert human.exit_code == 0 and "ad-image-partner" in human.stdout and "50 per 60 s" in human.stdout
    finally:
        # When it is released, Then nothing waits on it, and a second release says there was nothing to release
        released = json_of(run("limits", "release", "ad-image-partner", "--yes", "--json"))
    assert released == {"limiter": "ad-image-partner", "key": "*", "released": True, "by": paused["by"]}
    [limiter] = [row for row in json_of(run("limits", "list", "--json")) if row["limiter"] == "ad-image-partner"]
    assert limiter["waiting"] == []
    again = run("limits", "release", "ad-image-partner", "--yes")
    assert again.exit_code == 0 and "had no pace to release" in again.stdout
    # And an unknown limiter is refused with the reason
    unknown = run("limits", "pause", "no-such-limiter", "--seconds", "60")
    assert unknown.exit_code != 0 and "no-such-limiter" in unknown.output


def test_limits_running_lists_each_caps_keys_with_the_operations_running(deployed):
    # Given a partner's statement running (its slot taken until its lease's end)
    from converge.model.clock import iso
    from converge.store.concurrency import ConcurrencyTable

    table = ConcurrencyTable(deployed.settings.markers_table, deployed.clients.dynamodb)
    now = float(int(deployed.clock.now()))  # whole seconds: the slot's time is stored in milliseconds
    assert table.take("partner-statement", "partner-7", "statement-7", now + 600, 1, now).taken
    try:
        # When the caps' keys are listed, Then the partner's key shows it, full, with when its slot lapses
        [cap] = [row for row in json_of(run("limits", "running", "--json")) if row["cap"] == "partner-statement"]
        assert cap["limit"] == "1 at once per partner_id"
        [key] = cap["running"]
        assert key == {
            "key": "partner-7",
            "operations": ["statement-7"],
            "full": True,
            "next_free": iso(now + 600),
            "newest_waiting": None,
            "paused_by": None,
        }
        human = run("limits", "running")
        assert human.exit_code == 0 and "partner-statement" in human.stdout and "statement-7" in human.stdout
    finally:
        table.give_back("partner-statement", "partner-7", "statement-7", now + 600)
    # When it has given its slot back, Then nothing runs under the cap
    [cap] = [row for row in json_of(run("limits", "running", "--json")) if row["cap"] == "partner-statement"]
    assert cap["running"] == []


def test_limits_bursts_lists_each_debounced_key_with_a_burst_waiting(deployed):
    # Given a profile's burst of edits waiting for its CV's re-render (its key written as a first edit writes it)
    from converge.model.clock import iso
    from converge.model.debounce import Action, Burst
    from converge.store.debounce import DebounceTable, Request

    table = DebounceTable(deployed.settings.markers_table, deployed.clients.dynamodb)
    now_ms = int(deployed.clock.now()) * 1000
    table.write("pdf.cv-refresh.v1", "cv-burst", Action.OPEN, Burst(), Request("edit-1", 1, now_ms, 10_000, 60_000))
    # When the bursts are listed, Then the profile's key shows it, its newest request and its start
    rows = [row for row in json_of(run("limits", "bursts", "--json")) if row["key"] == "cv-burst"]
    assert rows == [
        {
            "job_type": "pdf.cv-refresh.v1",
            "debounce": "10 s quiet, at most 60 s per profile_id, newest by version",
            "key": "cv-burst",
            "newest": "edit-1",
            "since": iso(now_ms / 1000),
            "starts_by": iso(now_ms / 1000 + 10),
        }
    ]
    human = run("limits", "bursts")
    assert human.exit_code == 0 and "cv-burst" in human.stdout and "edit-1" in human.stdout


def test_limits_pause_and_release_a_caps_key_and_free_a_slot_left_behind(deployed):
    # Given a partner's statement key of the reference catalogue's cap
    from converge.store.concurrency import ConcurrencyTable

    table = ConcurrencyTable(deployed.settings.markers_table, deployed.clients.dynamodb)
    # When an operator asks to pause it and declines the confirmation, Then nothing changed
    declined = run("limits", "pause", "partner-statement", "--key", "partner-9", input="n\n")
    assert declined.exit_code == 1 and "nothing changed" in declined.output
    assert [k for k in json_of(run("limits", "running", "--json"))[0]["running"] if k["key"] == "partner-9"] == []
    # When they confirm, Then it is paused in their name, and listed so
    paused = json_of(run("limits", "pause", "partner-statement", "--key", "partner-9", "--json", input="y\n"))
    assert paused == {"cap": "partner-statement", "key": "partner-9", "paused": True, "by": "cli:test-operator"}
    [cap] = [row for row in json_of(run("limits", "running", "--json")) if row["cap"] == "partner-statement"]
    [key] = [k for k in cap["running"] if k["key"] == "partner-9"]
    assert (key["paused_by"], key["full"], key["operations"]) == ("cli:test-operator", True, [])
    # And a cap's key takes no --seconds, a limiter's needs them, and an unknown name is refused with the known ones
    assert "until released" in run("limits", "pause", "partner-statement", "--seconds", "60", "--yes").output
    assert "--seconds" in run("limits", "pause", "ad-image-partner", "--yes").output
    unknown = run("limits", "release", "no-such-cap", "--yes")
    assert unknown.exit_code != 0 and "partner-statement" in unknown.output
    # When it is released, Then nothing is paused, and a second release says so
    released = json_of(run("limits", "release", "partner-statement", "--key", "partner-9", "--yes", "--json"))
    assert released["released"] is True and released["by"] == "cli:test-operator"
    assert (released["woken"], released["unsent"], released["missed"]) == ([], [], [])  # (no job was held on it)
    again = run("limits", "release", "partner-statement", "--key", "partner-9", "--yes").output
    assert "was not paused: 0 held job(s) woken now" in again
    # Given a slot left behind by a holder gone (its lease far off)
    now = float(int(deployed.clock.now()))
    assert table.take("partner-statement", "partner-9", "statement-gone", now + 900, 1, now).taken
    # When an operator frees it, Then the key holds nothing; freeing it again finds nothing
    freed = json_of(
        run(
            "limits",
            "release",
            "partner-statement",
            "--key",
            "partner-9",
            "--slot",
            "statement-gone",
            "--yes",
            "--json",
        )
    )
    assert freed["released"] is True
    assert next(k for k in table.keys("partner-statement") if k.key == "partner-9").holders == {}
    again = run("limits", "release", "partner-statement", "--key", "partner-9", "--slot", "statement-gone", "--yes")
    assert "holds no slot" in again.output
    # And before freeing one, the operator is told what its holder is now (here: no operation by that id)
    assert "statement-gone: no such operation" in again.output


def test_status_shows_each_caps_keys_with_what_runs_waits_and_who_paused(deployed):
    # Given a partner's statement running, another held waiting on its key, and a third partner's key paused
    from converge.model.clock import iso
    from converge.store.concurrency import ConcurrencyTable

    table = ConcurrencyTable(deployed.settings.markers_table, deployed.clients.dynamodb)
    now = float(int(deployed.clock.now()))
    assert table.take("partner-statement", "partner-5", "statement-5", now + 600, 1, now).taken
    table.note_waiting("partner-statement", "partner-5", "statement-5b", now + 30, [])
    assert table.pause("partner-statement", "partner-6", "cli:test-operator", now)
    try:
        # When the status is asked for
        snapshot, human = _status_of_a_busy_key()
    finally:
        table.give_back("partner-statement", "partner-5", "statement-5", now + 600)
        table.resume("partner-statement", "partner-6", "cli:test-operator", now)
    # Then each key is shown: the running one with its waiter and its next try, the paused one with who paused it
    rows = {row["key"]: row for row in snapshot["concurrency"] if row["cap"] == "partner-statement"}
    running, paused = rows["partner-5"], rows["partner-6"]
    assert (running["running"], running["waiting"], running["next_start"]) == (["statement-5"], 1, iso(now + 30))
    assert (paused["running"], paused["paused_by"]) == ([], "cli:test-operator")
    assert human.exit_code == 0 and "concurrency caps" in human.stdout and "statement-5" in human.stdout


def _status_of_a_busy_key() -> tuple[Any, Any]:
    """When the status is asked for: as JSON, and as a person reads it."""
    return json_of(run("status", "--json")), runner.invoke(cli, ["status"], env={"COLUMNS": "120"})


def test_status_watch_refreshes_until_interrupted_and_exits_0(deployed, monkeypatch):
    # Given a watch whose second wait is interrupted (as Ctrl-C would)
    from converge_cli.commands import status as status_command

    waits: list[float] = []

    def wait(seconds: float) -> None:
        waits.append(seconds)
        if len(waits) == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr(status_command, "_sleep", wait)
    # When it runs
    result = run("status", "--watch", "5", "--json")
    # Then it printed one overview per refresh and exited 0
    assert result.exit_code == 0, result.output
    assert result.stdout.count('"attention_counted_at_most"') == 2 and waits == [5.0, 5.0]


def test_ops_cancel_cancels_one_not_started_and_reports_a_settled_one_as_too_late(deployed):
    # Given a PAUSED operation (not started) and a FAILED one (settled); `run` names the actor (CONVERGE_ACTOR)
    paused = operation(deployed, OperationState.PAUSED)
    failed = operation(deployed, OperationState.FAILED)
    # When the paused one is cancelled
    done = json_of(run("ops", "cancel", paused.operation_id, "--reason", "order withdrawn", "--json"))
    # Then it is CANCELLED, and its receipt names the actor and the reason
    assert (done["applied"], done["before"], done["after"]) == (True, "PAUSED", "CANCELLED")
    stored = deployed.operations.require(paused.operation_id)
    assert stored.state is OperationState.CANCELLED
    assert stored.history[-1].reason == "cancelled by cli:test-operator: order withdrawn"
    # And the settled one is too late: refused as any action its state does not allow (exit code 2, not 3,
    # which means missing credentials), the reason said on stderr, the operation unchanged
    late = runner.invoke(cli, ["ops", "cancel", failed.operation_id, "--reason", "too late"])
    assert late.exit_code == 2 and late.stdout == ""
    assert late.stderr.strip() == f"error: {failed.operation_id}: not cancelled: too late: it is FAILED"
    late_json = runner.invoke(cli, ["ops", "cancel", failed.operation_id, "--reason", "too late", "--json"])
    assert late_json.exit_code == 2 and late_json.stdout == ""
    assert json.loads(late_json.stderr) == {
        "error": "not_applied",
        "message": f"{failed.operation_id}: not cancelled: too late: it is FAILED",
    }
    assert deployed.operations.require(failed.operation_id).state is OperationState.FAILED
    # And a blank reason is a usage error
    blank = runner.invoke(cli, ["ops", "cancel", paused.operation_id, "--reason", "  "])
    assert blank.exit_code == 2 and "--reason" in blank.stderr


# -- signals -----------------------------------------------------------------------------------------------------


def test_signal_keeps_a_signal_once_and_refuses_another_for_the_same_wait(deployed):
    # Given an operation not started yet (a signal may come before its step waits for it)
    admitted = deployed.enqueue(EMAIL, f"op-{uuid.uuid4().hex[:10]}", {"user_id": "u-1003"}).operation
    target = admitted.operation_id
    # When an operator signals it, then again with the same id, then with another
    first = run("signal", target, "approval", "--payload", '{"decision": "approved"}', "--signal-id", "a-1", "--json")
    again = run("signal", target, "approval", "--payload", '{"decision": "approved"}', "--signal-id", "a-1")
    changed = run("signal", target, "approval", "--payload", '{"decision": "rejected"}', "--signal-id", "a-1")
    other = run("signal", target, "approval", "--payload", '{"decision": "rejected"}', "--signal-id", "r-1")
    # Then the first is kept, the same id again is the same signal (with another payload too: the first stands),
    # and the other is refused with exit code 2
    assert json_of(first)["answer"] == "accepted"
    assert again.exit_code == 0 and "duplicate" in again.stdout
    assert changed.exit_code == 0 and "duplicate" in changed.stdout
    assert other.exit_code == 2 and "refused" in other.output and "has signal 'a-1' already" in other.output
    # And the receipt lists the signal, who sent it, and the refused one
    (shown,) = json_of(run("ops", "show", target, "--json"))["signals"]
    assert (shown["signal_id"], shown["sent_by"], shown["payload"]) == (
        "a-1",
        "cli:test-operator",
        {"decision": "approved"},
    )
    assert [(r["signal_id"], r["sent_by"]) for r in shown["refused"]] == [("r-1", "cli:test-operator")]


def test_signal_for_a_missing_operation_or_with_a_payload_converge_cannot_keep_exits_2(deployed):
    missing = run("signal", "op-nowhere", "approval")
    assert missing.exit_code == 2 and "not_found" in missing.output
    admitted = deployed.enqueue(EMAIL, f"op-{uuid.uuid4().hex[:10]}", {"user_id": "u-1003"}).operation
    leaked = run("signal", admitted.operation_id, "approval", "--payload", '{"note": "jane.doe@example.com"}')
    assert leaked.exit_code == 2 and "e-mail" in leaked.output
