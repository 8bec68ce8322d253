"""The IAM check's rules without a cloud: policy evaluation, and which actions and resources each call needs."""

from __future__ import annotations

from typing import Any

import pytest

from localcloud.iam import UnmappedApiCall
from localcloud.iam.actions import Need, needs_of
from localcloud.iam.evaluation import NamedDocument, evaluate

TABLE = "arn:aws:dynamodb:us-east-1:123456789012:table/jobs"
OTHER = "arn:aws:dynamodb:us-east-1:123456789012:table/other"


def policy(*statements: dict[str, Any]) -> list[NamedDocument]:
    return [NamedDocument("Role/p", {"Version": "2012-10-17", "Statement": list(statements)})]


def allowed(documents: list[NamedDocument], action: str, resource: str, **context: Any) -> bool:
    return evaluate(documents, action, resource, context).allowed


# --- evaluation -------------------------------------------------------------------------------------------


def test_an_allow_grants_only_its_actions_on_its_resources():
    grants = policy({"Effect": "Allow", "Action": ["dynamodb:GetItem", "dynamodb:UpdateItem"], "Resource": TABLE})
    assert allowed(grants, "dynamodb:UpdateItem", TABLE)
    assert not allowed(grants, "dynamodb:PutItem", TABLE)
    assert not allowed(grants, "dynamodb:UpdateItem", OTHER)
    assert not allowed(grants, "dynamodb:UpdateItem", TABLE + "/index/attention")


def test_actions_match_case_insensitively_and_resources_case_sensitively_with_both_wildcards():
    grants = policy({"Effect": "Allow", "Action": "DynamoDB:get*", "Resource": "arn:aws:s3:::bucket/cv/??.pdf"})
    assert allowed(grants, "dynamodb:GetItem", "arn:aws:s3:::bucket/cv/ab.pdf")
    assert not allowed(grants, "dynamodb:GetItem", "arn:aws:s3:::bucket/cv/abc.pdf")
    assert not allowed(grants, "dynamodb:GetItem", "arn:aws:s3:::bucket/CV/ab.pdf")
    # "." is a literal dot, not any character
    assert not allowed(grants, "dynamodb:GetItem", "arn:aws:s3:::bucket/cv/abXpdf")


def test_an_explicit_deny_wins_and_says_where_it_is():
    documents = [
        *policy({"Effect": "Allow", "Action": "dynamodb:*", "Resource": "*"}),
        NamedDocument(
            "Guard",
            {"Statement": [{"Sid": "NoDeletes", "Effect": "Deny", "Action": "dynamodb:DeleteItem", "Resource": TABLE}]},
        ),
    ]
    verdict = evaluate(documents, "dynamodb:DeleteItem", TABLE, {})
    assert (verdict.allowed, verdict.denied_by) == (False, "Guard/NoDeletes")
    assert allowed(documents, "dynamodb:DeleteItem", OTHER)


def test_not_action_and_not_resource_deny_everything_they_do_not_name():
    documents = policy(
        {"Effect": "Allow", "Action": "*", "Resource": "*"},
        {"Effect": "Deny", "NotAction": "dynamodb:GetItem", "Resource": TABLE},
        {"Effect": "Deny", "Action": "s3:*", "NotResource": "arn:aws:s3:::bucket/*"},
    )
    assert allowed(documents, "dynamodb:GetItem", TABLE)
    assert not allowed(documents, "dynamodb:PutItem", TABLE)
    assert allowed(documents, "s3:GetObject", "arn:aws:s3:::bucket/key")
    assert not allowed(documents, "s3:GetObject", "arn:aws:s3:::elsewhere/key")


def test_a_condition_that_does_not_hold_leaves_the_statement_out_without_denying():
    pass_role = {"Effect": "Allow", "Action": "iam:PassRole", "Resource": "*"}
    documents = policy(
        {**pass_role, "Condition": {"StringEquals": {"iam:PassedToService": "lambda.amazonaws.com"}}},
        {**pass_role, "Condition": {"StringLike": {"iam:PassedToService": "scheduler.*"}}},
    )
    assert allowed(
        documents, "iam:PassRole", "arn:aws:iam::1:role/r", **{"iam:PassedToService": "scheduler.amazonaws.com"}
    )
    assert not allowed(
        documents, "iam:PassRole", "arn:aws:iam::1:role/r", **{"iam:PassedToService": "ecs.amazonaws.com"}
    )


def test_a_deny_only_over_plain_http_leaves_a_tls_call_allowed():
    documents = policy(
        {"Effect": "Allow", "Action": "s3:GetObject", "Resource": "*"},
        {"Effect": "Deny", "Action": "*", "Resource": "*", "Condition": {"Bool": {"aws:SecureTransport": "false"}}},
    )
    assert allowed(documents, "s3:GetObject", "arn:aws:s3:::b/k", **{"aws:SecureTransport": "true"})
    assert not allowed(documents, "s3:GetObject", "arn:aws:s3:::b/k", **{"aws:SecureTransport": "false"})


def test_a_deny_whose_condition_cannot_be_evaluated_denies_and_says_so():
    documents = policy(
        {"Effect": "Allow", "Action": "s3:GetObject", "Resource": "*"},
        {
            "Effect": "Deny",
            "Action": "*",
            "Resource": "*",
            "Condition": {"NotIpAddress": {"aws:SourceIp": "10.0.0.0/8"}},
        },
    )
    verdict = evaluate(documents, "s3:GetObject", "arn:aws:s3:::b/k", {})
    assert not verdict.allowed
    assert verdict.unevaluated == ("NotIpAddress aws:SourceIp",)


def test_an_allow_whose_condition_cannot_be_evaluated_grants_and_says_so():
    documents = policy(
        {"Effect": "Allow", "Action": "dynamodb:GetItem", "Resource": TABLE,
         "Condition": {"ForAllValues:StringEquals": {"dynamodb:LeadingKeys": ["user-1"]}}},
    )  # fmt: skip
    verdict = evaluate(documents, "dynamodb:GetItem", TABLE, {})
    assert verdict.allowed
    assert verdict.unevaluated == ("ForAllValues:StringEquals dynamodb:LeadingKeys",)


def test_set_qualifiers_if_exists_and_null_follow_iam():
    recipients = {"ses:Recipients": ["a@example.com", "b@example.com"]}
    only_example = {"Effect": "Allow", "Action": "ses:SendEmail", "Resource": "*",
                    "Condition": {"ForAllValues:StringLike": {"ses:Recipients": "*@example.com"}}}  # fmt: skip
    assert allowed(policy(only_example), "ses:SendEmail", "*", **recipients)
    assert not allowed(policy(only_example), "ses:SendEmail", "*", **{"ses:Recipients": ["a@example.com", "x@y.org"]})
    if_exists = {"Effect": "Allow", "Action": "s3:ListBucket", "Resource": "*",
                 "Condition": {"StringLikeIfExists": {"s3:prefix": "cv/*"}}}  # fmt: skip
    assert allowed(policy(if_exists), "s3:ListBucket", "*")
    assert not allowed(policy(if_exists), "s3:ListBucket", "*", **{"s3:prefix": "ads/"})
    null = {"Effect": "Allow", "Action": "s3:ListBucket", "Resource": "*", "Condition": {"Null": {"s3:prefix": "true"}}}
    assert allowed(policy(null), "s3:ListBucket", "*")
    assert not allowed(policy(null), "s3:ListBucket", "*", **{"s3:prefix": "cv/"})


# --- the mapping ------------------------------------------------------------------------------------------


class Account:
    region = "us-east-1"
    account_id = "123456789012"

    def secret_arn(self, secret_id: str) -> str:
        return f"arn:aws:secretsmanager:us-east-1:123456789012:secret:{secret_id}-AbCdEf"

    def email_identity(self, address: str) -> str:
        return address.rpartition("@")[2]  # as if only the domain were verified

    def stream_of(self, shard_iterator: str) -> str:
        return {"it-1": "arn:aws:dynamodb:us-east-1:123456789012:table/jobs/stream/2024"}[shard_iterator]

    def partition_key(self, table: str) -> str | None:
        return "operation_id" if table.rsplit("/", 1)[-1] == "jobs" else None


ARN = "arn:aws:{}:us-east-1:123456789012:{}"


@pytest.mark.parametrize(
    ("service", "operation", "params", "needs"),
    [
        ("dynamodb", "UpdateItem", {"TableName": "jobs", "Key": {}}, [("dynamodb:UpdateItem", TABLE)]),
        ("dynamodb", "Query", {"TableName": "jobs", "IndexName": "attention"},
         [("dynamodb:Query", TABLE + "/index/attention")]),
        ("dynamodb", "GetItem", {"TableName": TABLE, "Key": {}}, [("dynamodb:GetItem", TABLE)]),
        ("dynamodb", "TransactWriteItems",
         {"TransactItems": [{"ConditionCheck": {"TableName": "jobs"}}, {"Put": {"TableName": "other"}},
                            {"Update": {"TableName": "jobs"}}]},
         [("dynamodb:ConditionCheckItem", TABLE), ("dynamodb:PutItem", OTHER), ("dynamodb:UpdateItem", TABLE)]),
        ("dynamodb", "BatchGetItem", {"RequestItems": {"jobs": {}, "other": {}}},
         [("dynamodb:BatchGetItem", TABLE), ("dynamodb:BatchGetItem", OTHER)]),
        ("dynamodbstreams", "GetRecords", {"ShardIterator": "it-1"},
         [("dynamodb:GetRecords", TABLE + "/stream/2024")]),
        ("sqs", "SendMessageBatch",
         {"QueueUrl": "https://sqs.us-east-1.amazonaws.com/123456789012/critical", "Entries": []},
         [("sqs:SendMessage", ARN.format("sqs", "critical"))]),
        ("sqs", "DeleteMessageBatch", {"QueueUrl": "http://127.0.0.1:4566/123456789012/bulk", "Entries": []},
         [("sqs:DeleteMessage", ARN.format("sqs", "bulk"))]),
        ("ssm", "GetParameter", {"Name": "/converge/dev/toggles/x"},
         [("ssm:GetParameter", ARN.format("ssm", "parameter/converge/dev/toggles/x"))]),
        ("ssm", "GetParametersByPath", {"Path": "/converge/dev/toggles/"},
         [("ssm:GetParametersByPath", ARN.format("ssm", "parameter/converge/dev/toggles"))]),
        ("s3", "PutObject", {"Bucket": "docs", "Key": "cv/u-1.pdf"},
         [("s3:PutObject", "arn:aws:s3:::docs/cv/u-1.pdf")]),
        ("s3", "HeadObject", {"Bucket": "docs", "Key": "a"}, [("s3:GetObject", "arn:aws:s3:::docs/a")]),
        ("s3", "ListObjectsV2", {"Bucket": "docs", "Prefix": "cv/"}, [("s3:ListBucket", "arn:aws:s3:::docs")]),
        ("sesv2", "SendEmail", {"FromEmailAddress": "Converge <no-reply@example.com>", "Destination": {}},
         [("ses:SendEmail", ARN.format("ses", "identity/example.com"))]),
        ("secretsmanager", "GetSecretValue", {"SecretId": "signing"},
         [("secretsmanager:GetSecretValue", ARN.format("secretsmanager", "secret:signing-AbCdEf"))]),
        ("scheduler", "CreateSchedule",
         {"Name": "op-1", "GroupName": "delayed", "Target": {"RoleArn": "arn:aws:iam::123456789012:role/scheduler"}},
         [("scheduler:CreateSchedule", ARN.format("scheduler", "schedule/delayed/op-1")),
          ("iam:PassRole", "arn:aws:iam::123456789012:role/scheduler")]),
        ("lambda", "Invoke", {"FunctionName": "redrive", "Qualifier": "live"},
         [("lambda:InvokeFunction", ARN.format("lambda", "function:redrive:live"))]),
        ("sts", "GetCallerIdentity", {}, []),
    ],
)  # fmt: skip
def test_each_call_needs_the_actions_and_resources_the_service_authorization_reference_lists(
    service: str, operation: str, params: dict[str, Any], needs: list[tuple[str, str]]
) -> None:
    assert [(n.action, n.resource) for n in needs_of(service, operation, params, Account())] == needs


def test_pass_role_to_the_scheduler_carries_the_service_it_is_passed_to():
    params = {"Name": "op-1", "Target": {"RoleArn": "arn:aws:iam::123456789012:role/scheduler"}}
    pass_role = needs_of("scheduler", "CreateSchedule", params, Account())[1]
    assert pass_role == Need(
        "iam:PassRole", params["Target"]["RoleArn"], {"iam:PassedToService": "scheduler.amazonaws.com"}
    )


def test_sending_email_carries_the_sender_and_recipients_as_ses_condition_keys():
    params = {"FromEmailAddress": "no-reply@example.com", "Destination": {"ToAddresses": ["Ann <ann@example.org>"]}}
    (need,) = needs_of("sesv2", "SendEmail", params, Account())
    assert need.context["ses:FromAddress"] == "no-reply@example.com"
    assert need.context["ses:Recipients"] == ["ann@example.org"]


def test_a_put_carries_the_names_of_the_attributes_it_writes_so_a_deny_on_one_of_them_applies():
    # Given the producer policy's shape: puts allowed, except of an item naming the caller
    documents = policy(
        {"Effect": "Allow", "Action": "dynamodb:PutItem", "Resource": TABLE},
        {
            "Effect": "Deny",
            "Action": "dynamodb:PutItem",
            "Resource": TABLE,
            "Condition": {"ForAnyValue:StringEquals": {"dynamodb:Attributes": ["submitted_by"]}},
        },
    )
    plain = {"operation_id": {"S": "op-1"}, "job_type": {"S": "a.b.v1"}}
    claiming = {**plain, "submitted_by": {"S": "arn:aws:iam::123456789012:role/other"}}
    # When a plain put and one naming a caller are checked, alone and inside a transaction
    (put,) = needs_of("dynamodb", "PutItem", {"TableName": "jobs", "Item": plain}, Account())
    (claim,) = needs_of("dynamodb", "PutItem", {"TableName": "jobs", "Item": claiming}, Account())
    (in_transaction,) = needs_of(
        "dynamodb",
        "TransactWriteItems",
        {"TransactItems": [{"Put": {"TableName": "jobs", "Item": claiming}}]},
        Account(),
    )
    # Then only the plain put is allowed
    assert put.context["dynamodb:Attributes"] == ["job_type", "operation_id"]
    assert evaluate(documents, put.action, put.resource, put.context).allowed
    assert not evaluate(documents, claim.action, claim.resource, claim.context).allowed
    assert not evaluate(documents, in_transaction.action, in_transaction.resource, in_transaction.context).allowed


def test_a_call_with_no_mapping_is_refused_with_how_to_add_one():
    with pytest.raises(UnmappedApiCall, match=r"kms\.Decrypt.*register\('kms', 'Decrypt'.*check_iam=False"):
        needs_of("kms", "Decrypt", {"CiphertextBlob": b""}, Account())
