"""The relay (stream records to SQS) and the worker (SQS batches through the pipeline), on moto."""

from __future__ import annotations

import json
import uuid

import boto3
from boto3.dynamodb.types import TypeSerializer

from converge.operations import OperationState
from converge.toggles import Toggles

from .conftest import PREFIX, set_toggle

serialize = TypeSerializer().serialize


def stream_record(item: dict, sequence: str, event_name: str = "INSERT") -> dict:
    return {
        "eventName": event_name,
        "eventSource": "aws:dynamodb",
        "dynamodb": {
            "Keys": {"operation_id": serialize(item["operation_id"])},
            "NewImage": {key: serialize(value) for key, value in item.items()},
            "SequenceNumber": sequence,
            "StreamViewType": "NEW_IMAGE",
        },
    }


def queued(app, queue_url=None) -> list[dict]:
    sqs = boto3.client("sqs")
    response = sqs.receive_message(
        QueueUrl=queue_url or app.settings.queue_url,
        MaxNumberOfMessages=10,
        MessageAttributeNames=["All"],
        AttributeNames=["All"],
    )
    return response.get("Messages", [])


def test_the_relay_sends_valid_records_and_rejects_bad_ones_visibly(app):
    # Given three raw items: valid, unknown job type, PII in the payload
    good = {"operation_id": "op-good", "job_type": "mail.notice.v1", "payload": {"user_id": str(uuid.uuid4())}}
    unknown = {"operation_id": "op-unknown", "job_type": "no.such.v1", "payload": {}}
    pii = {"operation_id": "op-pii", "job_type": "mail.notice.v1", "payload": {"user_id": "ana@example.com"}}
    dynamodb = boto3.client("dynamodb")
    for item in (good, unknown, pii):
        dynamodb.put_item(TableName=app.settings.jobs_table, Item={k: serialize(v) for k, v in item.items()})
    event = {"Records": [stream_record(good, "1"), stream_record(unknown, "2"), stream_record(pii, "3")]}
    # When the relay handles the batch
    response = app.relay.handle(event)
    # Then the good one is on its queue as a versioned primitive message, and nothing failed
    assert response == {"batchItemFailures": []}
    [message] = queued(app)
    body = json.loads(message["Body"])
    assert body == {
        "v": 1,
        "operation_id": "op-good",
        "job_type": "mail.notice.v1",
        "payload": good["payload"],
        "correlation_id": None,
    }
    # And the bad ones are REJECTED with their reasons, listable for an operator
    assert app.operations.require("op-unknown").state is OperationState.REJECTED
    assert "unknown job type" in app.operations.require("op-unknown").last_error
    assert "e-mail" in app.operations.require("op-pii").last_error
    rejected = {row["operation_id"] for row in app.operations.list_attention(OperationState.REJECTED).operations}
    assert rejected == {"op-unknown", "op-pii"}


def test_entries_sqs_reports_failed_become_batch_item_failures(app, monkeypatch):
    items = [
        {"operation_id": f"op-{n}", "job_type": "mail.notice.v1", "payload": {"user_id": str(uuid.uuid4())}}
        for n in range(12)
    ]
    real = app.clients.sqs.send_message_batch
    sent: list[int] = []

    def flaky_batch(QueueUrl, Entries):
        # The first call loses entry 3; everything else goes through.
        response = real(QueueUrl=QueueUrl, Entries=[e for e in Entries if not (not sent and e["Id"] == "3")])
        failed = [] if sent else [{"Id": "3", "SenderFault": False, "Code": "InternalError", "Message": "x"}]
        sent.append(len(Entries))
        return {"Successful": response.get("Successful", []), "Failed": failed}

    monkeypatch.setattr(app.clients.sqs, "send_message_batch", flaky_batch)
    response = app.relay.handle({"Records": [stream_record(item, str(100 + n)) for n, item in enumerate(items)]})
    assert sent == [10, 2]  # ten a call
    assert response == {"batchItemFailures": [{"itemIdentifier": "103"}]}


def test_re_dispatch_records_are_relayed_and_other_modifications_are_not(app):
    item = {
        "operation_id": "op-r",
        "job_type": "mail.notice.v1",
        "payload": {"user_id": str(uuid.uuid4())},
        "state": "SUCCEEDED",
    }
    assert app.relay.handle({"Records": [stream_record(item, "1", "MODIFY")]}) == {"batchItemFailures": []}
    assert queued(app) == []


def sqs_event(app, messages: list[dict]) -> dict:
    return {
        "Records": [
            {
                "messageId": m["MessageId"],
                "receiptHandle": m["ReceiptHandle"],
                "body": m["Body"],
                "attributes": m["Attributes"],
                "messageAttributes": {
                    name: {"stringValue": a["StringValue"], "dataType": a["DataType"]}
                    for name, a in m.get("MessageAttributes", {}).items()
                },
                "md5OfBody": m["MD5OfBody"],
                "eventSource": "aws:sqs",
                "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:critical",
                "awsRegion": "us-east-1",
            }
            for m in messages
        ]
    }


class Context:
    function_name = "worker"
    memory_limit_in_mb = 512
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:worker"
    aws_request_id = "req-1"

    def __init__(self, remaining=30_000):
        self.remaining = remaining

    def get_remaining_time_in_millis(self):
        return self.remaining


def test_a_poison_record_goes_to_the_dlq_and_the_rest_of_the_batch_succeeds(app, recorder):
    # Given a batch of two good jobs and one message that is not JSON
    sqs = boto3.client("sqs")
    for op in ("op-a", "op-b"):
        app.enqueue("mail.notice.v1", op, {"user_id": str(uuid.uuid4())})
    app.relay.handle(
        {
            "Records": [
                stream_record(app.operations.require(op).to_json() | {"state": "ACCEPTED"}, op)
                for op in ("op-a", "op-b")
            ]
        }
    )
    sqs.send_message(QueueUrl=app.settings.queue_url, MessageBody="this is not json")
    messages = queued(app)
    assert len(messages) == 3
    # When the worker handles the batch
    response = app.worker.handle(sqs_event(app, messages), Context())
    # Then the poison record is acknowledged (not retried) and sits in the DLQ with its reason
    assert response == {"batchItemFailures": []}
    [dead] = queued(app, app.settings.dlq_url)
    assert dead["Body"] == "this is not json"
    assert dead["MessageAttributes"]["error_class"]["StringValue"] == "InvalidMessage"
    assert "not JSON" in dead["MessageAttributes"]["error_reason"]["StringValue"]
    # And both good jobs ran once
    assert sorted(recorder.effects) == ["op-a", "op-b"]


def test_transient_failures_come_back_after_a_backoff_and_out_of_time_records_are_handed_back(app, recorder):
    from converge.errors import TransientError

    app.enqueue("mail.notice.v1", "op-t", {"user_id": str(uuid.uuid4())})
    app.relay.handle(
        {"Records": [stream_record(app.operations.require("op-t").to_json() | {"state": "ACCEPTED"}, "1")]}
    )
    recorder.fail_effect.append(TransientError("throttled"))
    messages = queued(app)
    response = app.worker.handle(sqs_event(app, messages), Context())
    assert response == {"batchItemFailures": [{"itemIdentifier": messages[0]["MessageId"]}]}
    assert app.operations.require("op-t").state is OperationState.IN_PROGRESS
    # A record that arrives with too little time left is handed back without being touched
    response = app.worker.handle(sqs_event(app, messages), Context(remaining=100))
    assert response["batchItemFailures"] == [{"itemIdentifier": messages[0]["MessageId"]}]
    assert recorder.calls.count("effect:op-t") == 1


def test_a_disabled_job_is_paused_and_acknowledged(app, recorder):
    set_toggle("mail.notice", "off")
    app.enqueue("mail.notice.v1", "op-p", {"user_id": str(uuid.uuid4())})
    app.relay.handle(
        {"Records": [stream_record(app.operations.require("op-p").to_json() | {"state": "ACCEPTED"}, "1")]}
    )
    response = app.worker.handle(sqs_event(app, queued(app)), Context())
    assert response == {"batchItemFailures": []}
    assert app.operations.require("op-p").state is OperationState.PAUSED
    assert recorder.calls == []


def test_a_batch_of_paused_messages_confirms_the_toggle_once_not_once_each(app, recorder, monkeypatch):
    # Given five messages of a fail-closed job whose toggle does not exist, and toggles cached as deployed
    app.pipeline.toggles = Toggles(PREFIX, app.clients.ssm, max_age=15, clock=app.clock)
    for n in range(5):
        app.enqueue("money.credit.v1", f"op-m{n}", {"user_id": str(uuid.uuid4())})
    app.relay.handle(
        {
            "Records": [
                stream_record(app.operations.require(f"op-m{n}").to_json() | {"state": "ACCEPTED"}, str(n))
                for n in range(5)
            ]
        }
    )
    reads = []
    real_get = app.clients.ssm.get_parameter
    monkeypatch.setattr(app.clients.ssm, "get_parameter", lambda **kw: reads.append(kw["Name"]) or real_get(**kw))
    # When one batch of them is handled
    response = app.worker.handle(sqs_event(app, queued(app)), Context())
    # Then all are paused, after one cached read and one fresh confirmation, not one per message
    assert response == {"batchItemFailures": []}
    assert {app.operations.require(f"op-m{n}").state for n in range(5)} == {OperationState.PAUSED}
    assert len(reads) == 2
    assert recorder.calls == []
