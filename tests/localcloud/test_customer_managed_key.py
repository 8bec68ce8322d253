"""The KmsKeyArn parameter, deployed both ways: empty (AWS-managed keys, the default) and a customer-managed key.

With a key, every table, queue, log group, the alarm topic, the signing secret and every function's environment
name it, and the roles that use those resources (and a producer) are granted it; without one, nothing names a key
and no role holds a KMS grant. What moto keeps is read from the services; moto's CloudFormation drops a table's
SSESpecification, a log group's KmsKeyId and a function's KmsKeyArn (tests/localcloud/test_moto_gaps.py pins
that), so those three are read from the template as the local cloud resolved it for the deployed stack.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from converge.model.states import OperationState
from converge_cli.commands.demo_run import runtime_for
from localcloud import LocalCloud
from localcloud.server import catalogue_seeder
from tests.conftest import REGION

SENDERS = {
    "OutboxRelayRole", "CriticalWorkerRole", "DefaultWorkerRole", "BulkWorkerRole", "DlqRedriveRole",
    "ResumerRole", "ReconcilerRole", "SchedulerRole", "EnqueueApiRole",
}  # fmt: skip
"""Roles that send to a queue: a sender to an encrypted queue needs kms:GenerateDataKey beside kms:Decrypt."""
READERS = {"RecurringRole", "BatchCounterRole"}
"""Roles that only read and write tables (and receive nothing): kms:Decrypt."""


@pytest.fixture
def with_key() -> Iterator[tuple[LocalCloud, str]]:
    """The stack deployed with a customer-managed key created in the same moto account first."""
    with mock_aws():
        key_arn = boto3.client("kms", region_name=REGION).create_key(Description="converge")["KeyMetadata"]["Arn"]
        with LocalCloud.start(parameters={"KmsKeyArn": key_arn}, seeders=[catalogue_seeder]) as cloud:
            yield cloud, key_arn


@pytest.fixture
def without_key() -> Iterator[LocalCloud]:
    with LocalCloud.start() as cloud:
        yield cloud


def resolved(cloud: LocalCloud, kind: str) -> dict[str, dict[str, Any]]:
    """Each resource of a type, its properties as CloudFormation computed them for the deployed stack that declares
    it (the template's, or converge's application's)."""
    assert cloud.deployment is not None
    return {
        logical_id: part.resolver.resolve(resource.get("Properties", {}))
        for part in cloud.deployment.parts()
        for logical_id, resource in part.resources.items()
        if resource["Type"] == kind
    }


def queue_attributes(cloud: LocalCloud) -> dict[str, dict[str, str]]:
    sqs = cloud.client("sqs")
    return {
        url.rsplit("/", 1)[-1]: sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
        for url in sqs.list_queues()["QueueUrls"]
    }


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def kms_grants(cloud: LocalCloud) -> dict[str, set[tuple[str, str]]]:
    """Each role of the stack: the (action, resource) pairs on KMS that its deployed policies allow.

    The documents are the template's, resolved for the stack (moto's IAM hands back a Python repr, not JSON);
    that each policy is attached to the role is read from IAM."""
    assert cloud.deployment is not None
    deployment, iam = cloud.deployment, cloud.client("iam")
    roles = {
        part.stack.ref(lid): lid
        for part in deployment.parts()
        for lid, r in part.resources.items()
        if r["Type"] == "AWS::IAM::Role"
    }
    attached = {lid: set(iam.list_role_policies(RoleName=name)["PolicyNames"]) for name, lid in roles.items()}
    documents: list[tuple[str, str, dict[str, Any]]] = []  # (role, policy name, document)
    for role, properties in resolved(cloud, "AWS::IAM::Role").items():
        documents += [(role, p["PolicyName"], p["PolicyDocument"]) for p in properties.get("Policies", [])]
    for logical_id, properties in resolved(cloud, "AWS::IAM::Policy").items():
        if logical_id in deployment.locate(logical_id).stack:  # deployed: its condition held
            documents += [(roles[name], properties["PolicyName"], properties["PolicyDocument"])
                          for name in properties["Roles"]]  # fmt: skip
    grants: dict[str, set[tuple[str, str]]] = {role: set() for role in roles.values()}
    for role, name, document in documents:
        assert name in attached[role], (role, name)
        for statement in document["Statement"]:
            kms = [action for action in _as_list(statement["Action"]) if action.startswith("kms:")]
            grants[role] |= {(action, resource) for action in kms for resource in _as_list(statement["Resource"])}
    return grants


def test_without_a_key_nothing_names_one_and_no_role_holds_a_kms_grant(without_key: LocalCloud) -> None:
    # Given the template deployed with its defaults
    cloud = without_key

    # Then every queue is under SSE-SQS, with no key of its own
    queues = queue_attributes(cloud)
    assert len(queues) == len(resolved(cloud, "AWS::SQS::Queue"))
    assert all(a.get("SqsManagedSseEnabled") == "true" and not a.get("KmsMasterKeyId") for a in queues.values())
    # And the alarm topic and the signing secret name no key
    [topic] = cloud.client("sns").list_topics()["Topics"]
    assert not cloud.client("sns").get_topic_attributes(TopicArn=topic["TopicArn"])["Attributes"].get("KmsMasterKeyId")
    assert [s.get("KmsKeyId") for s in cloud.client("secretsmanager").list_secrets()["SecretList"]] == [None]
    # And the tables keep the AWS-managed key, the log groups and the environments name none
    for table in resolved(cloud, "AWS::DynamoDB::Table").values():
        assert table["SSESpecification"] == {"SSEEnabled": True, "SSEType": "KMS"}
    assert all("KmsKeyId" not in group for group in resolved(cloud, "AWS::Logs::LogGroup").values())
    assert all("KmsKeyArn" not in function for function in resolved(cloud, "AWS::Lambda::Function").values())
    # And no role is granted anything on KMS, and the producer's key policy is not deployed
    assert {role: pairs for role, pairs in kms_grants(cloud).items() if pairs} == {}
    assert "ProducerKeyPolicyArn" not in cloud.outputs


def test_a_key_reaches_every_resource_and_exactly_the_roles_that_use_them(with_key: tuple[LocalCloud, str]) -> None:
    # Given the template deployed with a customer-managed key
    cloud, key_arn = with_key

    # Then every queue and DLQ is under that key instead of SSE-SQS
    queues = queue_attributes(cloud)
    assert len(queues) == len(resolved(cloud, "AWS::SQS::Queue"))
    assert {name: (a.get("KmsMasterKeyId"), a.get("SqsManagedSseEnabled")) for name, a in queues.items()} == {
        name: (key_arn, "false") for name in queues
    }
    # And the alarm topic and the signing secret too
    [topic] = cloud.client("sns").list_topics()["Topics"]
    assert cloud.client("sns").get_topic_attributes(TopicArn=topic["TopicArn"])["Attributes"]["KmsMasterKeyId"] == (
        key_arn
    )
    assert [s.get("KmsKeyId") for s in cloud.client("secretsmanager").list_secrets()["SecretList"]] == [key_arn]
    # And every table, log group and function environment
    tables = resolved(cloud, "AWS::DynamoDB::Table")
    assert tables
    assert all(t["SSESpecification"] == {"SSEEnabled": True, "SSEType": "KMS", "KMSMasterKeyId": key_arn}
               for t in tables.values())  # fmt: skip
    groups = resolved(cloud, "AWS::Logs::LogGroup")
    assert groups and {g.get("KmsKeyId") for g in groups.values()} == {key_arn}
    functions = resolved(cloud, "AWS::Lambda::Function")
    assert len(functions) == len(cloud.functions) and {f.get("KmsKeyArn") for f in functions.values()} == {key_arn}

    # And the roles that send to a queue may encrypt and decrypt with it, the others only decrypt, on it alone
    grants = kms_grants(cloud)
    assert {role for role, pairs in grants.items() if pairs} == SENDERS | READERS
    for role in SENDERS:
        assert grants[role] == {("kms:Decrypt", key_arn), ("kms:GenerateDataKey", key_arn)}, role
    for role in READERS:
        assert grants[role] == {("kms:Decrypt", key_arn)}, role
    # And a producer has a managed policy of its own for the key, deployed
    [producer_key_policy] = resolved(cloud, "AWS::IAM::ManagedPolicy")["ProducerKeyPolicy"]["PolicyDocument"][
        "Statement"
    ]
    assert (producer_key_policy["Action"], producer_key_policy["Resource"]) == ("kms:Decrypt", key_arn)
    assert cloud.client("iam").get_policy(PolicyArn=cloud.outputs["ProducerKeyPolicyArn"])["Policy"]


def test_with_a_key_the_pipeline_runs_as_before(with_key: tuple[LocalCloud, str]) -> None:
    # Given the stack under a customer-managed key and an enqueued job
    cloud, _ = with_key
    converge = runtime_for(cloud)
    converge.enqueue("email.password-reset.v1", "kms-reset-1", {"user_id": "u-1002"})
    # When the cloud drains
    stats = cloud.drain()
    # Then the job ran to its end through the relay and a worker
    assert converge.operations.require("kms-reset-1").state is OperationState.SUCCEEDED
    assert stats.invocations["OutboxRelayFunction"] >= 1 and stats.invocations["CriticalWorkerFunction"] >= 1
