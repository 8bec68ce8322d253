"""The local cloud's IAM check: each function's calls are authorised against its role, as the template grants.

A missing grant fails here as it would after a deploy: the call raises AWS's access-denied error, the job
ends with it on its receipt, nothing is sent, and the denial is recorded and logged.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from catalogue import examples
from converge.model.states import OperationState
from converge_cli.commands.demo_run import runtime_for
from localcloud import LocalCloud, effects
from localcloud.faults import FaultInjector, FaultKind
from localcloud.iam import UnmappedApiCall
from localcloud.packaging import code_locations
from localcloud.server import catalogue_seeder
from localcloud.template import application_templates
from tests.conftest import TEMPLATE

EMAIL_JOB = "email.partner-verification.v1"
EMAIL_PAYLOAD = {"user_id": examples.UNCONFIRMED_USER}


def template_variant(tmp_path: Path, edit: Callable[[dict[str, Any]], None]) -> Path:
    """A copy of template.yaml and of converge's application it includes, changed by `edit` (given the resources of
    both, parsed), deployable from `tmp_path`."""
    parts = application_templates(TEMPLATE)
    for part in parts:  # the copies live elsewhere: absolute code paths
        for logical_id, (prop, uri) in code_locations(part.sam).items():
            part.sam["Resources"][logical_id]["Properties"][prop] = str((part.path.parent / uri).resolve())
    edit({lid: resource for part in parts for lid, resource in part.sam["Resources"].items()})
    for part in parts:  # JSON is YAML: the loader reads it as the original
        copy = tmp_path / part.path.relative_to(TEMPLATE.parent)
        copy.parent.mkdir(parents=True, exist_ok=True)
        copy.write_text(json.dumps(part.sam))
    return tmp_path / TEMPLATE.name


def template_without(tmp_path: Path, resource: str, action: str) -> Path:
    """A copy of template.yaml whose `resource` (a role or policy) no longer grants `action` anywhere."""

    def remove(resources: dict[str, Any]) -> None:
        properties = resources[resource]["Properties"]
        documents = (
            [properties["PolicyDocument"]]
            if "PolicyDocument" in properties
            else [policy["PolicyDocument"] for policy in properties["Policies"]]
        )
        removed = 0
        for document in documents:
            kept = []
            for statement in document["Statement"]:
                actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
                left = [a for a in actions if a != action]
                removed += len(actions) - len(left)
                if left:
                    kept.append({**statement, "Action": left})
            document["Statement"] = kept
        assert removed, f"{resource} does not grant {action}"

    return template_variant(tmp_path, remove)


@pytest.fixture
def started(tmp_path: Path) -> Iterator[Callable[..., LocalCloud]]:
    """Start a seeded cloud (from a template copy, with keyword options); closed after the test."""
    stack: list[Any] = []

    def start(template: Path | None = None, **options: Any) -> LocalCloud:
        context = LocalCloud.start(template, seeders=[catalogue_seeder], **options)
        stack.append(context)
        cloud = context.__enter__()
        effects.instrument(cloud)
        return cloud

    yield start
    for context in reversed(stack):
        context.__exit__(None, None, None)


def test_a_worker_without_ses_send_email_fails_the_email_job_with_access_denied(started, tmp_path):
    # Given the template with ses:SendEmail removed from the critical worker's grants
    cloud = started(template_without(tmp_path, "CriticalRunnerPolicy", "ses:SendEmail"))
    converge = runtime_for(cloud)
    # When the e-mail job is enqueued and the cloud drains (every retry included)
    converge.enqueue(EMAIL_JOB, "iam-email", EMAIL_PAYLOAD)
    cloud.drain()
    # Then no e-mail was sent, and the operation FAILED at its first attempt (a missing grant is a configuration
    # error: no retry can fix it), its receipt naming the action, the resource and where the grant belongs: the
    # template's own runner policy, which converge's worker role takes as a parameter
    assert effects.count(cloud).for_operation("iam-email")["ses"] == 0
    stored = converge.operations.require("iam-email")
    assert (stored.state, stored.attempts) == (OperationState.FAILED, 1)
    identity = f"arn:aws:ses:us-east-1:123456789012:identity/{cloud.outputs['SenderEmail']}"
    assert stored.last_error.startswith(
        f"missing grant: not authorized to perform: ses:SendEmail on resource: {identity}"
    )
    assert "grant it in CriticalRunnerPolicy of template.yaml" in stored.last_error
    # And the denial is recorded and in the worker's log, naming the function, its role, the action and resource
    denial = cloud.iam.denied("CriticalWorkerFunction")[0]
    assert (denial.action, denial.resource, denial.operation) == ("ses:SendEmail", identity, "SendEmail")
    assert "CriticalWorkerRole" in denial.message and denial.role.endswith(cloud.deployment.ref("CriticalWorkerRole"))
    assert any(
        "[local cloud IAM]" in line and "ses:SendEmail" in line for line in cloud.runtime.logs["CriticalWorkerFunction"]
    )


def test_a_worker_without_update_item_on_the_state_table_never_runs_the_job(started, tmp_path):
    # Given the template with dynamodb:UpdateItem removed from the critical worker's role
    cloud = started(template_without(tmp_path, "CriticalWorkerRole", "dynamodb:UpdateItem"))
    converge = runtime_for(cloud)
    # When the e-mail job is enqueued and the cloud drains
    converge.enqueue(EMAIL_JOB, "iam-lease", EMAIL_PAYLOAD)
    cloud.drain()
    # Then the worker could not take its lease: nothing was sent, the operation never started,
    # and every receipt was refused UpdateItem on the state table until SQS dead-lettered the message
    assert effects.count(cloud).for_operation("iam-lease")["ses"] == 0
    assert converge.operations.require("iam-lease").state is OperationState.ACCEPTED
    refused = {(d.action, d.resource) for d in cloud.iam.denied("CriticalWorkerFunction")}
    state_table = f"arn:aws:dynamodb:us-east-1:123456789012:table/{cloud.outputs['StateTableName']}"
    assert refused == {("dynamodb:UpdateItem", state_table)}
    dead = cloud.client("sqs").receive_message(QueueUrl=cloud.outputs["CriticalDlqUrl"], MaxNumberOfMessages=10)
    assert [json.loads(m["Body"])["operation_id"] for m in dead.get("Messages", [])] == ["iam-lease"]


def test_with_the_check_off_the_same_template_sends_the_email(started, tmp_path):
    # Given the template without ses:SendEmail, in a cloud started with check_iam=False
    cloud = started(template_without(tmp_path, "CriticalRunnerPolicy", "ses:SendEmail"), check_iam=False)
    converge = runtime_for(cloud)
    # When the e-mail job runs
    converge.enqueue(EMAIL_JOB, "iam-off", EMAIL_PAYLOAD)
    cloud.drain()
    # Then the call went through unchecked, as every call did before the check existed
    assert cloud.iam is None
    assert converge.operations.require("iam-off").state is OperationState.SUCCEEDED
    assert effects.count(cloud).for_operation("iam-off")["ses"] == 1


def test_the_template_as_is_runs_the_email_job_with_no_denial(started):
    # Given template.yaml as deployed
    cloud = started()
    converge = runtime_for(cloud)
    # When the e-mail job runs
    converge.enqueue(EMAIL_JOB, "iam-granted", EMAIL_PAYLOAD)
    cloud.drain()
    # Then every call was granted, and one e-mail was sent
    assert converge.operations.require("iam-granted").state is OperationState.SUCCEEDED
    assert effects.count(cloud).for_operation("iam-granted")["ses"] == 1
    assert list(cloud.iam.denials) == []


def test_a_call_the_check_cannot_map_fails_loudly_with_how_to_add_it(started):
    # Given a function whose code makes a call the mapping does not know
    cloud = started()

    def lists_tables_with_limits(event: Any, context: Any) -> Any:
        return cloud.client("dynamodb").describe_limits()

    cloud.override_handler("DlqRedriveFunction", lists_tables_with_limits)
    # When it is invoked
    # Then the call fails before it is sent, saying what is missing and how to add it
    with pytest.raises(UnmappedApiCall, match=r"dynamodb\.DescribeLimits.*register\('dynamodb', 'DescribeLimits'"):
        cloud.invoke("DlqRedriveFunction", {})
    assert [(d.kind, d.operation) for d in cloud.iam.denied("DlqRedriveFunction")] == [("unmapped", "DescribeLimits")]
    # And the same call made outside any function (a test's own client) is not checked
    assert cloud.client("dynamodb").describe_limits()["AccountMaxReadCapacityUnits"] > 0


def test_a_stand_in_handler_runs_under_the_functions_role(started):
    # Given the redrive function, whose role may read the jobs table but not write it
    cloud = started()
    jobs = cloud.outputs["JobsTableName"]

    def writes_a_request(event: Any, context: Any) -> Any:
        item = {"operation_id": {"S": "written-by-redrive"}}
        return cloud.client("dynamodb").put_item(TableName=jobs, Item=item)

    cloud.override_handler("DlqRedriveFunction", writes_a_request)
    heard: list[tuple[str, str]] = []  # what `converge local up --logs` prints
    cloud.runtime.log_listeners.append(lambda function_id, line: heard.append((function_id, line)))
    # When it tries a PutItem there
    with pytest.raises(ClientError) as refused:
        cloud.invoke("DlqRedriveFunction", {})
    # Then DynamoDB's own AccessDeniedException (HTTP 400) comes back, and nothing was written
    assert refused.value.response["Error"]["Code"] == "AccessDeniedException"
    assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert "dynamodb:PutItem" in str(refused.value) and "DlqRedriveRole" in str(refused.value)
    key = {"operation_id": {"S": "written-by-redrive"}}
    assert "Item" not in cloud.client("dynamodb").get_item(TableName=jobs, Key=key)
    # And the denial went to the function's log stream, as the logs command shows it
    assert [(f, line.split(" User:")[0]) for f, line in heard] == [("DlqRedriveFunction", "[local cloud IAM]")]


def test_the_fault_injector_and_the_check_work_together(started, tmp_path):
    # Given the template without ses:SendEmail and a fault injector throttling DynamoDB now and then
    cloud = started(template_without(tmp_path, "CriticalRunnerPolicy", "ses:SendEmail"))
    converge = runtime_for(cloud)
    faults = FaultInjector(cloud, seed=3)
    faults.rate(FaultKind.DYNAMODB_THROTTLE, 0.25)
    # When the e-mail job runs with both installed
    with faults.installed():
        converge.enqueue(EMAIL_JOB, "iam-faults", EMAIL_PAYLOAD)
        cloud.drain()
    # Then faults were injected, and the missing grant was still refused: no e-mail, the receipt says why
    assert faults.counts[FaultKind.DYNAMODB_THROTTLE.value] > 0
    assert effects.count(cloud).for_operation("iam-faults")["ses"] == 0
    assert (
        "missing grant: not authorized to perform: ses:SendEmail"
        in converge.operations.require("iam-faults").last_error
    )
    # And once the injector is gone the check still holds (it never depended on the injector's patch)
    refused_before = len(cloud.iam.denials)
    converge.enqueue(EMAIL_JOB, "iam-after-faults", {"user_id": examples.SECOND_UNCONFIRMED_USER})
    cloud.drain()
    assert len(cloud.iam.denials) > refused_before
    assert effects.count(cloud).for_operation("iam-after-faults")["ses"] == 0


def test_the_producer_policy_keeps_plain_puts_out_of_the_batches_id_space(started, tmp_path):
    # Given a function holding the template's ProducerPolicy alone (its own policies taken off)
    def producer_only(resources: dict[str, Any]) -> None:
        role = resources["DlqRedriveRole"]["Properties"]
        role["ManagedPolicyArns"] = [{"Ref": "ProducerPolicy"}]
        role["Policies"] = []

    cloud = started(template_variant(tmp_path, producer_only))
    jobs = cloud.outputs["JobsTableName"]

    def item(operation_id: str) -> dict[str, Any]:
        return {"operation_id": {"S": operation_id}, "job_type": {"S": "email.password-reset.v1"}}

    calls = {
        "put a request": lambda ddb: ddb.put_item(TableName=jobs, Item=item("op-1")),
        "put a child's id": lambda ddb: ddb.put_item(TableName=jobs, Item=item("b-1::0:zz")),
        "put a callback's id": lambda ddb: ddb.put_item(TableName=jobs, Item=item("b-1::callback")),
        "batch-write children": lambda ddb: ddb.batch_write_item(
            RequestItems={jobs: [{"PutRequest": {"Item": item(f"b-1::0:c{n}")}} for n in range(2)]}
        ),
        "batch-write a callback": lambda ddb: ddb.batch_write_item(
            RequestItems={jobs: [{"PutRequest": {"Item": item(i)}} for i in ("b-1::0:c3", "b-1::callback")]}
        ),
        "a callback in a transaction": lambda ddb: ddb.transact_write_items(
            TransactItems=[{"Put": {"TableName": jobs, "Item": item("b-1::callback")}}]
        ),
    }  # fmt: skip
    outcomes: dict[str, str] = {}

    def try_each(event: Any, context: Any) -> Any:
        for name, call in calls.items():
            try:
                call(cloud.client("dynamodb"))
                outcomes[name] = "ok"
            except ClientError as exc:
                outcomes[name] = exc.response["Error"]["Code"]
        return None

    cloud.override_handler("DlqRedriveFunction", try_each)
    # When it writes plain requests, ids of the batches' form, and a batch's children as an admission writes them
    cloud.invoke("DlqRedriveFunction", {})
    # Then a plain put and a batch's children are allowed; a put under a batch's id, and any write of a callback, not
    assert outcomes == {
        "put a request": "ok",
        "put a child's id": "AccessDeniedException",
        "put a callback's id": "AccessDeniedException",
        "batch-write children": "ok",
        "batch-write a callback": "AccessDeniedException",
        "a callback in a transaction": "AccessDeniedException",
    }
    scanned = cloud.client("dynamodb").scan(TableName=jobs)["Items"]
    assert sorted(i["operation_id"]["S"] for i in scanned) == ["b-1::0:c0", "b-1::0:c1", "op-1"]


def test_a_managed_policy_grants_and_a_permissions_boundary_caps(started, tmp_path):
    # Given the redrive function's role with the template's ProducerPolicy attached, and also as its boundary
    def attach(resources: dict[str, Any]) -> None:
        role = resources["DlqRedriveRole"]["Properties"]
        role["ManagedPolicyArns"] = [{"Ref": "ProducerPolicy"}]
        role["PermissionsBoundary"] = {"Ref": "ProducerPolicy"}

    cloud = started(template_variant(tmp_path, attach))
    jobs, state = cloud.outputs["JobsTableName"], cloud.outputs["StateTableName"]
    calls = {
        "put a request": lambda ddb: ddb.put_item(TableName=jobs, Item={"operation_id": {"S": "from-redrive"}}),
        "update a state": lambda ddb: ddb.update_item(
            TableName=state, Key={"operation_id": {"S": "x"}}, UpdateExpression="SET a = :a",
            ExpressionAttributeValues={":a": {"S": "b"}},
        ),
    }  # fmt: skip
    outcomes: dict[str, str] = {}

    def try_each(event: Any, context: Any) -> Any:
        for name, call in calls.items():
            try:
                call(cloud.client("dynamodb"))
                outcomes[name] = "ok"
            except ClientError as exc:
                outcomes[name] = exc.response["Error"]["Message"]
        return None

    cloud.override_handler("DlqRedriveFunction", try_each)
    # When the function writes a request (granted by the managed policy and within the boundary) and a state
    # (granted by its own policy, outside the boundary)
    cloud.invoke("DlqRedriveFunction", {})
    # Then the first is allowed and the second refused, the boundary named as the reason
    assert outcomes["put a request"] == "ok"
    assert "dynamodb:UpdateItem" in outcomes["update a state"] and "permissions boundary" in outcomes["update a state"]


def test_a_sam_generated_role_carries_its_aws_managed_policies(probe_cloud):
    # Given the fixture template, whose ProbeFunction has no Role: SAM generates one with AWS managed policies
    role = probe_cloud.iam.roles["ProbeFunction"]
    # Then the role is checked, its policies read from moto's copies of the AWS managed documents
    sources = {document.source for document in role.policies}
    assert {"AWSLambdaBasicExecutionRole", "AWSLambdaSQSQueueExecutionRole"} <= sources
    table = probe_cloud.outputs["ProbeTableName"]

    def writes_its_table(event: Any, context: Any) -> Any:
        return probe_cloud.client("dynamodb").put_item(TableName=table, Item={"id": {"S": "1"}})

    probe_cloud.override_handler("ProbeFunction", writes_its_table)
    # And a call none of them grants is refused
    with pytest.raises(ClientError, match="dynamodb:PutItem"):
        probe_cloud.invoke("ProbeFunction", {})
