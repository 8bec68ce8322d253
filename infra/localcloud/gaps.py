"""Close the gaps between moto's CloudFormation and AWS for the resources the system needs.

moto's CloudFormation silently skips some resource types and ignores some properties
(tests/localcloud/test_moto_gaps.py pins each gap, so a moto upgrade that closes one is noticed):

* skipped types a function may *reference* (AWS::SecretsManager::Secret, AWS::SES::EmailIdentity,
  AWS::ApiGatewayV2::Api, whose routes http_api.py then serves, AWS::Scheduler::ScheduleGroup) are
  provisioned here *before* the stack is deployed, and every Ref/GetAtt/Sub to them is replaced by the
  real value, so moto's own resolution of the stack (outputs, environment) sees them;
* skipped types nothing references (AWS::CloudWatch::Alarm, AWS::SNS::Subscription) and ignored
  properties (DynamoDB TimeToLiveSpecification, PointInTimeRecoverySpecification) are applied *after*
  the deploy through the service APIs;
* AWS::S3::BucketPolicy is deliberately left out: moto enforces bucket policies but does not evaluate
  aws:SecureTransport as S3 does, so the usual "deny unless TLS" statement refuses every request (and
  the loopback server is plain HTTP anyway); the policy is an edge control, the local cloud has no edge;
* AWS::SQS::QueuePolicy (skipped) and a DynamoDB table's ResourcePolicy (ignored) are left out for the
  same reason: they deny requests made without TLS, which every local request is;
* event wiring (AWS::Scheduler::Schedule, EventBridge targets, event source mappings) is not
  provisioned at all: the local cloud emulates it from the template (see schedules.py, sources).

`BEFORE_DEPLOY` and `AFTER_DEPLOY` are registries keyed by resource type, open to extension.
"""

from __future__ import annotations

import json
import random
import string
from collections.abc import Callable
from typing import Any

from .clients import Clients
from .intrinsics import Resolver
from .stack import DeployedResource, StackResources


def physical_name(stack_name: str, logical_id: str) -> str:
    """A name shaped like CloudFormation's generated ones: <stack>-<logical id>-<12 random chars>."""
    suffix = "".join(random.choices(string.ascii_uppercase + string.digits, k=12))
    return f"{stack_name}-{logical_id}-{suffix}"


# --- before the deploy: provision, then inline the values into the template ---
# Called with the raw properties and a resolver that knows parameters and pseudo parameters only.
PreProvisioner = Callable[[Clients, str, str, dict[str, Any], Resolver], DeployedResource]


def provision_secret(
    clients: Clients, stack_name: str, logical_id: str, raw: dict[str, Any], resolver: Resolver
) -> DeployedResource:
    props = resolver.resolve(raw)
    secrets = clients("secretsmanager")
    value = props.get("SecretString")
    generate = props.get("GenerateSecretString")
    if value is None and generate is not None:
        value = _generate_secret_string(secrets, generate)
    request: dict[str, Any] = {"Name": props.get("Name") or physical_name(stack_name, logical_id)}
    for key in ("Description", "KmsKeyId"):
        if props.get(key):
            request[key] = props[key]
    if value is not None:
        request["SecretString"] = value
    arn = secrets.create_secret(**request)["ARN"]
    return DeployedResource(logical_id, "AWS::SecretsManager::Secret", arn, {"Id": arn})


def _generate_secret_string(secrets: Any, spec: dict[str, Any]) -> str:
    options = {
        key: spec[key]
        for key in (
            "PasswordLength",
            "ExcludeCharacters",
            "ExcludeNumbers",
            "ExcludePunctuation",
            "ExcludeUppercase",
            "ExcludeLowercase",
            "IncludeSpace",
            "RequireEachIncludedType",
        )
        if key in spec
    }
    password = secrets.get_random_password(**options)["RandomPassword"]
    if "SecretStringTemplate" in spec:
        document = json.loads(spec["SecretStringTemplate"])
        document[spec["GenerateStringKey"]] = password
        return json.dumps(document)
    return password


def provision_email_identity(
    clients: Clients, _stack_name: str, logical_id: str, raw: dict[str, Any], resolver: Resolver
) -> DeployedResource:
    identity = resolver.resolve(raw["EmailIdentity"])
    clients("sesv2").create_email_identity(EmailIdentity=identity)
    return DeployedResource(logical_id, "AWS::SES::EmailIdentity", identity)


def provision_http_api(
    clients: Clients, stack_name: str, logical_id: str, raw: dict[str, Any], resolver: Resolver
) -> DeployedResource:
    # The routes live in the Body, which references functions not deployed yet: http_api.py reads them later.
    name = raw.get("Name")
    name = resolver.resolve(name) if name is not None else physical_name(stack_name, logical_id)
    api = clients("apigatewayv2").create_api(Name=name, ProtocolType="HTTP")
    return DeployedResource(
        logical_id, "AWS::ApiGatewayV2::Api", api["ApiId"], {"ApiId": api["ApiId"], "ApiEndpoint": api["ApiEndpoint"]}
    )


def provision_schedule_group(
    clients: Clients, stack_name: str, logical_id: str, raw: dict[str, Any], resolver: Resolver
) -> DeployedResource:
    # Delayed operations' one-time schedules are created in it at run time (schedule_runs.py fires them).
    name = raw.get("Name")
    name = resolver.resolve(name) if name is not None else physical_name(stack_name, logical_id)
    arn = clients("scheduler").create_schedule_group(Name=name)["ScheduleGroupArn"]
    return DeployedResource(logical_id, "AWS::Scheduler::ScheduleGroup", name, {"Arn": arn})


BEFORE_DEPLOY: dict[str, PreProvisioner] = {
    "AWS::SecretsManager::Secret": provision_secret,
    "AWS::Scheduler::ScheduleGroup": provision_schedule_group,
    "AWS::SES::EmailIdentity": provision_email_identity,
    "AWS::ApiGatewayV2::Api": provision_http_api,
}


def inline_resource(template: dict[str, Any], resource: DeployedResource) -> None:
    """Remove a pre-provisioned resource from the template and substitute its values everywhere."""
    logical_id = resource.logical_id
    template["Resources"].pop(logical_id)

    def attribute(name: str) -> Any:
        return resource.attributes.get(name, resource.physical_id)

    def substitute(node: Any) -> Any:
        if isinstance(node, list):
            return [substitute(item) for item in node]
        if not isinstance(node, dict):
            return node
        if node == {"Ref": logical_id}:
            return resource.physical_id
        get_att = node.get("Fn::GetAtt") if len(node) == 1 else None
        if get_att is not None:
            target, _, name = get_att.partition(".") if isinstance(get_att, str) else (get_att[0], "", get_att[1])
            if target == logical_id:
                return attribute(name)
        if len(node) == 1 and "Fn::Sub" in node:
            text = _substitute_in_sub(node["Fn::Sub"], logical_id, resource, attribute)
            if isinstance(text, list):  # the variables of the long form may reference the resource too
                text = [text[0], substitute(text[1])]
            return {"Fn::Sub": text}
        result = {key: substitute(value) for key, value in node.items()}
        depends = result.get("DependsOn")
        if isinstance(depends, list) and logical_id in depends:
            result["DependsOn"] = [d for d in depends if d != logical_id]
        elif depends == logical_id:
            result.pop("DependsOn")
        return result

    for section in ("Resources", "Outputs"):
        if section in template:
            template[section] = substitute(template[section])


def _substitute_in_sub(arg: Any, logical_id: str, resource: DeployedResource, attribute: Callable) -> Any:
    text = arg[0] if isinstance(arg, list) else arg
    text = text.replace("${" + logical_id + "}", str(resource.physical_id))
    for name in ("Arn", "Id", "Name", *resource.attributes):
        text = text.replace("${" + f"{logical_id}.{name}" + "}", str(attribute(name)))
    return [text, arg[1]] if isinstance(arg, list) else text


# --- after the deploy: apply through the service APIs ---
PostProvisioner = Callable[[Clients, str, str, dict[str, Any], Resolver, StackResources], None]


def apply_table_settings(
    clients: Clients, _stack: str, logical_id: str, props: dict[str, Any], resolver: Resolver, stack: StackResources
) -> None:
    dynamodb = clients("dynamodb")
    table_name = stack.ref(logical_id)
    ttl = resolver.resolve(props.get("TimeToLiveSpecification"))
    if ttl and ttl.get("Enabled"):
        dynamodb.update_time_to_live(
            TableName=table_name,
            TimeToLiveSpecification={"Enabled": True, "AttributeName": ttl["AttributeName"]},
        )
    pitr = resolver.resolve(props.get("PointInTimeRecoverySpecification"))
    if pitr and pitr.get("PointInTimeRecoveryEnabled"):
        dynamodb.update_continuous_backups(
            TableName=table_name,
            PointInTimeRecoverySpecification={"PointInTimeRecoveryEnabled": True},
        )


_ALARM_PROPERTIES = (
    "AlarmDescription", "ActionsEnabled", "OKActions", "AlarmActions", "InsufficientDataActions",
    "MetricName", "Namespace", "Statistic", "ExtendedStatistic", "Dimensions", "Period", "Unit",
    "EvaluationPeriods", "DatapointsToAlarm", "Threshold", "ComparisonOperator", "TreatMissingData",
    "EvaluateLowSampleCountPercentile", "Metrics", "ThresholdMetricId",
)  # fmt: skip


def provision_alarm(
    clients: Clients, stack_name: str, logical_id: str, props: dict[str, Any], resolver: Resolver, stack: StackResources
) -> None:
    resolved = resolver.resolve(props)
    request = {key: resolved[key] for key in _ALARM_PROPERTIES if key in resolved}
    for key in ("Period", "EvaluationPeriods", "DatapointsToAlarm"):
        if key in request:
            request[key] = int(request[key])
    if "Threshold" in request:
        request["Threshold"] = float(request["Threshold"])
    name = resolved.get("AlarmName") or physical_name(stack_name, logical_id)
    clients("cloudwatch").put_metric_alarm(AlarmName=name, **request)
    stack.add(DeployedResource(logical_id, "AWS::CloudWatch::Alarm", name))


def provision_subscription(
    clients: Clients, _stack: str, logical_id: str, props: dict[str, Any], resolver: Resolver, stack: StackResources
) -> None:
    resolved = resolver.resolve(props)
    arn = clients("sns").subscribe(
        TopicArn=resolved["TopicArn"], Protocol=resolved["Protocol"], Endpoint=resolved["Endpoint"]
    )["SubscriptionArn"]
    stack.add(DeployedResource(logical_id, "AWS::SNS::Subscription", arn))


AFTER_DEPLOY: dict[str, PostProvisioner] = {
    "AWS::DynamoDB::Table": apply_table_settings,
    "AWS::CloudWatch::Alarm": provision_alarm,
    "AWS::SNS::Subscription": provision_subscription,
}
