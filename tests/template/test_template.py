"""Invariants of template.yaml: it transforms, lints clean, grants least privilege, and keeps its numbers tied."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from cfnlint.api import lint_file

from tests.conftest import TEMPLATE as DEFAULT_TEMPLATE
from tests.template.conftest import APPLICATION

# The only actions allowed on Resource "*": they have no resource-level scoping and carry no data.
ALLOWED_ON_ANY_RESOURCE = {
    "xray:PutTraceSegments",
    "xray:PutTelemetryRecords",
    "dynamodb:ListStreams",  # lists stream ARNs; Lambda checks it when creating the stream mapping
    "cloudwatch:PutMetricData",  # only with a cloudwatch:namespace condition, checked below
}


def _resources(template: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {lid: r for lid, r in template["Resources"].items() if r["Type"] == kind}


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _iam_statements(cfn: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for logical_id, role in _resources(cfn, "AWS::IAM::Role").items():
        for policy in role["Properties"].get("Policies", []):
            for statement in policy["PolicyDocument"]["Statement"]:
                yield logical_id, statement
    for kind in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
        for logical_id, policy in _resources(cfn, kind).items():
            for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
                yield logical_id, statement


def _queue_of(sam: dict[str, Any], function_id: str) -> str:
    [event] = [e for e in sam["Resources"][function_id]["Properties"]["Events"].values() if e["Type"] == "SQS"]
    return event["Properties"]["Queue"]["Fn::GetAtt"][0]


def _workers(sam: dict[str, Any]) -> list[str]:
    return [
        lid
        for lid, r in sam["Resources"].items()
        if r["Type"] == "AWS::Serverless::Function"
        and any(e["Type"] == "SQS" for e in (r["Properties"].get("Events") or {}).values())
    ]


def test_the_template_transforms_into_functions_mappings_and_rules(cfn: dict[str, Any]) -> None:
    # Given the SAM translator's output, then every contract logical id is there
    expected = {
        "JobsTable", "MarkersTable", "CriticalQueue", "CriticalDlq", "DefaultQueue", "DefaultDlq", "BulkQueue",
        "BulkDlq", "RelayFailureQueue", "OutboxRelayFunction", "CriticalWorkerFunction", "DefaultWorkerFunction",
        "BulkWorkerFunction", "DlqRedriveFunction", "ResumerFunction", "RecurringFunction", "StateTable",
        "ReconcilerFunction", "ProducerPolicy", "BatchCounterFunction",
    }  # fmt: skip
    assert expected <= set(cfn["Resources"])
    assert len(_resources(cfn, "AWS::Lambda::EventSourceMapping")) == 5  # the two streams and three queues
    assert _resources(cfn, "AWS::Events::Rule")


def test_cfn_lint_is_clean() -> None:
    # Given cfn-lint's full rule set (it runs the SAM transform itself), then nothing is reported in the template or
    # in converge's application
    for template in (DEFAULT_TEMPLATE, APPLICATION):
        matches = lint_file(template)
        assert [f"{template}: {m.rule.id} {m.message} ({m.linenumber})" for m in matches] == []


def test_every_function_has_its_own_explicit_role(cfn: dict[str, Any]) -> None:
    # SAM's generated roles attach AWS managed policies with data-plane actions on "*"
    for logical_id, function in _resources(cfn, "AWS::Lambda::Function").items():
        role = function["Properties"]["Role"]
        assert isinstance(role, dict) and "Fn::GetAtt" in role, logical_id
    # And no role holds a managed policy but the team's own for its runners, passed to converge's application, and
    # converge's producer policy (and its key's) for the application's own producers (functions/)
    roles = _resources(cfn, "AWS::IAM::Role")
    managed = {
        lid: r["Properties"]["ManagedPolicyArns"] for lid, r in roles.items() if "ManagedPolicyArns" in r["Properties"]
    }
    producers = {"SignUpRole", "PartnerCreditRole"}
    assert set(managed) == {"CriticalWorkerRole", "DefaultWorkerRole", "BulkWorkerRole", "RecurringRole", *producers}
    for role in producers:
        assert managed.pop(role) == [
            {"Fn::GetAtt": ["Converge", "Outputs.ProducerPolicyArn"]},
            {
                "Fn::If": [
                    "HasKmsKey",
                    {"Fn::GetAtt": ["Converge", "Outputs.ProducerKeyPolicyArn"]},
                    {"Ref": "AWS::NoValue"},
                ]
            },
        ]
    for role, arns in managed.items():
        runners = role.removesuffix("Role").removesuffix("Worker")
        assert arns == {
            "Fn::If": [f"Has{runners}RunnerPolicies", {"Ref": f"{runners}RunnerPolicyArns"}, {"Ref": "AWS::NoValue"}]
        }


def test_policies_are_least_privilege(cfn: dict[str, Any]) -> None:
    # Given every IAM statement the stack creates
    problems = []
    for owner, statement in _iam_statements(cfn):
        if statement["Effect"] != "Allow":
            continue
        actions = _as_list(statement["Action"])
        resources = _as_list(statement["Resource"])
        # Then no action is a wildcard...
        problems += [f"{owner}: wildcard action {a}" for a in actions if "*" in a]
        # ...and only data-free actions are granted on every resource
        if "*" in resources:
            problems += [f"{owner}: {a} on *" for a in actions if a not in ALLOWED_ON_ANY_RESOURCE]
            if "cloudwatch:PutMetricData" in actions:
                condition = statement.get("Condition", {}).get("StringEquals", {})
                if "cloudwatch:namespace" not in condition:
                    problems.append(f"{owner}: PutMetricData without a namespace condition")
    assert problems == []


def test_fail_closed_jobs_have_a_toggle_deployed_off(sam: dict[str, Any]) -> None:
    # Given the toggle parameters in the template
    toggles = {
        r["Properties"]["Name"]["Fn::Sub"].rsplit("/", 1)[-1]: r["Properties"]["Value"]
        for r in _resources(sam, "AWS::SSM::Parameter").values()
        if "/toggles/" in str(r["Properties"]["Name"])
    }
    # Then each of them is deployed "off"...
    assert toggles and set(toggles.values()) == {"off"}
    # ...and every fail-closed job of the catalogue has one
    catalogue = pytest.importorskip("catalogue")
    fail_closed = {b.toggle_key for b in catalogue.BINDINGS if b.fail_closed}
    assert fail_closed <= set(toggles)


def test_queue_visibility_is_at_least_six_times_the_worker_timeout(sam: dict[str, Any]) -> None:
    default_timeout = sam["Globals"]["Function"]["Timeout"]
    for worker in _workers(sam):
        timeout = sam["Resources"][worker]["Properties"].get("Timeout", default_timeout)
        queue = sam["Resources"][_queue_of(sam, worker)]["Properties"]
        assert queue["VisibilityTimeout"] >= 6 * timeout, worker


def test_worker_max_receive_count_is_the_queue_redrive_setting(sam: dict[str, Any]) -> None:
    # Both must be the same reference (not two literals that agree today)
    for worker in _workers(sam):
        env = sam["Resources"][worker]["Properties"]["Environment"]["Variables"]
        redrive = sam["Resources"][_queue_of(sam, worker)]["Properties"]["RedrivePolicy"]
        assert env["MAX_RECEIVE_COUNT"] == redrive["maxReceiveCount"]
        assert isinstance(env["MAX_RECEIVE_COUNT"], dict), "use a Mappings entry or a Parameter, not a literal"
        assert env["QUEUE_URL"] == {"Ref": _queue_of(sam, worker)}
        assert env["DLQ_URL"] == {"Ref": redrive["deadLetterTargetArn"]["Fn::GetAtt"][0]}


def test_every_dlq_and_worker_has_an_alarm(sam: dict[str, Any]) -> None:
    alarms = _resources(sam, "AWS::CloudWatch::Alarm").values()
    watched = {str(d["Value"]) for a in alarms for d in a["Properties"].get("Dimensions", [])}
    for worker in _workers(sam):
        dlq = sam["Resources"][_queue_of(sam, worker)]["Properties"]["RedrivePolicy"]["deadLetterTargetArn"]
        assert str({"Fn::GetAtt": [dlq["Fn::GetAtt"][0], "QueueName"]}) in watched
        assert str({"Ref": worker}) in watched
    assert str({"Ref": "OutboxRelayFunction"}) in watched  # IteratorAge
    assert str({"Ref": "BatchCounterFunction"}) in watched  # IteratorAge: the batches' callbacks wait on it
    # The schedules' DLQ, which the reconciler drains: its age says when it does not
    assert str({"Fn::GetAtt": ["ScheduleDlq", "QueueName"]}) in watched
    assert any("FROM SCHEMA(Converge" in str(a["Properties"].get("Metrics")) for a in alarms)  # UNKNOWN operations


WRITE_ACTIONS = {
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
    "dynamodb:DeleteItem",
    "dynamodb:BatchWriteItem",
    "dynamodb:PartiQLInsert",
    "dynamodb:PartiQLUpdate",
    "dynamodb:PartiQLDelete",
}


def _names(resource: Any) -> set[str]:
    """The logical ids a Resource entry refers to (GetAtt / Ref / Sub)."""
    return {part for part in str(resource).replace("'", " ").replace(".", " ").split() if part[:1].isupper()}


def test_requests_and_state_are_two_tables_and_producers_cannot_write_the_state(cfn: dict[str, Any]) -> None:
    # Given the jobs table (requests) and the state table (converge's records)
    jobs, state = cfn["Resources"]["JobsTable"]["Properties"], cfn["Resources"]["StateTable"]["Properties"]
    # Then the stream carries old images too (a rewrite is told apart from the original), and the jobs table
    # carries no index: the attention and conflict indexes are the state table's
    assert jobs["StreamSpecification"]["StreamViewType"] == "NEW_AND_OLD_IMAGES"
    assert "GlobalSecondaryIndexes" not in jobs
    hash_keys = {index["KeySchema"][0]["AttributeName"] for index in state["GlobalSecondaryIndexes"]}
    assert hash_keys == {"attention", "conflict"}
    # State writes never re-enter the outbox: the state table's stream goes to the batch counter alone
    assert state["StreamSpecification"]["StreamViewType"] == "NEW_AND_OLD_IMAGES"
    # And the producer policy grants PutItem on the jobs table and no write action at all on the state table
    producer = cfn["Resources"]["ProducerPolicy"]["Properties"]["PolicyDocument"]["Statement"]
    granted = {(action, name) for s in producer for action in _as_list(s["Action"]) for name in _names(s["Resource"])}
    assert ("dynamodb:PutItem", "JobsTable") in granted
    assert not {action for action, name in granted if name == "StateTable"} & WRITE_ACTIONS


def test_only_converge_functions_write_the_state_table(cfn: dict[str, Any]) -> None:
    writers = {
        owner
        for owner, statement in _iam_statements(cfn)
        if "StateTable" in _names(statement["Resource"]) and set(_as_list(statement["Action"])) & WRITE_ACTIONS
    }
    assert writers == {
        "OutboxRelayRole",
        "CriticalWorkerRole",
        "DefaultWorkerRole",
        "BulkWorkerRole",
        "DlqRedriveRole",
        "ResumerRole",
        "ReconcilerRole",
        "EnqueueApiRole",  # a caller's cancel of its own operation
    }


def test_the_scheduler_role_may_only_send_to_the_work_queues_from_the_stacks_schedule_group(
    cfn: dict[str, Any],
) -> None:
    role = cfn["Resources"]["SchedulerRole"]["Properties"]
    # Then only EventBridge Scheduler may assume it, and only for schedules of the stack's own group
    [trust] = role["AssumeRolePolicyDocument"]["Statement"]
    assert trust["Principal"] == {"Service": "scheduler.amazonaws.com"}
    assert "DelayedJobsScheduleGroup" in json.dumps(trust["Condition"]["ArnLike"]["aws:SourceArn"])
    # ...and all it may do is SendMessage to the three work queues, and (a firing it could not deliver: the
    # schedule's dead-letter event, which Scheduler sends with the execution role) to the schedules' DLQ
    statements = [s for policy in role["Policies"] for s in policy["PolicyDocument"]["Statement"]]
    assert [_as_list(s["Action"]) for s in statements] == [["sqs:SendMessage"], ["sqs:SendMessage"]]
    assert statements[0]["Resource"] == [
        {"Fn::GetAtt": [q, "Arn"]} for q in ("CriticalQueue", "DefaultQueue", "BulkQueue")
    ]
    assert statements[1]["Resource"] == {"Fn::GetAtt": ["ScheduleDlq", "Arn"]}
    # And the relay may create schedules in that group only, and pass that role only, to the scheduler
    relay = {s.get("Sid"): s for owner, s in _iam_statements(cfn) if owner == "OutboxRelayRole"}
    assert _as_list(relay["ScheduleDelayed"]["Action"]) == ["scheduler:CreateSchedule"]
    assert "DelayedJobsScheduleGroup" in json.dumps(relay["ScheduleDelayed"]["Resource"])
    assert relay["PassSchedulerRole"]["Resource"] == {"Fn::GetAtt": ["SchedulerRole", "Arn"]}
    assert relay["PassSchedulerRole"]["Condition"] == {
        "StringEquals": {"iam:PassedToService": "scheduler.amazonaws.com"}
    }


def test_each_queues_settings_are_parameters_each_read_by_its_queue_and_its_worker(sam: dict[str, Any]) -> None:
    for worker in _workers(sam):
        props = sam["Resources"][worker]["Properties"]
        queue = props["Environment"]["Variables"]["QUEUE_NAME"]
        prefix = queue.capitalize()
        [event] = [e for e in props["Events"].values() if e["Type"] == "SQS"]
        cap = event["Properties"]["ScalingConfig"]["MaximumConcurrency"]
        assert cap == {"Ref": f"{prefix}MaximumConcurrency"}, worker
        # The same number reserved: below the cap, Lambda would throttle received messages back to the queue
        # (each a receive towards the DLQ); above it, capacity would sit reserved and unused
        assert props["ReservedConcurrentExecutions"] == cap, worker
        concurrency = sam["Parameters"][f"{prefix}MaximumConcurrency"]
        assert (concurrency["Type"], concurrency["MinValue"], concurrency["MaxValue"]) == ("Number", 2, 1000)  # AWS's
        # And the worker's last attempt is the queue's last receive: one parameter for both
        receives = {"Ref": f"{prefix}MaxReceiveCount"}
        assert props["Environment"]["Variables"]["MAX_RECEIVE_COUNT"] == receives, worker
        source = event["Properties"]["Queue"]["Fn::GetAtt"][0]
        assert sam["Resources"][source]["Properties"]["RedrivePolicy"]["maxReceiveCount"] == receives, worker
        count = sam["Parameters"][f"{prefix}MaxReceiveCount"]
        assert (count["Type"], count["MinValue"], count["MaxValue"]) == ("Number", 1, 1000)  # what SQS accepts
    defaults = {
        name: spec["Default"]
        for name, spec in sam["Parameters"].items()
        if name.endswith(("MaxReceiveCount", "MaximumConcurrency"))
    }
    assert defaults == {
        "CriticalMaxReceiveCount": 5, "CriticalMaximumConcurrency": 20, "DefaultMaxReceiveCount": 4,
        "DefaultMaximumConcurrency": 10, "BulkMaxReceiveCount": 3, "BulkMaximumConcurrency": 2,
    }  # fmt: skip


def test_the_relay_reads_producers_writes_only_and_its_failures_are_read_by_the_reconciler(sam: dict[str, Any]) -> None:
    stream = sam["Resources"]["OutboxRelayFunction"]["Properties"]["Events"]["JobsStream"]["Properties"]
    assert [f["Pattern"] for f in stream["FilterCriteria"]["Filters"]] == ['{"eventName": ["INSERT", "MODIFY"]}']
    failure_queue = stream["DestinationConfig"]["OnFailure"]["Destination"]["Fn::GetAtt"][0]
    reconciler = sam["Resources"]["ReconcilerFunction"]["Properties"]
    assert reconciler["Environment"]["Variables"]["RELAY_FAILURE_QUEUE_URL"] == {"Ref": failure_queue}
    assert [event["Type"] for event in reconciler["Events"].values()] == ["Schedule"]


def test_recurring_schedules_name_registered_job_types(sam: dict[str, Any]) -> None:
    import json

    catalogue = pytest.importorskip("catalogue")
    registered = {b.job_type for b in catalogue.BINDINGS}
    # Given the template's schedules of converge's recurring function (a team's recurring jobs are its own)
    recurring = {"Fn::GetAtt": ["Converge", "Outputs.RecurringFunctionArn"]}
    targets = [t for rule in _resources(sam, "AWS::Events::Rule").values() for t in rule["Properties"]["Targets"]]
    inputs = [json.loads(target["Input"]) for target in targets if target["Arn"] == recurring]
    # Then each names a registered job type, and converge's function has no schedule of its own
    assert inputs and all(given["job_type"] in registered for given in inputs)
    assert "Events" not in sam["Resources"]["RecurringFunction"]["Properties"]


def test_sam_validate_lint_is_clean() -> None:
    # Given the SAM CLI installed with the dev tools / When it validates the template with its linter
    import os
    import subprocess
    import sys
    from pathlib import Path

    sam_cli = Path(sys.executable).with_name("sam")
    assert sam_cli.exists(), "aws-sam-cli is part of the dev dependencies"
    environment = {**os.environ, "SAM_CLI_TELEMETRY": "0", "AWS_DEFAULT_REGION": "us-east-1", "AWS_REGION": "us-east-1"}
    for template in (DEFAULT_TEMPLATE, APPLICATION):
        result = subprocess.run(
            [str(sam_cli), "validate", "--lint", "--template-file", str(template)],
            capture_output=True,
            text=True,
            env=environment,
            timeout=300,
        )
        # Then it reports a valid template and nothing else to fix, for the template and converge's application
        assert result.returncode == 0, result.stdout + result.stderr
        assert "is a valid SAM Template" in result.stdout + result.stderr


def _denies_plaintext(statement: dict[str, Any], service: str) -> bool:
    return (
        statement.get("Effect") == "Deny"
        and statement.get("Principal") == "*"
        and statement.get("Action") in (f"{service}:*", [f"{service}:*"])
        and statement.get("Condition") == {"Bool": {"aws:SecureTransport": "false"}}
    )


def test_every_queue_and_table_refuses_requests_without_tls(cfn: dict[str, Any]) -> None:
    # Given every SQS queue (queues and DLQs) and every DynamoDB table of the deployed template
    queues = set(_resources(cfn, "AWS::SQS::Queue"))
    tables = _resources(cfn, "AWS::DynamoDB::Table")
    assert queues and tables

    # Then each queue is under a queue policy that denies any request not made over TLS
    covered: set[str] = set()
    for policy in _resources(cfn, "AWS::SQS::QueuePolicy").values():
        statements = policy["Properties"]["PolicyDocument"]["Statement"]
        denied = [s for s in statements if _denies_plaintext(s, "sqs")]
        for statement in denied:
            covered |= {arn["Fn::GetAtt"][0] for arn in _as_list(statement["Resource"])}
        named = {queue["Ref"] for queue in policy["Properties"]["Queues"]}
        assert named <= covered, named - covered  # the statement names each queue the policy is attached to
    assert covered >= queues, queues - covered
    # And each table carries a resource policy that does the same, for the table and its indexes ("*")
    for logical_id, table in tables.items():
        statements = table["Properties"].get("ResourcePolicy", {}).get("PolicyDocument", {}).get("Statement", [])
        assert any(_denies_plaintext(s, "dynamodb") and s["Resource"] == "*" for s in statements), logical_id


def test_the_template_grants_no_one_the_api_routes_least_of_all_the_admin_route(cfn: dict[str, Any]) -> None:
    # Callers are granted execute-api:Invoke by their own account's IAM, per route (docs/http-api.md); the stack
    # grants none, so reading any operation (GET /admin/operations/*) is never granted by deploying it.
    for owner, statement in _iam_statements(cfn):
        actions = [a.lower() for a in _as_list(statement.get("Action", []))]
        assert not any(a.startswith("execute-api") for a in actions), owner


def test_a_plain_producer_may_not_name_the_caller_an_operation_answers_to(cfn: dict[str, Any]) -> None:
    # Given the producer policy / Then it denies a PutItem (or a batch's BatchWriteItem) of the jobs table whose item
    # carries `submitted_by` (only the enqueue API, under its own role, sets it), whatever else the policy allows
    producer = cfn["Resources"]["ProducerPolicy"]["Properties"]["PolicyDocument"]["Statement"]
    [deny] = [s for s in producer if s["Effect"] == "Deny" and s.get("Sid") == "NoCallerIdentity"]
    assert _as_list(deny["Action"]) == ["dynamodb:PutItem", "dynamodb:BatchWriteItem"]
    assert "JobsTable" in _names(deny["Resource"])
    assert deny["Condition"] == {"ForAnyValue:StringEquals": {"dynamodb:Attributes": ["submitted_by"]}}
    # And the enqueue API's own role still may write it
    api = {(a, n) for owner, s in _iam_statements(cfn) if owner == "EnqueueApiRole" and s.get("Effect") == "Allow"
           for a in _as_list(s["Action"]) for n in _names(s["Resource"])}  # fmt: skip
    assert ("dynamodb:PutItem", "JobsTable") in api


def test_the_reconciler_defers_a_replayed_delay_as_the_relay_does(sam: dict[str, Any], cfn: dict[str, Any]) -> None:
    # Given the relay's and the reconciler's settings and grants
    relay = sam["Resources"]["OutboxRelayFunction"]["Properties"]["Environment"]["Variables"]
    reconciler = sam["Resources"]["ReconcilerFunction"]["Properties"]["Environment"]["Variables"]
    # Then the reconciler has every setting a one-time schedule needs, as the relay has them
    for name in ("SCHEDULER_ROLE_ARN", "SCHEDULE_DLQ_ARN", "CRITICAL_QUEUE_ARN", "DEFAULT_QUEUE_ARN", "BULK_QUEUE_ARN"):
        assert reconciler[name] == relay[name], name
    assert reconciler["SCHEDULE_DLQ_URL"] == {"Ref": "ScheduleDlq"}
    # And the same two grants: create schedules in the stack's group only, pass the scheduler role only
    grants = {s.get("Sid"): s for owner, s in _iam_statements(cfn) if owner == "ReconcilerRole"}
    relay_grants = {s.get("Sid"): s for owner, s in _iam_statements(cfn) if owner == "OutboxRelayRole"}
    for sid in ("ScheduleDelayed", "PassSchedulerRole"):
        assert grants[sid] == relay_grants[sid], sid
    # And it reads the schedules' DLQ (and deletes what it handled), and queries the schedule index
    assert "ScheduleDlq" in _names(grants["ReadFailedFirings"]["Resource"])
    assert "sqs:DeleteMessage" in grants["ReadFailedFirings"]["Action"]
    assert "ScheduleIndex" in json.dumps(grants["ListStuck"]["Resource"])


def test_every_one_time_schedule_names_a_dead_letter_queue_and_a_retry_policy() -> None:
    # Given the schedule converge creates for a long delay (the arguments it sends)
    from converge.flow.delays import RETRY_POLICY, DelayedDispatch
    from converge.flow.dispatch import Dispatcher, Outgoing
    from converge.flow.registry import Queue, Registry
    from converge.model.envelope import Envelope
    from converge.runtime.settings import Settings

    calls: list[dict[str, Any]] = []

    class Scheduler:
        def create_schedule(self, **request: Any) -> None:
            calls.append(request)

    settings = Settings(
        JOBS_TABLE="j", MARKERS_TABLE="m", STATE_TABLE="s", SCHEDULE_GROUP="g", SCHEDULER_ROLE_ARN="arn:role",
        SCHEDULE_DLQ_ARN="arn:aws:sqs:us-east-1:123456789012:schedule-dlq", CRITICAL_QUEUE_ARN="arn:q",
    )  # fmt: skip
    delays = DelayedDispatch(
        settings.schedules, settings.queues, Dispatcher(settings.queues, Registry(), None), lambda: Scheduler()
    )
    envelope = Envelope(operation_id="op-1", job_type="x.v1", payload={})
    delays._create_schedule(Outgoing("url", envelope, queue=Queue.CRITICAL), 2_000_000_000.0)
    # Then its target names the DLQ and the retry policy
    [request] = calls
    assert request["Target"]["DeadLetterConfig"] == {"Arn": "arn:aws:sqs:us-east-1:123456789012:schedule-dlq"}
    assert request["Target"]["RetryPolicy"] == RETRY_POLICY
    # And the policy is within what the service accepts (0-185 attempts, 60-86400 s)
    assert 0 <= RETRY_POLICY["MaximumRetryAttempts"] <= 185
    assert 60 <= RETRY_POLICY["MaximumEventAgeInSeconds"] <= 86400
