"""The local cloud's moto shortcuts behave as moto does: a cancelled transaction leaves no trace, stream included."""

from __future__ import annotations

import contextlib
from importlib.metadata import version

import boto3
import pytest

from localcloud.speedups import fast_dynamodb_responses
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
