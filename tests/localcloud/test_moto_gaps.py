"""Pins of moto CloudFormation's gaps, and proof that the local cloud closes each one it needs.

If a pin fails after a moto upgrade, moto closed the gap: simplify infra/localcloud/gaps.py accordingly (for
the IAM pins at the end, reconsider what infra/localcloud/iam does itself).
"""

from __future__ import annotations

import json
import time
import warnings
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws
from moto.core import enable_iam_authentication
from moto.iam.access_control import IAMPolicy

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
    # Given template.yaml deployed by the local cloud, converge's application with it
    template = [r for part in cloud.deployment.parts() for r in part.resources.values()]
    count = lambda kind: sum(1 for r in template if r["Type"] == kind and "Condition" not in r)  # noqa: E731

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


def test_moto_never_deletes_an_expired_item() -> None:
    # DynamoDB's time to live deletes an item some time after its TTL attribute passes, writing a REMOVE record that
    # names the service; moto keeps the item for ever and writes nothing. The local cloud deletes it on the emulated
    # clock, with that record (localcloud/time_to_live.py; tests/localcloud/test_time_to_live.py).
    with mock_aws():
        client = boto3.client("dynamodb", region_name=REGION)
        client.create_table(
            TableName="expiring",
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            BillingMode="PAY_PER_REQUEST",
            StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
        )
        ttl = {"Enabled": True, "AttributeName": "ttl"}
        client.update_time_to_live(TableName="expiring", TimeToLiveSpecification=ttl)
        expired = str(int(time.time()) - 86400)  # a day ago: DynamoDB deletes it within its documented delay
        client.put_item(TableName="expiring", Item={"pk": {"S": "a"}, "ttl": {"N": expired}})
        assert client.get_item(TableName="expiring", Key={"pk": {"S": "a"}}).get("Item") is not None
        streams = boto3.client("dynamodbstreams", region_name=REGION)
        arn = client.describe_table(TableName="expiring")["Table"]["LatestStreamArn"]
        shard = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][0]["ShardId"]
        iterator = streams.get_shard_iterator(StreamArn=arn, ShardId=shard, ShardIteratorType="TRIM_HORIZON")
        records = streams.get_records(ShardIterator=iterator["ShardIterator"])["Records"]
        assert [record["eventName"] for record in records] == ["INSERT"]


def test_moto_keeps_a_schedules_retry_policy_and_dlq_but_never_delivers_to_either() -> None:
    # Given a one-time schedule already due, whose target queue does not exist, with a DLQ and a retry policy
    with mock_aws():
        sqs = boto3.client("sqs", region_name=REGION)
        dlq = sqs.get_queue_attributes(
            QueueUrl=sqs.create_queue(QueueName="schedule-dlq")["QueueUrl"], AttributeNames=["QueueArn"]
        )["Attributes"]["QueueArn"]
        scheduler = boto3.client("scheduler", region_name=REGION)
        target = {
            "Arn": "arn:aws:sqs:us-east-1:123456789012:missing",
            "RoleArn": "arn:aws:iam::123456789012:role/r",
            "Input": "{}",
            "RetryPolicy": {"MaximumRetryAttempts": 1, "MaximumEventAgeInSeconds": 60},
            "DeadLetterConfig": {"Arn": dlq},
        }
        scheduler.create_schedule(
            Name="due", ScheduleExpression="at(2020-01-01T00:00:00)", FlexibleTimeWindow={"Mode": "OFF"}, Target=target
        )
        # Then moto stores both settings, and nothing ever reaches the DLQ (it runs no schedule)
        stored = scheduler.get_schedule(Name="due")["Target"]
        assert (stored["RetryPolicy"], stored["DeadLetterConfig"]) == (target["RetryPolicy"], {"Arn": dlq})
        assert (
            sqs.receive_message(QueueUrl=sqs.get_queue_url(QueueName="schedule-dlq")["QueueUrl"]).get("Messages", [])
            == []
        )


# --- IAM: moto runs every call with full rights, and its own checks do not authorise per resource -----------


def test_moto_runs_every_call_with_full_rights() -> None:
    # A role's grants mean nothing to moto by default: any credentials may make any call. The local cloud's
    # IAM check (localcloud/iam) authorises each function's calls itself.
    with mock_aws():
        iam = boto3.client("iam", region_name=REGION)
        iam.create_user(UserName="no-policy-at-all")
        keys = iam.create_access_key(UserName="no-policy-at-all")["AccessKey"]
        dynamodb = boto3.client(
            "dynamodb",
            region_name=REGION,
            aws_access_key_id=keys["AccessKeyId"],
            aws_secret_access_key=keys["SecretAccessKey"],
        )
        assert isinstance(dynamodb.list_tables()["TableNames"], list)


GRANTED_ON_THE_RESOURCE_ONLY = [
    ("dynamodb", "dynamodb:GetItem", "arn:aws:dynamodb:us-east-1:123456789012:table/t",
     lambda c: c.get_item(TableName="t", Key={"pk": {"S": "a"}})),
    ("ssm", "ssm:GetParameter", "arn:aws:ssm:us-east-1:123456789012:parameter/p",
     lambda c: c.get_parameter(Name="/p")),
    ("secretsmanager", "secretsmanager:GetSecretValue", "arn:aws:secretsmanager:us-east-1:123456789012:secret:s-*",
     lambda c: c.get_secret_value(SecretId="s")),
    ("sesv2", "ses:SendEmail", "arn:aws:ses:us-east-1:123456789012:identity/a@example.com",
     lambda c: c.send_email(FromEmailAddress="a@example.com", Destination={"ToAddresses": ["b@example.com"]},
                            Content={"Simple": {"Subject": {"Data": "s"}, "Body": {"Text": {"Data": "b"}}}})),
]  # fmt: skip


@pytest.mark.parametrize(("service", "action", "resource", "call"), GRANTED_ON_THE_RESOURCE_ONLY)
def test_moto_own_iam_check_authorises_these_services_against_any_resource(
    service: str, action: str, resource: str, call: Any
) -> None:
    # Given moto's own IAM check switched on, and a user allowed `action` on exactly the resource it calls
    with mock_aws():
        iam = boto3.client("iam", region_name=REGION)
        user = f"scoped-{service}"  # moto's state may outlive this block while another mock is active
        iam.create_user(UserName=user)
        document = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": action, "Resource": resource}]}
        iam.put_user_policy(UserName=user, PolicyName="p", PolicyDocument=json.dumps(document))
        keys = iam.create_access_key(UserName=user)["AccessKey"]
        client = boto3.client(
            service,
            region_name=REGION,
            aws_access_key_id=keys["AccessKeyId"],
            aws_secret_access_key=keys["SecretAccessKey"],
        )
        # When it makes the call, Then moto refuses: it authorises the action against "*", not the resource the
        # call names, so a least-privilege grant cannot pass (and one on another resource could not be told apart)
        with enable_iam_authentication(), pytest.raises(ClientError) as refused:
            call(client)
        assert f"is not authorized to perform: {action}" in refused.value.response["Error"]["Message"]


def _moto_verdict(action: str, resource: str, *statements: dict[str, Any], **context: str) -> Any:
    document = json.dumps({"Version": "2012-10-17", "Statement": list(statements)})
    return IAMPolicy(document).is_action_permitted(action, resource, incoming_condition_values=context or None).name


def test_moto_policy_evaluator_misreads_what_localcloud_iam_evaluates_itself() -> None:
    # moto.iam.access_control.IAMPolicy, which the local cloud's check does not use (localcloud/iam/evaluation.py):
    table, other = "arn:aws:dynamodb:us-east-1:1:table/t", "arn:aws:dynamodb:us-east-1:1:table/u"
    # a Deny with NotResource permits what it should deny,
    assert (
        _moto_verdict("dynamodb:GetItem", other, {"Effect": "Deny", "Action": "*", "NotResource": table}) == "PERMITTED"
    )
    # an Allow whose condition does not hold denies explicitly, overriding another Allow,
    passed = {"Effect": "Allow", "Action": "iam:PassRole", "Resource": "*"}
    only_lambda = {**passed, "Condition": {"StringEquals": {"iam:PassedToService": "lambda.amazonaws.com"}}}
    context = {"iam:PassedToService": "scheduler.amazonaws.com"}
    assert _moto_verdict("iam:PassRole", "arn:aws:iam::1:role/r", only_lambda, passed, **context) == "DENIED"
    # actions match case-sensitively, and "." in a resource matches any character.
    assert (
        _moto_verdict("dynamodb:GetItem", table, {"Effect": "Allow", "Action": "DynamoDB:getitem", "Resource": table})
        == "NEUTRAL"
    )
    dotted = {"Effect": "Allow", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::b/a.b"}
    assert _moto_verdict("s3:GetObject", "arn:aws:s3:::b/aXb", dotted) == "PERMITTED"


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


def test_the_visibility_limit_counts_from_the_latest_receive_and_a_batch_refuses_entries_one_by_one() -> None:
    # (moto counts a message's 12 hours from when it was sent, and fails a whole ChangeMessageVisibilityBatch for
    # one entry past them; SQS counts them from the receive, and answers each entry under Failed)
    from localcloud import sqs_time

    with mock_aws():
        sqs = boto3.client("sqs", region_name="us-east-1")
        url = sqs.create_queue(QueueName="limits", Attributes={"VisibilityTimeout": "30"})["QueueUrl"]
        for body in ("old", "other"):
            sqs.send_message(QueueUrl=url, MessageBody=body)
        # Given messages sent 20 hours ago, received now
        sqs_time.age_messages(20 * 3600, "us-east-1")
        received = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
        assert sorted(m["Body"] for m in received) == ["old", "other"]
        entries = [
            {"Id": str(index), "ReceiptHandle": m["ReceiptHandle"], "VisibilityTimeout": timeout}
            for index, (m, timeout) in enumerate(zip(received, (11 * 3600, 13 * 3600), strict=True))
        ]
        # When one is hidden 11 hours from now, the other 13 hours (past the limit)
        time.sleep(0.01)
        answer = sqs.change_message_visibility_batch(QueueUrl=url, Entries=entries)
        # Then the first is hidden (its 11 hours count from its receive, not its send), the second refused alone
        assert [entry["Id"] for entry in answer["Successful"]] == ["0"]
        assert [(entry["Id"], entry["Code"]) for entry in answer["Failed"]] == [("1", "InvalidParameterValue")]
        # And 11 hours less a second on, only the refused one has come back (after the queue's own 30 s)
        sqs_time.age_messages(11 * 3600 - 1, "us-east-1")
        [again] = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
        assert again["Body"] == received[1]["Body"]
        # And asking for the whole 12 hours after a receive is refused, as SQS refuses it (time passed since)
        time.sleep(0.01)
        with pytest.raises(ClientError, match="VisibilityTimeout"):
            sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=again["ReceiptHandle"], VisibilityTimeout=43_200)


def test_a_message_past_its_queues_retention_is_deleted_as_time_passes_and_ends_no_receive() -> None:
    # (moto keeps such a message for ever: counted as visible, and a receive that meets it returns nothing, even with
    # a younger message behind it; SQS deletes a message once its retention period has passed)
    from localcloud import sqs_time

    with mock_aws():
        sqs = boto3.client("sqs", region_name="us-east-1")
        url = sqs.create_queue(QueueName="kept", Attributes={"MessageRetentionPeriod": "86400"})["QueueUrl"]
        # Given a message sent 23 hours ago to a queue that keeps them a day, and one sent now
        sqs.send_message(QueueUrl=url, MessageBody="old")
        sqs_time.age_messages(23 * 3600, "us-east-1")
        sqs.send_message(QueueUrl=url, MessageBody="young")
        # When two more hours pass
        sqs_time.age_messages(2 * 3600, "us-east-1")
        # Then the old one is gone, counted nowhere, and the young one is received at the first try
        attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])
        assert attributes["Attributes"]["ApproximateNumberOfMessages"] == "1"
        received = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
        assert [m["Body"] for m in received] == ["young"]
        # And the young one goes too once its own day has passed, though it was received (in flight)
        sqs_time.age_messages(23 * 3600, "us-east-1")
        attributes = sqs.get_queue_attributes(
            QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
        )["Attributes"]
        assert (attributes["ApproximateNumberOfMessages"], attributes["ApproximateNumberOfMessagesNotVisible"]) == (
            "0",
            "0",
        )
