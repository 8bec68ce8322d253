"""The worker (SQS batches through the pipeline), fed by the relay, on moto."""

from __future__ import annotations

import uuid

import boto3

from converge.flow.toggles import Toggles
from converge.model.clock import iso
from converge.model.states import OperationState

from .conftest import PREFIX, set_toggle


def relay(app, *operation_ids: str) -> None:
    """Relay admitted operations as the stream would carry them: INSERT records of their stored requests."""
    records = []
    for sequence, operation_id in enumerate(operation_ids, start=1):
        image = boto3.client("dynamodb").get_item(
            TableName=app.settings.jobs_table, Key={"operation_id": {"S": operation_id}}
        )["Item"]
        records.append(
            {
                "eventName": "INSERT",
                "dynamodb": {
                    "Keys": {"operation_id": image["operation_id"]},
                    "NewImage": image,
                    "SequenceNumber": str(sequence),
                },
            }
        )
    assert app.relay.handle({"Records": records}) == {"batchItemFailures": []}


def queued(app, queue_url=None) -> list[dict]:
    sqs = boto3.client("sqs")
    response = sqs.receive_message(
        QueueUrl=queue_url or app.settings.queue_url,
        MaxNumberOfMessages=10,
        MessageAttributeNames=["All"],
        AttributeNames=["All"],
    )
    return response.get("Messages", [])


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
    relay(app, "op-a", "op-b")
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
    from converge.model.errors import TransientError

    app.enqueue("mail.notice.v1", "op-t", {"user_id": str(uuid.uuid4())})
    relay(app, "op-t")
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
    relay(app, "op-p")
    response = app.worker.handle(sqs_event(app, queued(app)), Context())
    assert response == {"batchItemFailures": []}
    assert app.operations.require("op-p").state is OperationState.PAUSED
    assert recorder.calls == []


def test_a_batch_of_paused_messages_confirms_the_toggle_once_not_once_each(app, recorder, monkeypatch):
    # Given five messages of a fail-closed job whose toggle does not exist, and toggles cached as deployed
    app.pipeline.toggles = Toggles(PREFIX, app.clients.ssm, max_age=15, clock=app.clock)
    for n in range(5):
        app.enqueue("money.credit.v1", f"op-m{n}", {"user_id": str(uuid.uuid4())})
    relay(app, *(f"op-m{n}" for n in range(5)))
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


def test_the_worker_records_acceptance_at_the_time_the_producer_wrote(app, recorder, clock):
    # Given a request whose stream record says when the producer wrote it, a minute before the relay ran
    app.enqueue("mail.notice.v1", "op-when", {"user_id": str(uuid.uuid4())})
    written = clock.now() - 60
    image = boto3.client("dynamodb").get_item(
        TableName=app.settings.jobs_table, Key={"operation_id": {"S": "op-when"}}
    )["Item"]
    record = {
        "eventName": "INSERT",
        "dynamodb": {"NewImage": image, "SequenceNumber": "1", "ApproximateCreationDateTime": written},
    }
    assert app.relay.handle({"Records": [record]}) == {"batchItemFailures": []}
    # When the worker runs its message (the state record is created by this first delivery)
    assert app.worker.handle(sqs_event(app, queued(app)), Context()) == {"batchItemFailures": []}
    # Then the receipt says it was accepted when the producer wrote it, not when the worker ran
    stored = app.operations.require("op-when")
    assert stored.state is OperationState.SUCCEEDED
    assert (stored.history[0].state, stored.history[0].at) == ("ACCEPTED", iso(written))
    assert stored.history[1].at == iso(clock.now())


def test_an_event_without_records_is_refused_before_anything_runs(app, recorder):
    # Given an event that is not an SQS batch (a console test event, a misrouted trigger)
    # When the worker is given it / Then it refuses it with the reason, and nothing ran
    for event in ({}, {"Records": "not a list"}, ["not", "a", "dict"]):
        try:
            app.worker.handle(event, Context())
        except ValueError as exc:
            assert str(exc) == "not an SQS event: it has no Records list"
        else:
            raise AssertionError(f"{event!r} was taken for an SQS batch")
    assert recorder.effects == []


def test_a_record_that_fails_inside_converge_goes_back_and_the_rest_of_the_batch_runs(app, recorder, monkeypatch):
    # Given a batch of three jobs, and converge's own code failing on the second (not the job: a bug of its own)
    for op in ("op-1", "op-2", "op-3"):
        app.enqueue("mail.notice.v1", op, {"user_id": str(uuid.uuid4())})
    relay(app, "op-1", "op-2", "op-3")
    messages = queued(app)
    real = app.pipeline.process

    def process(body, delivery):
        if '"op-2"' in body:
            raise RuntimeError("converge's own bug")
        return real(body, delivery)

    monkeypatch.setattr(app.pipeline, "process", process)
    # When the worker handles the batch
    response = app.worker.handle(sqs_event(app, messages), Context())
    # Then only that record goes back to the queue, and the other two ran
    failed = [m["MessageId"] for m in messages if '"op-2"' in m["Body"]]
    assert response == {"batchItemFailures": [{"itemIdentifier": failed[0]}]}
    assert sorted(recorder.effects) == ["op-1", "op-3"]


def test_a_record_without_a_receive_count_is_run_not_refused(app, recorder):
    # Given a record whose attributes carry no ApproximateReceiveCount (the event source always sets it; a hand-made
    # test event may not) and a job that fails for good on its final attempt only
    from converge.model.errors import TransientError

    app.enqueue("mail.notice.v1", "op-n", {"user_id": str(uuid.uuid4())})
    relay(app, "op-n")
    event = sqs_event(app, queued(app))
    event["Records"][0]["attributes"] = {}
    recorder.fail_effect.append(TransientError("throttled"))
    # When the worker handles it / Then it was attempt 1: retried, not failed
    response = app.worker.handle(event, Context())
    assert len(response["batchItemFailures"]) == 1
    assert app.operations.require("op-n").state is OperationState.IN_PROGRESS
