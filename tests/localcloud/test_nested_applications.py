"""A nested application (AWS::Serverless::Application from a local path) deploys as a stack of its own in
moto, with its parent's parameters in and its outputs out, and its functions, queues and schedules are
emulated as if they were the root's (tests/localcloud/nested_app: a parent and its child)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from localcloud import LocalCloud
from localcloud.intrinsics import UnresolvableError
from localcloud.template import application_templates, template_declaring

PARENT = Path(__file__).parent / "nested_app" / "template.yaml"


@pytest.fixture
def nested() -> Iterator[LocalCloud]:
    with LocalCloud.start(PARENT, parameters={"Greeting": "hi"}) as local:
        yield local


def _stacks(cloud: LocalCloud) -> dict[str, dict]:
    return {s["StackName"]: s for s in cloud.client("cloudformation").describe_stacks()["Stacks"]}


def test_the_child_is_a_stack_of_its_own_with_the_parameters_its_parent_passed(nested: LocalCloud) -> None:
    # Given the parent deployed, then the child application is a second stack, named as CloudFormation names one
    assert nested.deployment is not None
    child = nested.deployment.nested["Greeter"]
    stacks = _stacks(nested)
    assert set(stacks) == {"converge", child.stack_name}
    assert child.stack_name.startswith("converge-Greeter-")
    assert stacks[child.stack_name]["StackStatus"] == "CREATE_COMPLETE"

    # And its parameters are the parent's values, resolved: a Sub of the parent's parameter, the parent's
    # bucket and managed policy
    passed = {p["ParameterKey"]: p["ParameterValue"] for p in stacks[child.stack_name]["Parameters"]}
    bucket = nested.deployment.own_outputs["BucketName"]
    policy = nested.deployment.ref("GreetingsWriterPolicy")
    assert passed["Greeting"] == "hi, world" and passed["BucketName"] == bucket
    assert child.parameters["WriterPolicyArns"] == policy  # moto shows a list parameter as a Python list's repr
    assert policy.startswith("arn:aws:iam::") and policy in {
        p["Arn"] for p in nested.client("iam").list_policies(Scope="Local")["Policies"]
    }

    # And its table and queues exist in moto under the child stack's names
    resources = nested.client("cloudformation").list_stack_resources(StackName=child.stack_name)
    declared = {r["LogicalResourceId"]: r["PhysicalResourceId"] for r in resources["StackResourceSummaries"]}
    assert {"GreetingsTable", "WorkQueue", "WorkDlq", "GreeterRole", "GreeterFunction"} <= set(declared)
    nested.client("dynamodb").describe_table(TableName=declared["GreetingsTable"])
    assert declared["WorkQueue"] in nested.client("sqs").list_queues()["QueueUrls"]


def test_the_parent_reads_the_childs_outputs(nested: LocalCloud) -> None:
    # Given the deployed parent, then its outputs and its resources that use the child's outputs hold them
    assert nested.deployment is not None
    child = nested.deployment.nested["Greeter"]
    own = nested.deployment.own_outputs
    assert own["GreeterWorkQueueUrl"] == child.own_outputs["WorkQueueUrl"]
    assert own["GreeterStackId"] == _stacks(nested)[child.stack_name]["StackId"]
    parameter = nested.client("ssm").get_parameter(Name="/nested/work-queue-url")["Parameter"]
    assert parameter["Value"] == child.own_outputs["WorkQueueUrl"]

    # And the root stack holds its own resources only (moto has no nested stacks: the child is a stack apart)
    root = nested.client("cloudformation").list_stack_resources(StackName="converge")["StackResourceSummaries"]
    assert {r["LogicalResourceId"] for r in root} == {"GreetingsBucket", "GreetingsWriterPolicy", "WorkQueueParameter"}


def test_one_lookup_finds_a_resource_wherever_it_is_declared(nested: LocalCloud) -> None:
    # Given the deployment, then names resolve the same whether a resource is the root's or the child's
    d = nested.deployment
    assert d is not None
    child = d.nested["Greeter"]
    assert d.locate("GreetingsTable") is child and d.locate("GreetingsBucket") is d
    assert d.ref("GreetingsTable") == child.own_outputs["GreetingsTableName"]
    assert d.get_att("WorkQueue", "Arn").endswith(":" + d.ref("WorkQueue").rsplit("/", 1)[-1])
    assert d.resource("GreeterFunction")["Type"] == "AWS::Lambda::Function"
    with pytest.raises(UnresolvableError, match="NoSuchThing"):
        d.locate("NoSuchThing")

    # And the outputs callers read hold the child's beside the parent's (the parent's own win)
    assert nested.outputs["GreetingsTableName"] == d.ref("GreetingsTable")
    assert nested.outputs["BucketName"] == d.own_outputs["BucketName"]

    # And so does the lookup in the templates as written, before any deployment
    found = application_templates(PARENT)
    assert [(t.path.parent.name, t.given.get("Greeting")) for t in found] == [
        ("nested_app", None),
        ("child", {"Fn::Sub": "${Greeting}, world"}),
    ]
    assert template_declaring("GreetingsTable", PARENT)["Parameters"].keys() == {
        "Greeting",
        "BucketName",
        "WriterPolicyArns",
    }
    assert "Greeter" in template_declaring("GreetingsBucket", PARENT)["Resources"]


def test_the_childs_function_runs_from_its_queue_with_its_own_environment(nested: LocalCloud) -> None:
    # Given a greeting sent to the child's queue
    sqs = nested.client("sqs")
    sqs.send_message(QueueUrl=nested.outputs["WorkQueueUrl"], MessageBody=json.dumps({"name": "ada"}))

    # When the cloud drains
    stats = nested.drain()

    # Then the child's function ran once, from the child's queue mapping, and its effects are in the child's
    # table and the parent's bucket
    assert stats.quiescent and stats.invocations == {"GreeterFunction": 1}
    assert stats.messages_deleted == 1 and stats.messages_failed == 0
    spec = nested.functions["GreeterFunction"]
    assert spec.environment["GREETING"] == "hi, world"
    assert spec.environment["GREETINGS_BUCKET"] == nested.outputs["BucketName"]
    items = nested.client("dynamodb").scan(TableName=nested.outputs["GreetingsTableName"])["Items"]
    assert items == [{"id": {"S": "ada"}, "greeting": {"S": "hi, world: ada"}}]
    body = nested.client("s3").get_object(Bucket=nested.outputs["BucketName"], Key="greetings/ada")["Body"].read()
    assert body == b"hi, world: ada"
    assert nested.iam is not None and not nested.iam.denials


def test_the_iam_check_holds_the_childs_role_to_the_policies_its_parent_passed(nested: LocalCloud) -> None:
    # Given a greeting that asks for a key outside greetings/, which the parent's policy does not grant
    sqs = nested.client("sqs")
    sqs.send_message(
        QueueUrl=nested.outputs["WorkQueueUrl"], MessageBody=json.dumps({"name": "eve", "key": "elsewhere/eve"})
    )

    # When the cloud drains
    stats = nested.drain()

    # Then each attempt was refused by the IAM check, the record failed, and after maxReceiveCount (2) it is in
    # the child's dead-letter queue; nothing was written
    assert nested.iam is not None
    assert [(d.function_id, d.action) for d in nested.iam.denials] == [("GreeterFunction", "s3:PutObject")] * 2
    assert stats.messages_failed == 2 and stats.invocations == {"GreeterFunction": 2}
    dead = sqs.receive_message(QueueUrl=nested.outputs["WorkDlqUrl"], MaxNumberOfMessages=10)["Messages"]
    assert [json.loads(m["Body"])["name"] for m in dead] == ["eve"]
    assert nested.client("dynamodb").scan(TableName=nested.outputs["GreetingsTableName"])["Items"] == []
    assert nested.client("s3").list_objects_v2(Bucket=nested.outputs["BucketName"]).get("KeyCount") == 0


def test_the_childs_schedule_fires_its_function(nested: LocalCloud) -> None:
    # Given the child's hourly schedule, when an hour passes, then it invokes the child's function with its input
    deliveries = nested.tick_schedules(nested.clock.now() + 3600)
    assert [d.ok for d in deliveries] == [True]
    assert deliveries[0].target_arn == nested.functions["GreeterFunction"].arn
    assert nested.invocations[-1].logical_id == "GreeterFunction"
    assert nested.invocations[-1].result == {"tick": "hourly"}


def test_a_function_declared_twice_across_the_parts_is_refused(tmp_path: Path) -> None:
    # Given a parent that declares a function under the same logical id as its child's
    child = PARENT.parent / "child"
    (tmp_path / "greeter").symlink_to(child / "greeter")
    (tmp_path / "template.yaml").write_text(
        PARENT.read_text()
        .replace("Location: child/template.yaml", f"Location: {child / 'template.yaml'}")
        .replace(
            "Resources:\n",
            "Resources:\n  GreeterFunction:\n    Type: AWS::Serverless::Function\n    Properties:\n"
            "      CodeUri: greeter/\n      Handler: app.handler\n      Runtime: python3.13\n",
            1,
        )
    )
    # When it is deployed, then the local cloud says why it cannot tell them apart
    refused = pytest.raises(ValueError, match=r"functions \['GreeterFunction'\] are declared both")
    with refused, LocalCloud.start(tmp_path / "template.yaml"):
        pass
