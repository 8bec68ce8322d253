"""template.yaml deploys into moto's CloudFormation; names come from the stack, as on AWS."""

from __future__ import annotations

import json

from localcloud import LocalCloud


def test_every_template_output_resolves(cloud: LocalCloud) -> None:
    # Given the deployed stack and converge's application in it, then the outputs hold every output either template
    # declares (whose condition holds), resolved
    assert cloud.deployment is not None
    declared = {
        name
        for part in cloud.deployment.parts()
        for name, o in (part.template.get("Outputs") or {}).items()
        if "Condition" not in o or part.resolver.condition(o["Condition"])
    }
    assert {"JobsTableName", "AppTableName", "RecurringFunctionArn"} < declared and set(cloud.outputs) == declared
    assert all(isinstance(v, str) and v and "{" not in v for v in cloud.outputs.values())
    # And the root re-exports the application's own outputs it names, with the application's values
    application = cloud.deployment.nested["Converge"]
    assert cloud.deployment.own_outputs["JobsTableName"] == application.own_outputs["JobsTableName"]
    # And both stacks are complete: the application's as created, the root's once what uses the application's
    # outputs (its re-exported outputs, its schedule of the recurring function) is added by an update
    stacks = {s["StackName"]: s["StackStatus"] for s in cloud.client("cloudformation").describe_stacks()["Stacks"]}
    assert stacks == {"converge": "UPDATE_COMPLETE", application.stack_name: "CREATE_COMPLETE"}


def test_outputs_name_real_resources(cloud: LocalCloud) -> None:
    sqs, dynamodb = cloud.client("sqs"), cloud.client("dynamodb")
    for key in ("CriticalQueueUrl", "DefaultQueueUrl", "BulkQueueUrl", "CriticalDlqUrl", "RelayFailureQueueUrl"):
        sqs.get_queue_attributes(QueueUrl=cloud.outputs[key], AttributeNames=["QueueArn"])
    jobs = dynamodb.describe_table(TableName=cloud.outputs["JobsTableName"])["Table"]
    assert jobs["StreamSpecification"]["StreamViewType"] == "NEW_AND_OLD_IMAGES"
    assert not jobs.get("GlobalSecondaryIndexes")  # moto lists an empty one
    state = dynamodb.describe_table(TableName=cloud.outputs["StateTableName"])["Table"]
    indexes = {i["IndexName"] for i in state["GlobalSecondaryIndexes"]}
    names = ("AttentionIndexName", "ConflictIndexName", "ScheduleIndexName")
    assert indexes == {cloud.outputs[name] for name in names}
    toggles = cloud.client("ssm").get_parameters_by_path(Path=cloud.outputs["TogglePrefix"])["Parameters"]
    assert toggles and all(p["Value"] == "off" for p in toggles)


def test_function_environments_are_resolved_from_the_stack(cloud: LocalCloud) -> None:
    # Given every function (converge's, and the template's own producers), then its environment holds deployed
    # names, never unresolved intrinsics
    for logical_id, spec in cloud.functions.items():
        env = spec.environment
        assert env["JOBS_TABLE"] == cloud.outputs["JobsTableName"]
        assert env["STATE_TABLE"] == cloud.outputs["StateTableName"]
        assert all(isinstance(v, str) and "Fn::" not in v and "Ref" not in v for v in env.values())
        if logical_id in ("SignUpFunction", "PartnerCreditFunction"):  # producers: the jobs table and their own
            assert env["APP_TABLE"] == cloud.outputs["AppTableName"] and "CRITICAL_QUEUE_URL" not in env
            continue
        assert env["CRITICAL_QUEUE_URL"] == cloud.outputs["CriticalQueueUrl"]
        assert env["TOGGLE_PREFIX"] == cloud.outputs["TogglePrefix"]

    # And each worker's MAX_RECEIVE_COUNT and URLs match its own queue
    for source in cloud.queue_sources:
        env = cloud.functions[source.mapping.function_id].environment
        attributes = cloud.client("sqs").get_queue_attributes(QueueUrl=env["QUEUE_URL"], AttributeNames=["All"])
        redrive = json.loads(attributes["Attributes"]["RedrivePolicy"])
        assert env["QUEUE_URL"] == source.mapping.queue_url
        assert int(env["MAX_RECEIVE_COUNT"]) == int(redrive["maxReceiveCount"])
        assert redrive["deadLetterTargetArn"].endswith(env["DLQ_URL"].rsplit("/", 1)[-1])


def test_every_event_source_of_the_template_is_emulated(cloud: LocalCloud) -> None:
    # Given the transformed templates' event source mappings and rules (converge's application's with the root's),
    # then each has an emulation
    resources = {lid: r for part in cloud.deployment.parts() for lid, r in part.resources.items()}
    mappings = {lid for lid, r in resources.items() if r["Type"] == "AWS::Lambda::EventSourceMapping"}
    emulated = {s.mapping.logical_id for s in cloud.queue_sources + cloud.stream_sources}
    assert mappings == emulated
    rules = {lid for lid, r in resources.items() if r["Type"] in ("AWS::Events::Rule", "AWS::Scheduler::Schedule")}
    assert rules == {r.logical_id for r in cloud.bus.rules}


def test_a_fixture_template_with_other_names_deploys_the_same_way(probe_cloud: LocalCloud) -> None:
    # Given a template with different resources, then the cloud wires what that template declares
    assert set(probe_cloud.functions) == {"ProbeFunction", "ApiFunction"}
    [source] = probe_cloud.queue_sources
    assert source.mapping.queue_url == probe_cloud.outputs["WorkQueueUrl"]
    assert source.mapping.report_batch_item_failures
    assert probe_cloud.stream_sources == []
