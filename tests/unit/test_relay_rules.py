"""The outbox relay's visible outcomes: what a refused record counts, and where a valid one goes."""

from __future__ import annotations

import json

import boto3
import pytest
from botocore.exceptions import ClientError

from converge.observability import metrics
from converge.operations import OperationState

from .sqs_rules import dispatch, receive


def test_a_record_the_relay_refuses_is_rejected_visibly_and_counted(app):
    # Given a raw producer item of a job type nobody registered
    app.operations.admit("no.such.v1", "op-stray", {"user_id": "u-1"})
    metrics.clear_metrics()
    # When the relay carries its stream record
    dispatch(app, "op-stray")
    # Then nothing is queued, the operation is REJECTED with the reason, and the rejection is counted
    assert receive(app) == []
    stored = app.operations.require("op-stray")
    assert stored.state is OperationState.REJECTED
    assert stored.last_error is not None and stored.last_error.startswith("UnknownJobType: ")
    assert metrics.metric_set["rejected"]["Value"] == [1.0]
    metrics.clear_metrics()


def raw_put(app, **attributes) -> None:
    """A producer's plain PutItem of the documented item shape (or not quite)."""
    boto3.client("dynamodb").put_item(TableName=app.settings.jobs_table, Item=attributes)


USER = {"M": {"user_id": {"S": "2c9d6c2e-8f5e-4c43-9a51-0d2b9d0c1f00"}}}


@pytest.mark.parametrize(
    ("item", "reason"),
    [
        (
            {"operation_id": {"S": "op bad id"}, "job_type": {"S": "mail.notice.v1"}, "payload": USER},
            "InvalidMessage: operation_id 'op bad id' is invalid",
        ),
        (
            {"operation_id": {"S": "op-text"}, "job_type": {"S": "mail.notice.v1"}, "payload": {"S": "user 1"}},
            "InvalidMessage: payload must be a map of primitive values",
        ),
        (
            {
                "operation_id": {"S": "op-corr"},
                "job_type": {"S": "mail.notice.v1"},
                "payload": USER,
                "correlation_id": {"S": "not an id"},
            },
            "InvalidMessage: correlation_id 'not an id' is invalid",
        ),
        (
            {"operation_id": {"S": "op-empty"}, "job_type": {"S": "mail.notice.v1"}},
            "InvalidMessage: user_id: Field required",
        ),
    ],
    ids=["bad operation id", "payload not a map", "bad correlation id", "no payload at all"],
)
def test_a_raw_item_the_relay_cannot_carry_is_rejected_naming_what_is_wrong(app, item, reason):
    # Given a producer's raw item with one thing wrong
    raw_put(app, **item)
    operation_id = item["operation_id"]["S"]
    # When the relay carries its stream record
    dispatch(app, operation_id)
    # Then nothing is queued, and the operation is REJECTED with a reason naming the problem
    assert receive(app) == []
    stored = app.operations.require(operation_id)
    assert stored.state is OperationState.REJECTED
    assert stored.last_error is not None and stored.last_error.startswith(reason), stored.last_error


def test_the_correlation_id_travels_with_the_message(app):
    # Given a raw item with a correlation id
    raw_put(
        app,
        operation_id={"S": "op-traced"},
        job_type={"S": "mail.notice.v1"},
        payload=USER,
        correlation_id={"S": "checkout-42"},
    )
    # When the relay carries it / Then the queued message carries the same correlation id
    dispatch(app, "op-traced")
    [message] = receive(app)
    assert json.loads(message["Body"])["correlation_id"] == "checkout-42"


def stream_record(item: dict, sequence: str) -> dict:
    return {
        "eventName": "INSERT",
        "eventSource": "aws:dynamodb",
        "dynamodb": {"NewImage": item, "SequenceNumber": sequence, "StreamViewType": "NEW_IMAGE"},
    }


def test_an_aws_error_on_one_record_retries_that_record_only(app, monkeypatch):
    # Given a batch of a valid record and one whose rejection cannot be written (the jobs table throttles)
    raw_put(app, operation_id={"S": "op-fine"}, job_type={"S": "mail.notice.v1"}, payload=USER)
    raw_put(app, operation_id={"S": "op-stray"}, job_type={"S": "no.such.v1"}, payload=USER)
    table = boto3.client("dynamodb")
    items = {
        op: table.get_item(TableName=app.settings.jobs_table, Key={"operation_id": {"S": op}})["Item"]
        for op in ("op-fine", "op-stray")
    }

    def throttled(*_, **__):
        raise ClientError({"Error": {"Code": "ThrottlingException", "Message": "slow down"}}, "UpdateItem")

    monkeypatch.setattr(app.operations, "transition", throttled)
    metrics.clear_metrics()
    # When the relay handles the batch, the failing record first
    response = app.relay.handle(
        {"Records": [stream_record(items["op-stray"], "100"), stream_record(items["op-fine"], "200")]}
    )
    # Then only the record that met the AWS error comes back, named by its sequence number, and the other went out
    assert response == {"batchItemFailures": [{"itemIdentifier": "100"}]}
    assert [json.loads(m["Body"])["operation_id"] for m in receive(app)] == ["op-fine"]
    assert metrics.metric_set["relay_record_error"]["Value"] == [1.0]
    assert metrics.metric_set["relayed"]["Value"] == [1.0]
    metrics.clear_metrics()


class NoFailedList:
    """The SQS client, answering SendMessageBatch without a `Failed` list when nothing failed."""

    def __init__(self, real):
        self.real = real

    def send_message_batch(self, **kwargs):
        response = self.real.send_message_batch(**kwargs)
        if not response.get("Failed"):
            response.pop("Failed", None)
        return response

    def __getattr__(self, name):
        return getattr(self.real, name)


def test_a_batch_answer_without_a_failed_list_means_everything_went_out(app, monkeypatch):
    # Given SQS answering a fully successful batch with no `Failed` list at all
    monkeypatch.setattr(app.relay, "_sqs", NoFailedList(app.clients.sqs))
    raw_put(app, operation_id={"S": "op-sent"}, job_type={"S": "mail.notice.v1"}, payload=USER)
    # When the relay sends it / Then nothing is reported failed and the message is on its queue
    dispatch(app, "op-sent")
    assert [json.loads(m["Body"])["operation_id"] for m in receive(app)] == ["op-sent"]


class PartlyFailing:
    """The SQS client, reporting the first two entries of every batch as failed (and not sending them)."""

    def __init__(self, real):
        self.real = real

    def send_message_batch(self, QueueUrl, Entries):
        failed, sent = Entries[:2], Entries[2:]
        response = self.real.send_message_batch(QueueUrl=QueueUrl, Entries=sent) if sent else {"Successful": []}
        response["Failed"] = [
            {"Id": entry["Id"], "SenderFault": False, "Code": "InternalError", "Message": "try again"}
            for entry in failed
        ]
        return response

    def __getattr__(self, name):
        return getattr(self.real, name)


def test_entries_sqs_refuses_are_retried_by_the_stream_and_counted(app, monkeypatch):
    # Given SQS refusing two entries of the batch
    monkeypatch.setattr(app.relay, "_sqs", PartlyFailing(app.clients.sqs))
    table = boto3.client("dynamodb")
    records = []
    for n in range(3):
        raw_put(app, operation_id={"S": f"op-{n}"}, job_type={"S": "mail.notice.v1"}, payload=USER)
        item = table.get_item(TableName=app.settings.jobs_table, Key={"operation_id": {"S": f"op-{n}"}})["Item"]
        records.append(stream_record(item, str(n)))
    metrics.clear_metrics()
    # When the relay sends them
    response = app.relay.handle({"Records": records})
    # Then the refused ones are batch item failures (the stream retries them), and both counts add up
    assert response == {"batchItemFailures": [{"itemIdentifier": "0"}, {"itemIdentifier": "1"}]}
    assert metrics.metric_set["relay_send_failed"]["Value"] == [2.0]
    assert metrics.metric_set["relayed"]["Value"] == [1.0]
    metrics.clear_metrics()
