"""Pins of moto CloudFormation's gaps, and proof that the local cloud closes each one it needs.

If a pin fails after a moto upgrade, moto closed the gap: simplify infra/localcloud/gaps.py accordingly.
"""

from __future__ import annotations

import json
import warnings
from typing import Any

import boto3
import pytest
from moto import mock_aws

from localcloud import LocalCloud

REGION = "us-east-1"
TABLE = {
    "Type": "AWS::DynamoDB::Table",
    "Properties": {
        "BillingMode": "PAY_PER_REQUEST",
        "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}],
        "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}],
        "TimeToLiveSpecification": {"AttributeName": "expires_at", "Enabled": True},
        "PointInTimeRecoverySpecification": {"PointInTimeRecoveryEnabled": True},
    },
}
SKIPPED = {
    "Secret": {"Type": "AWS::SecretsManager::Secret", "Properties": {"GenerateSecretString": {}}},
    "Alarm": {
        "Type": "AWS::CloudWatch::Alarm",
        "Properties": {
            "MetricName": "Errors", "Namespace": "AWS/Lambda", "Statistic": "Sum", "Period": 60,
            "EvaluationPeriods": 1, "Threshold": 0, "ComparisonOperator": "GreaterThanThreshold",
        },
    },
    "Schedule": {
        "Type": "AWS::Scheduler::Schedule",
        "Properties": {
            "ScheduleExpression": "rate(5 minutes)", "FlexibleTimeWindow": {"Mode": "OFF"},
            "Target": {"Arn": "arn:aws:sqs:us-east-1:123456789012:q", "RoleArn": "arn:aws:iam::123456789012:role/r"},
        },
    },
    "HttpApi": {"Type": "AWS::ApiGatewayV2::Api", "Properties": {"Name": "api", "ProtocolType": "HTTP"}},
    "Topic": {"Type": "AWS::SNS::Topic"},
    "Subscription": {
        "Type": "AWS::SNS::Subscription",
        "Properties": {"TopicArn": {"Ref": "Topic"}, "Protocol": "email", "Endpoint": "ops@example.com"},
    },
    "Identity": {"Type": "AWS::SES::EmailIdentity", "Properties": {"EmailIdentity": "sender@example.com"}},
    "Bucket": {"Type": "AWS::S3::Bucket"},
    "BucketPolicy": {
        "Type": "AWS::S3::BucketPolicy",
        "Properties": {
            "Bucket": {"Ref": "Bucket"},
            "PolicyDocument": {"Statement": [{"Effect": "Deny", "Principal": "*", "Action": "s3:*",
                                              "Resource": "arn:aws:s3:::x/*"}]},
        },
    },
    "Table": TABLE,
}  # fmt: skip


@pytest.fixture(scope="module")
def raw_stack() -> Any:
    """The gap resources deployed by moto's CloudFormation alone, without the local cloud."""
    with mock_aws(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        session = boto3.Session(region_name=REGION, aws_access_key_id="x", aws_secret_access_key="y")
        session.client("cloudformation").create_stack(StackName="gaps", TemplateBody=json.dumps({"Resources": SKIPPED}))
        yield session


def test_moto_skips_secrets(raw_stack: Any) -> None:
    assert raw_stack.client("secretsmanager").list_secrets()["SecretList"] == []


def test_moto_skips_alarms(raw_stack: Any) -> None:
    assert raw_stack.client("cloudwatch").describe_alarms()["MetricAlarms"] == []


def test_moto_skips_scheduler_schedules(raw_stack: Any) -> None:
    assert raw_stack.client("scheduler").list_schedules()["Schedules"] == []


def test_moto_skips_http_apis(raw_stack: Any) -> None:
    assert raw_stack.client("apigatewayv2").get_apis()["Items"] == []


def test_moto_skips_sns_subscriptions(raw_stack: Any) -> None:
    assert raw_stack.client("sns").list_subscriptions()["Subscriptions"] == []


def test_moto_skips_ses_identities(raw_stack: Any) -> None:
    assert raw_stack.client("sesv2").list_email_identities()["EmailIdentities"] == []


def test_moto_skips_bucket_policies(raw_stack: Any) -> None:
    bucket = raw_stack.client("s3").list_buckets()["Buckets"][0]["Name"]
    with pytest.raises(raw_stack.client("s3").exceptions.ClientError):
        raw_stack.client("s3").get_bucket_policy(Bucket=bucket)


def test_moto_ignores_ttl_and_point_in_time_recovery(raw_stack: Any) -> None:
    dynamodb = raw_stack.client("dynamodb")
    name = dynamodb.list_tables()["TableNames"][0]
    assert dynamodb.describe_time_to_live(TableName=name)["TimeToLiveDescription"]["TimeToLiveStatus"] == "DISABLED"
    backups = dynamodb.describe_continuous_backups(TableName=name)["ContinuousBackupsDescription"]
    assert backups["PointInTimeRecoveryDescription"]["PointInTimeRecoveryStatus"] == "DISABLED"


def test_the_local_cloud_closes_the_gaps_the_system_needs(cloud: LocalCloud) -> None:
    # Given template.yaml deployed by the local cloud
    template = cloud.deployment.resources
    count = lambda kind: sum(1 for r in template.values() if r["Type"] == kind and "Condition" not in r)  # noqa: E731

    # Then alarms exist, with their actions resolved to the alarm topic
    alarms = cloud.client("cloudwatch").describe_alarms()["MetricAlarms"]
    assert len(alarms) == count("AWS::CloudWatch::Alarm")
    assert all(a["AlarmActions"] == [cloud.outputs["AlarmTopicArn"]] for a in alarms)

    # And every table with TTL / PITR in the template has them on
    dynamodb = cloud.client("dynamodb")
    markers = cloud.outputs["MarkersTableName"]
    ttl = dynamodb.describe_time_to_live(TableName=markers)["TimeToLiveDescription"]
    assert ttl == {"TimeToLiveStatus": "ENABLED", "AttributeName": "expires_at"}
    backups = dynamodb.describe_continuous_backups(TableName=cloud.outputs["JobsTableName"])
    assert backups["ContinuousBackupsDescription"]["PointInTimeRecoveryDescription"]["PointInTimeRecoveryStatus"] == (
        "ENABLED"
    )

    # And generated secrets exist with a value (and are what outputs and environments point at)
    secrets = cloud.client("secretsmanager").list_secrets()["SecretList"]
    assert len(secrets) == count("AWS::SecretsManager::Secret")
    for secret in secrets:
        assert cloud.client("secretsmanager").get_secret_value(SecretId=secret["ARN"])["SecretString"]
    if "SIGNING_SECRET_ARN" in cloud.functions["CriticalWorkerFunction"].environment:
        assert cloud.functions["CriticalWorkerFunction"].environment["SIGNING_SECRET_ARN"] in {
            s["ARN"] for s in secrets
        }

    # And SES identities exist
    identities = cloud.client("sesv2").list_email_identities()["EmailIdentities"]
    assert len(identities) == count("AWS::SES::EmailIdentity")


def test_moto_ignores_table_resource_policies_and_skips_queue_policies() -> None:
    # Given a table with a resource policy and a queue with a queue policy, deployed by moto's CloudFormation
    deny = {"Effect": "Deny", "Principal": "*", "Action": "dynamodb:*", "Resource": "*",
            "Condition": {"Bool": {"aws:SecureTransport": "false"}}}  # fmt: skip
    table = {
        **TABLE,
        "Properties": {**TABLE["Properties"], "ResourcePolicy": {"PolicyDocument": {"Statement": [deny]}}},
    }
    queue_policy = {
        "Type": "AWS::SQS::QueuePolicy",
        "Properties": {
            "Queues": [{"Ref": "Queue"}],
            "PolicyDocument": {
                "Statement": [{**deny, "Action": "sqs:*", "Resource": {"Fn::GetAtt": ["Queue", "Arn"]}}]
            },
        },
    }
    resources = {"Table": table, "Queue": {"Type": "AWS::SQS::Queue"}, "QueuePolicy": queue_policy}
    with mock_aws(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        session = boto3.Session(region_name=REGION, aws_access_key_id="x", aws_secret_access_key="y")
        session.client("cloudformation").create_stack(
            StackName="tls", TemplateBody=json.dumps({"Resources": resources})
        )
        dynamodb, sqs = session.client("dynamodb"), session.client("sqs")
        # Then the table has no resource policy...
        arn = dynamodb.describe_table(TableName=dynamodb.list_tables()["TableNames"][0])["Table"]["TableArn"]
        with pytest.raises(dynamodb.exceptions.PolicyNotFoundException):
            dynamodb.get_resource_policy(ResourceArn=arn)
        # ...and the queue no policy: both are edge controls the local cloud (plain HTTP on loopback) goes without
        url = sqs.list_queues()["QueueUrls"][0]
        assert "Policy" not in sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]


def test_moto_streams_a_modify_for_a_put_that_changes_nothing() -> None:
    # DynamoDB writes no stream record for a put that leaves the item as it was; moto writes a MODIFY.
    # The relay reads such a MODIFY as the same content written again (a no-op), so either way nothing runs.
    with mock_aws():
        client = boto3.client("dynamodb", region_name=REGION)
        client.create_table(
            TableName="t",
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            BillingMode="PAY_PER_REQUEST",
            StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
        )
        item = {"pk": {"S": "a"}, "v": {"S": "same"}}
        client.put_item(TableName="t", Item=item)
        client.put_item(TableName="t", Item=item)
        streams = boto3.client("dynamodbstreams", region_name=REGION)
        arn = client.describe_table(TableName="t")["Table"]["LatestStreamArn"]
        shard = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][0]["ShardId"]
        iterator = streams.get_shard_iterator(StreamArn=arn, ShardId=shard, ShardIteratorType="TRIM_HORIZON")
        records = streams.get_records(ShardIterator=iterator["ShardIterator"])["Records"]
        assert [record["eventName"] for record in records] == ["INSERT", "MODIFY"]
        assert records[1]["dynamodb"]["OldImage"] == records[1]["dynamodb"]["NewImage"]


def test_moto_ignores_the_encryption_settings_of_tables_log_groups_and_functions() -> None:
    # Given a table, a log group and a function, each under a customer-managed key, deployed by moto's CloudFormation
    key = "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
    table = {
        **TABLE,
        "Properties": {
            **TABLE["Properties"],
            "SSESpecification": {"SSEEnabled": True, "SSEType": "KMS", "KMSMasterKeyId": key},
        },
    }
    role = {
        "Type": "AWS::IAM::Role",
        "Properties": {
            "AssumeRolePolicyDocument": {
                "Statement": [
                    {"Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"}, "Action": "sts:AssumeRole"}
                ]
            }
        },
    }
    function = {
        "Type": "AWS::Lambda::Function",
        "Properties": {
            "Runtime": "python3.13",
            "Handler": "index.handler",
            "Code": {"ZipFile": "def handler(e, c): pass"},
            "Role": {"Fn::GetAtt": ["Role", "Arn"]},
            "KmsKeyArn": key,
        },
    }
    resources = {"Table": table, "Logs": {"Type": "AWS::Logs::LogGroup", "Properties": {"KmsKeyId": key}},
                 "Role": role, "Function": function}  # fmt: skip
    with mock_aws(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        session = boto3.Session(region_name=REGION, aws_access_key_id="x", aws_secret_access_key="y")
        session.client("cloudformation").create_stack(
            StackName="kms", TemplateBody=json.dumps({"Resources": resources})
        )
        deployed = session.client("cloudformation").describe_stack_resources(StackName="kms")["StackResources"]
        named = {r["LogicalResourceId"]: r["PhysicalResourceId"] for r in deployed}
        # Then none of the three names the key (tests/localcloud/test_customer_managed_key.py reads them from the
        # resolved template instead); the queues, topic and roles that it reads from the services keep theirs
        assert "SSEDescription" not in session.client("dynamodb").describe_table(TableName=named["Table"])["Table"]
        groups = session.client("logs").describe_log_groups(logGroupNamePrefix=named["Logs"])["logGroups"]
        assert [g.get("kmsKeyId") for g in groups] == [None]
        assert (
            session.client("lambda").get_function_configuration(FunctionName=named["Function"]).get("KMSKeyArn") is None
        )
