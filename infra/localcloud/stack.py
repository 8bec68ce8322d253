"""Deploy a CloudFormation template into moto and answer Ref/GetAtt for its resources.

Clients discover names from the stack (outputs, resources), exactly as they would on AWS.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from .clients import ACCOUNT_ID, Clients
from .intrinsics import UnresolvableError
from .speedups import json_templates

CAPABILITIES = ["CAPABILITY_IAM", "CAPABILITY_NAMED_IAM", "CAPABILITY_AUTO_EXPAND"]


class StackDeployError(RuntimeError):
    """moto's CloudFormation did not reach CREATE_COMPLETE."""


def deploy_stack(clients: Clients, stack_name: str, template: dict[str, Any], parameters: dict[str, str]) -> None:
    cfn = clients("cloudformation")
    with json_templates():
        cfn.create_stack(
            StackName=stack_name,
            TemplateBody=json.dumps(template),
            Parameters=_declared(template, parameters),
            Capabilities=CAPABILITIES,
        )
    _check_status(clients, stack_name, "CREATE_COMPLETE")


def update_stack(
    clients: Clients,
    stack_name: str,
    template: dict[str, Any],
    parameters: dict[str, str],
    unchanged: frozenset[str] = frozenset(),
) -> None:
    """Add to a deployed stack what had to wait (the resources that use a nested application's outputs).

    `unchanged`: the resources the update leaves as they are. moto writes a name it generated (a topic's, a queue's)
    into the definition it keeps, so such a resource would look changed and be replaced under a new name, behind the
    back of everything given the first (a function's environment): each is sent as moto keeps it."""
    if unchanged:
        kept = _kept_definitions(clients, stack_name)
        same = {lid: kept[lid] for lid in unchanged if lid in kept}
        template = {**template, "Resources": {**template["Resources"], **same}}
    with json_templates():
        clients("cloudformation").update_stack(
            StackName=stack_name,
            TemplateBody=json.dumps(template),
            Parameters=_declared(template, parameters),
            Capabilities=CAPABILITIES,
        )
    _check_status(clients, stack_name, "UPDATE_COMPLETE")


def _kept_definitions(clients: Clients, stack_name: str) -> dict[str, Any]:
    """The resource definitions moto keeps for a deployed stack (with the names it generated written in)."""
    from moto.cloudformation.models import cloudformation_backends

    backend = cloudformation_backends[ACCOUNT_ID][clients.region]
    stack = next(s for s in backend.stacks.values() if s.name == stack_name and s.status != "DELETE_COMPLETE")
    return dict(stack.resource_map._resource_json_map)


def _declared(template: dict[str, Any], parameters: dict[str, str]) -> list[dict[str, str]]:
    declared = template.get("Parameters") or {}
    return [{"ParameterKey": key, "ParameterValue": value} for key, value in parameters.items() if key in declared]


def _check_status(clients: Clients, stack_name: str, expected: str) -> None:
    cfn = clients("cloudformation")
    stack = cfn.describe_stacks(StackName=stack_name)["Stacks"][0]
    if stack["StackStatus"] != expected:
        events = cfn.describe_stack_events(StackName=stack_name)["StackEvents"]
        reasons = [e.get("ResourceStatusReason") for e in events if e.get("ResourceStatusReason")]
        raise StackDeployError(f"stack {stack_name} is {stack['StackStatus']}: {reasons[:5]}")


def stack_outputs(clients: Clients, stack_name: str) -> dict[str, str]:
    stack = clients("cloudformation").describe_stacks(StackName=stack_name)["Stacks"][0]
    return {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])}


@dataclass
class DeployedResource:
    logical_id: str
    type: str
    physical_id: str
    # Attribute values known without asking a service (e.g. resources the local cloud provisioned).
    attributes: dict[str, Any] = field(default_factory=dict)


class StackResources:
    """Ref and GetAtt for a deployed stack, looked up from the services like CloudFormation would."""

    def __init__(self, clients: Clients, stack_name: str) -> None:
        self._clients = clients
        self._by_id: dict[str, DeployedResource] = {}
        self._attribute_cache: dict[tuple[str, str], Any] = {}
        paginator = clients("cloudformation").get_paginator("list_stack_resources")
        for page in paginator.paginate(StackName=stack_name):
            for summary in page["StackResourceSummaries"]:
                self.add(
                    DeployedResource(
                        summary["LogicalResourceId"], summary["ResourceType"], summary["PhysicalResourceId"]
                    )
                )

    def add(self, resource: DeployedResource) -> None:
        self._by_id[resource.logical_id] = resource

    def get(self, logical_id: str) -> DeployedResource:
        try:
            return self._by_id[logical_id]
        except KeyError:
            raise UnresolvableError(f"{logical_id} is not a deployed resource") from None

    def __contains__(self, logical_id: str) -> bool:
        return logical_id in self._by_id

    def ref(self, logical_id: str) -> Any:
        return self.get(logical_id).physical_id

    def get_att(self, logical_id: str, attribute: str) -> Any:
        resource = self.get(logical_id)
        if attribute in resource.attributes:
            return resource.attributes[attribute]
        key = (logical_id, attribute)
        if key not in self._attribute_cache:
            lookup = _ATTRIBUTE_LOOKUPS.get((resource.type, attribute))
            if lookup is None:
                raise UnresolvableError(f"GetAtt {logical_id}.{attribute} ({resource.type}) is not supported")
            self._attribute_cache[key] = lookup(self._clients, resource.physical_id)
        return self._attribute_cache[key]


def _queue_arn(clients: Clients, url: str) -> str:
    return clients("sqs").get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]


def _table(clients: Clients, name: str) -> dict[str, Any]:
    return clients("dynamodb").describe_table(TableName=name)["Table"]


def _log_group_arn(clients: Clients, name: str) -> str:
    groups = clients("logs").describe_log_groups(logGroupNamePrefix=name)["logGroups"]
    return next(g["arn"] for g in groups if g["logGroupName"] == name)


_ATTRIBUTE_LOOKUPS = {
    ("AWS::SQS::Queue", "Arn"): _queue_arn,
    ("AWS::SQS::Queue", "QueueName"): lambda _c, url: url.rstrip("/").rsplit("/", 1)[-1],
    ("AWS::SQS::Queue", "QueueUrl"): lambda _c, url: url,
    ("AWS::DynamoDB::Table", "Arn"): lambda c, name: _table(c, name)["TableArn"],
    ("AWS::DynamoDB::Table", "StreamArn"): lambda c, name: _table(c, name)["LatestStreamArn"],
    ("AWS::Lambda::Function", "Arn"): lambda c, name: c("lambda").get_function_configuration(FunctionName=name)[
        "FunctionArn"
    ],
    ("AWS::IAM::Role", "Arn"): lambda c, name: c("iam").get_role(RoleName=name)["Role"]["Arn"],
    ("AWS::IAM::Role", "RoleId"): lambda c, name: c("iam").get_role(RoleName=name)["Role"]["RoleId"],
    ("AWS::SNS::Topic", "TopicArn"): lambda _c, arn: arn,
    ("AWS::SNS::Topic", "TopicName"): lambda _c, arn: arn.rsplit(":", 1)[-1],
    ("AWS::S3::Bucket", "Arn"): lambda _c, name: f"arn:aws:s3:::{name}",
    ("AWS::S3::Bucket", "DomainName"): lambda _c, name: f"{name}.s3.amazonaws.com",
    ("AWS::S3::Bucket", "RegionalDomainName"): lambda c, name: f"{name}.s3.{c.region}.amazonaws.com",
    ("AWS::Logs::LogGroup", "Arn"): _log_group_arn,
    ("AWS::Events::Rule", "Arn"): lambda c, name: c("events").describe_rule(Name=name)["Arn"],
    ("AWS::SSM::Parameter", "Value"): lambda c, name: c("ssm").get_parameter(Name=name)["Parameter"]["Value"],
    ("AWS::SSM::Parameter", "Type"): lambda c, name: c("ssm").get_parameter(Name=name)["Parameter"]["Type"],
}
