"""The meter: capacity units from moto's state around real API calls, SQS requests per call."""

from __future__ import annotations

from collections.abc import Iterator

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from converge_bench import capacity
from converge_bench.meter import Meter

REGION = "us-east-1"


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": REGION,
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    with mock_aws():
        yield


def _table(ddb, name: str = "things") -> str:
    ddb.create_table(
        TableName=name,
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        BillingMode="PAY_PER_REQUEST",
    )
    return name


def _item(key: str, filler: int) -> dict:
    return {"id": {"S": key}, "data": {"S": "x" * filler}}


def test_writes_are_sized_from_the_stored_items(aws: None) -> None:
    ddb = boto3.client("dynamodb", region_name=REGION)
    table = _table(ddb)
    meter = Meter()
    with meter.active():
        # Given an item of 2 + 1 + 4 + 1,500 bytes: two WRU to put
        ddb.put_item(TableName=table, Item=_item("a", 1_500))
        assert meter.application.write_units == 2
        # When it shrinks to under 1 KB, the larger (before) image still decides: two more
        ddb.update_item(
            TableName=table,
            Key={"id": {"S": "a"}},
            UpdateExpression="SET #d = :d",
            ExpressionAttributeNames={"#d": "data"},
            ExpressionAttributeValues={":d": {"S": "small"}},
        )
        assert meter.application.write_units == 4
        # A failed condition consumes too: sized by the item as it stands (small now: one unit)
        with pytest.raises(ClientError):
            ddb.put_item(TableName=table, Item=_item("a", 10), ConditionExpression="attribute_not_exists(id)")
        assert meter.application.write_units == 5
        # A transaction of two small items: 2 x 1 x 2
        ddb.transact_write_items(
            TransactItems=[
                {"Put": {"TableName": table, "Item": _item("b", 10)}},
                {"Put": {"TableName": table, "Item": _item("c", 10)}},
            ]
        )
        assert meter.application.write_units == 9
        assert meter.application.calls["dynamodb:TransactWriteItems"] == 1


def test_reads_count_consistency_and_missing_items(aws: None) -> None:
    ddb = boto3.client("dynamodb", region_name=REGION)
    table = _table(ddb)
    ddb.put_item(TableName=table, Item=_item("a", 5_000))  # 5,007 bytes: two 4 KB blocks
    meter = Meter()
    with meter.active():
        ddb.get_item(TableName=table, Key={"id": {"S": "a"}}, ConsistentRead=True)
        assert meter.application.read_units == 2.0
        ddb.get_item(TableName=table, Key={"id": {"S": "a"}})
        assert meter.application.read_units == 3.0
        ddb.get_item(TableName=table, Key={"id": {"S": "missing"}}, ConsistentRead=True)
        assert meter.application.read_units == 4.0


def test_a_batch_of_ten_small_messages_is_one_sqs_request(aws: None) -> None:
    sqs = boto3.client("sqs", region_name=REGION)
    url = sqs.create_queue(QueueName="q")["QueueUrl"]
    meter = Meter()
    with meter.active():
        sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": "x" * 100} for i in range(10)])
        assert meter.application.sqs_requests == 1
        # Ten 10 KB messages are 100 KB: two 64 KB chunks
        sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": "y" * 10_240} for i in range(10)])
        assert meter.application.sqs_requests == 3


def test_units_match_the_hand_computed_size(aws: None) -> None:
    ddb = boto3.client("dynamodb", region_name=REGION)
    table = _table(ddb)
    item = {"id": {"S": "k"}, "n": {"N": "-1.50"}, "m": {"M": {"a": {"L": [{"S": "xy"}, {"BOOL": False}]}}}}
    # id 2+1, n 1+3, m 1 + 3 + (1 + 1 + (3 + (1+2) + (1+1)))
    expected = 3 + 4 + (1 + 3 + (1 + 1 + 8))
    assert capacity.item_size(item) == expected
    meter = Meter()
    with meter.active():
        ddb.put_item(TableName=table, Item=item)
    assert meter.application.write_units == 1


def _indexed_table(ddb, name: str = "indexed") -> str:
    ddb.create_table(
        TableName=name,
        AttributeDefinitions=[
            {"AttributeName": "id", "AttributeType": "S"},
            {"AttributeName": "flag", "AttributeType": "S"},
        ],
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        GlobalSecondaryIndexes=[
            {
                "IndexName": "sparse",
                "KeySchema": [{"AttributeName": "flag", "KeyType": "HASH"}],
                "Projection": {"ProjectionType": "INCLUDE", "NonKeyAttributes": ["note"]},
            }
        ],
        BillingMode="PAY_PER_REQUEST",
    )
    return name


def test_writes_that_touch_a_global_secondary_index_pay_for_it_and_others_do_not(aws: None) -> None:
    ddb = boto3.client("dynamodb", region_name=REGION)
    table = _indexed_table(ddb)
    meter = Meter()

    def update(expression: str, values: dict | None = None) -> None:
        kwargs: dict = {"ExpressionAttributeValues": values} if values else {}
        if "#d" in expression:
            kwargs["ExpressionAttributeNames"] = {"#d": "data"}
        ddb.update_item(TableName=table, Key={"id": {"S": "a"}}, UpdateExpression=expression, **kwargs)

    with meter.active():
        # Given an item without the index key: the table's unit only
        ddb.put_item(TableName=table, Item={"id": {"S": "a"}, "data": {"S": "x"}})
        assert (meter.application.write_units, meter.application.index_write_units) == (1, 0)
        # When it gains the index key: a put into the index too
        update("SET flag = :f", {":f": {"S": "on"}})
        assert (meter.application.write_units, meter.application.index_write_units) == (3, 1)
        # When an attribute the index does not project changes: the table only
        update("SET #d = :d", {":d": {"S": "y"}})
        assert meter.application.index_write_units == 1
        # When a projected attribute changes: an update in the index
        update("SET note = :n", {":n": {"S": "z"}})
        assert meter.application.index_write_units == 2
        # When its index key changes: a delete and a put
        update("SET flag = :f", {":f": {"S": "other"}})
        assert meter.application.index_write_units == 4
        # When it leaves the index: a delete
        update("REMOVE flag")
        assert meter.application.index_write_units == 5
        assert meter.application.write_units == 6 + 5


def test_a_replay_answers_from_the_recording_counts_nothing_and_calls_no_emulator(aws: None) -> None:
    ddb = boto3.client("dynamodb", region_name=REGION)
    table = _table(ddb)
    meter = Meter()
    with meter.active():
        # Given a recorded write
        with meter.recording() as recorded:
            ddb.put_item(TableName=table, Item=_item("a", 10))
        counted = (meter.application.write_units, sum(meter.application.calls.values()))
        # When the same call is replayed, and then one that was never recorded
        with meter.replaying(recorded):
            ddb.put_item(TableName=table, Item=_item("b", 10))
            assert meter.replay_mismatches == 0
            ddb.delete_item(TableName=table, Key={"id": {"S": "a"}})
            assert meter.replay_mismatches == 1
        # Then the replayed write reached no table and the meter counted none of it
        assert (meter.application.write_units, sum(meter.application.calls.values())) == counted
        assert "Item" not in ddb.get_item(TableName=table, Key={"id": {"S": "b"}})
