"""The local cloud's moto shortcuts behave as moto does: a cancelled transaction leaves no trace, stream included;
templates read as JSON read as moto reads them; each response class's actions are listed once."""

from __future__ import annotations

import contextlib
from importlib.metadata import version

import boto3
import pytest
from moto.cloudformation.models import Stack
from moto.core import responses as core_responses

from localcloud import LocalCloud
from localcloud.speedups import TemplateMismatch, fast_dynamodb_responses, fast_moto, json_templates
from tests.conftest import REGION

pytestmark = pytest.mark.moto_as_is  # each test chooses moto's own paths or the shortcuts itself


def stream_records(table_name: str) -> list[dict]:
    dynamodb = boto3.client("dynamodb", region_name=REGION)
    streams = boto3.client("dynamodbstreams", region_name=REGION)
    arn = dynamodb.describe_table(TableName=table_name)["Table"]["LatestStreamArn"]
    shard = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][0]["ShardId"]
    iterator = streams.get_shard_iterator(StreamArn=arn, ShardId=shard, ShardIteratorType="TRIM_HORIZON")
    return streams.get_records(ShardIterator=iterator["ShardIterator"])["Records"]


@pytest.mark.parametrize("shortcut", [False, True], ids=["moto", "shortcut"])
def test_a_cancelled_transaction_leaves_no_item_and_no_stream_record(tables, shortcut):
    # Given the jobs table (streamed, as the template declares it) and a request already in it
    dynamodb = boto3.client("dynamodb", region_name=REGION)
    jobs = tables["jobs"]
    dynamodb.put_item(TableName=jobs, Item={"operation_id": {"S": "op-kept"}, "job_type": {"S": "a.b.v1"}})
    before = len(stream_records(jobs))
    # When a transaction puts a new request, then fails its condition check on the existing one
    transaction = [
        {"Put": {"TableName": jobs, "Item": {"operation_id": {"S": "op-new"}, "job_type": {"S": "a.b.v1"}}}},
        {
            "ConditionCheck": {
                "TableName": jobs,
                "Key": {"operation_id": {"S": "op-kept"}},
                "ConditionExpression": "attribute_not_exists(operation_id)",
            }
        },
    ]
    with fast_dynamodb_responses() if shortcut else contextlib.nullcontext():
        with pytest.raises(dynamodb.exceptions.TransactionCanceledException):
            dynamodb.transact_write_items(TransactItems=transaction)
        # Then the new item is not there, and the stream holds no record of it (nothing for the relay to send)
        assert "Item" not in dynamodb.get_item(TableName=jobs, Key={"operation_id": {"S": "op-new"}})
        records = stream_records(jobs)
    assert len(records) == before
    assert all(r["dynamodb"]["Keys"]["operation_id"]["S"] == "op-kept" for r in records)


def test_moto_is_the_minor_version_the_shortcuts_were_verified_against():
    # Given the shortcuts reach into moto's internals / Then the installed moto is the pinned 5.2
    assert version("moto").split(".")[:2] == ["5", "2"]


def test_a_deployment_reads_every_template_as_moto_would_and_a_yaml_body_still_goes_to_moto(monkeypatch):
    # Given moto's own reading of a template, counted
    moto_reads = []
    own = Stack.parse_template

    def counted(template: str) -> dict:
        moto_reads.append(template)
        return own(template)

    monkeypatch.setattr(Stack, "parse_template", staticmethod(counted))
    # When the reference application (its own stack and converge's, nested) is deployed with every template body
    # read both ways and compared (TemplateMismatch on any difference; the deployment's own reader within leaves
    # the verifying one in force)
    with json_templates(verify=True), LocalCloud.start() as cloud:
        # Then the deployment is whole: both stacks' outputs are there
        assert {"JobsTableName", "StateTableName"} <= set(cloud.outputs)
    # And moto read each body too: two stacks created, the parent updated once its nested outputs were known
    assert len(moto_reads) >= 3 and all(body.lstrip().startswith("{") for body in moto_reads)
    # And a body that is not JSON is read by moto's own YAML loader (the tag kept as moto keeps it)
    with json_templates(verify=True):
        parsed = Stack.parse_template("Resources:\n  Q:\n    Type: AWS::SQS::Queue\nOutputs:\n  U: !Ref Q\n")
    assert parsed["Resources"] == {"Q": {"Type": "AWS::SQS::Queue"}}
    assert parsed["Outputs"]["U"] == {"Ref": "Q"}


def test_verify_mode_raises_where_json_and_yaml_read_a_body_differently():
    # Given a JSON number that PyYAML's loader reads as text (no dot: not a float to YAML 1.1)
    body = '{"Value": 1e5}'
    # Then the verifying reader refuses it, and the plain one takes JSON's reading
    with json_templates(verify=True), pytest.raises(TemplateMismatch, match="reads differently as JSON"):
        Stack.parse_template(body)
    with json_templates():
        assert Stack.parse_template(body) == {"Value": 100000.0}
    # And outside the block moto's own reader is back
    assert Stack.parse_template(body) == {"Value": "1e5"}


def test_each_response_class_lists_its_actions_once_and_the_listing_is_moto_s_own(aws, monkeypatch):
    # Given moto's listing of a response class's functions, counted
    original = core_responses.method_names_from_class
    calls = []

    def counted(clazz: type) -> list[str]:
        calls.append(clazz)
        return original(clazz)

    monkeypatch.setattr(core_responses, "method_names_from_class", counted)
    with fast_moto():
        sqs = boto3.client("sqs", region_name=REGION)
        for n in range(3):
            sqs.create_queue(QueueName=f"q{n}")
        # When three requests reach the same class / Then its functions were listed once, and answered
        assert len(sqs.list_queues()["QueueUrls"]) == 3
        assert len(calls) == 1
    # And the listing is back to moto's own (uncached) after the block
    assert core_responses.method_names_from_class is counted


def test_each_services_error_shapes_are_tabled_once_and_errors_answer_as_moto_s_own(aws, monkeypatch):
    # Given moto's table of a service's error shapes, its building counted
    from botocore.exceptions import ClientError
    from moto.core import errors as core_errors

    original = core_errors.ErrorLookupFactory._create_error_lut
    built = []

    def counted(service_model):
        built.append(service_model.metadata.get("serviceId"))
        return original(service_model)

    monkeypatch.setattr(core_errors.ErrorLookupFactory, "_create_error_lut", staticmethod(counted))
    with fast_moto():
        ssm = boto3.client("ssm", region_name=REGION)
        # When three requests fail the same way
        for _ in range(3):
            with pytest.raises(ClientError) as refused:
                ssm.get_parameter(Name="/nowhere")
            # Then each is answered with the service's own error
            assert refused.value.response["Error"]["Code"] == "ParameterNotFound"
        # And the service's table was built once
        assert built.count("SSM") == 1
    # And after the block moto builds it again for each error, as it does on its own
    with pytest.raises(ClientError):
        boto3.client("ssm", region_name=REGION).get_parameter(Name="/nowhere")
    assert built.count("SSM") == 2
