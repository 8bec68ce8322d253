"""The relay: every record a producer caused ends dispatched, a no-op, REJECTED or a conflict; only AWS fails it."""

from __future__ import annotations

import json
import uuid

import boto3
import pytest
from botocore.exceptions import ClientError

from converge.flow.pipeline import Delivery
from converge.model.outcomes import Outcome
from converge.model.states import Flag, OperationState
from converge.observability import metrics
from converge.store.codecs import content_fingerprint

USER = str(uuid.uuid4())


def item(operation_id: str, job_type: str = "mail.notice.v1", payload: dict | None = None, **extra) -> dict:
    """A producer's item, low-level, as `aws dynamodb put-item` takes it."""
    body = payload if payload is not None else {"user_id": {"S": USER}}
    return {"operation_id": {"S": operation_id}, "job_type": {"S": job_type}, "payload": {"M": body}, **extra}


def record(new: dict | None, sequence: str, event: str = "INSERT", old: dict | None = None) -> dict:
    dynamodb: dict = {"Keys": {"operation_id": (new or old)["operation_id"]}, "SequenceNumber": sequence}
    dynamodb["StreamViewType"] = "NEW_AND_OLD_IMAGES"
    dynamodb["ApproximateCreationDateTime"] = 1_900_000_000.0
    if new is not None:
        dynamodb["NewImage"] = new
    if old is not None:
        dynamodb["OldImage"] = old
    return {"eventName": event, "eventSource": "aws:dynamodb", "dynamodb": dynamodb}


def queued(app) -> list[dict]:
    found, sqs = [], boto3.client("sqs")
    while batch := sqs.receive_message(
        QueueUrl=app.settings.queue_url, MaxNumberOfMessages=10, MessageAttributeNames=["All"]
    ).get("Messages", []):
        found += batch
    return found


def queued_ids(app) -> list[str]:
    return [json.loads(message["Body"])["operation_id"] for message in queued(app)]


def state_items(app) -> list[dict]:
    return boto3.client("dynamodb").scan(TableName=app.settings.state_table)["Items"]


def test_a_valid_request_is_dispatched_as_a_versioned_message_and_nothing_is_written(app):
    # Given a producer's plain item
    good = item("op-good", correlation_id={"S": "req-1"})
    # When the relay handles its INSERT
    response = app.relay.handle({"Records": [record(good, "1")]})
    # Then it is on its queue as a versioned primitive message, with when it was accepted
    assert response == {"batchItemFailures": []}
    [message] = queued(app)
    assert json.loads(message["Body"]) == {
        "v": 1,
        "operation_id": "op-good",
        "job_type": "mail.notice.v1",
        "payload": {"user_id": USER},
        "correlation_id": "req-1",
    }
    assert message["MessageAttributes"]["accepted_at"]["StringValue"].startswith("2030-03-17T")
    # And the happy path wrote nothing at all
    assert state_items(app) == []


def test_a_batch_with_unusable_records_dispatches_the_good_ones_and_rejects_the_rest_with_reasons(app):
    # Given a stream batch of good records and records a producer got wrong in every way the item allows
    bad = {
        "op-unknown": item("op-unknown", "no.such.v1", {}),
        "op-pii": item("op-pii", payload={"user_id": {"S": "ana@example.com"}}),
        "op-binary": item("op-binary", payload={"user_id": {"B": "AAE="}}),
        "op-type": {**item("op-type"), "job_type": {"N": "7"}},
        "op-list": {**item("op-list"), "payload": {"L": [{"S": "x"}]}},
        "op-big": item("op-big", payload={"user_id": {"S": "u" * 5_000}}),
        "bad id!": item("bad id!"),
    }
    records = [record(item("op-good-1"), "1")]
    records += [record(image, str(10 + n)) for n, image in enumerate(bad.values())]
    records += [record(item("op-good-2"), "99")]
    # When the relay handles the batch
    response = app.relay.handle({"Records": records})
    # Then no record failed: the good ones are dispatched ...
    assert response == {"batchItemFailures": []}
    assert sorted(queued_ids(app)) == ["op-good-1", "op-good-2"]
    # ... and every bad one is REJECTED with its reason, listed for an operator
    reasons = {operation_id: app.operations.require(operation_id).last_error for operation_id in bad}
    assert all(app.operations.require(op).state is OperationState.REJECTED for op in bad)
    assert "unknown job type" in reasons["op-unknown"]
    assert "e-mail" in reasons["op-pii"]
    assert "binary" in reasons["op-binary"]
    assert "job_type must be a string" in reasons["op-type"]
    assert "payload must be a map" in reasons["op-list"]
    assert "bytes" in reasons["op-big"] or "at most" in reasons["op-big"]
    assert "operation_id" in reasons["bad id!"]
    rejected = {row["operation_id"] for row in app.operations.listings.iter_attention(OperationState.REJECTED)}
    assert rejected == set(bad)


def test_the_same_content_written_again_is_a_no_op_before_and_after_it_ran(app):
    # Given a request dispatched once
    first = item("op-1", correlation_id={"S": "req-1"})
    app.relay.handle({"Records": [record(first, "1")]})
    queued(app)
    # When the producer's retried PutItem shows up as a MODIFY with the same content (a new correlation id and
    # attributes converge owns included: neither is what a request is)
    again = {**first, "correlation_id": {"S": "req-2"}, "state": {"S": "ACCEPTED"}, "attempts": {"N": "0"}}
    response = app.relay.handle({"Records": [record(again, "2", "MODIFY", old=first)]})
    # Then nothing is sent and nothing is written
    assert response == {"batchItemFailures": []}
    assert queued(app) == [] and state_items(app) == []


def test_other_content_under_a_taken_id_is_a_conflict_recorded_and_listed_and_not_dispatched(app):
    # Given a request that was dispatched
    first = item("op-1")
    app.relay.handle({"Records": [record(first, "1")]})
    queued(app)
    # When the producer overwrites it with other content
    other = item("op-1", payload={"user_id": {"S": str(uuid.uuid4())}})
    response = app.relay.handle({"Records": [record(other, "2", "MODIFY", old=first)]})
    # Then nothing is dispatched; the conflict is on the operation's receipt, and it is listed
    assert response == {"batchItemFailures": []}
    assert queued(app) == []
    operation = app.operations.require("op-1")
    assert operation.state is OperationState.ACCEPTED
    [conflict] = operation.conflicts
    assert "other content" in conflict.source
    assert [row["operation_id"] for row in app.operations.listings.list_attention(Flag.CONFLICT).operations] == ["op-1"]
    # And the original is what any re-dispatch sends: it was kept when the conflict was recorded
    assert operation.runnable().payload == {"user_id": USER}
    assert operation.payload == {"user_id": USER}


def test_a_deleted_request_touches_nothing(app):
    gone = item("op-1")
    assert app.relay.handle({"Records": [record(None, "1", "REMOVE", old=gone)]}) == {"batchItemFailures": []}
    assert queued(app) == [] and state_items(app) == []


def test_an_entry_sqs_refuses_once_is_retried_inline_and_nothing_fails(app, monkeypatch):
    items = [item(f"op-{n}") for n in range(12)]
    real = app.clients.sqs.send_message_batch
    sent: list[int] = []

    def flaky_batch(QueueUrl, Entries):
        # The first call loses its fourth entry; everything else goes through.
        keep = [e for e in Entries if sent or e["Id"] != "3"]
        response = real(QueueUrl=QueueUrl, Entries=keep)
        failed = [] if sent else [{"Id": "3", "SenderFault": False, "Code": "InternalError", "Message": "x"}]
        sent.append(len(Entries))
        return {"Successful": response.get("Successful", []), "Failed": failed}

    monkeypatch.setattr(app.clients.sqs, "send_message_batch", flaky_batch)
    monkeypatch.setattr(app.dispatcher, "_sleep", lambda seconds: None)
    response = app.relay.handle({"Records": [record(image, str(100 + n)) for n, image in enumerate(items)]})
    # Ten a call; the refused entry again, alone; then the last two
    assert sent == [10, 1, 2]
    assert response == {"batchItemFailures": []}
    assert sorted(queued_ids(app)) == sorted(f"op-{n}" for n in range(12))


def test_after_an_aws_failure_the_relay_reports_the_first_unsent_record_and_sends_nothing_after_it(app, monkeypatch):
    # Given SQS refusing one entry every time, in a batch of twelve records (two calls' worth)
    items = [item(f"op-{n}") for n in range(12)]
    real = app.clients.sqs.send_message_batch

    def always_refusing_op_3(QueueUrl, Entries):
        keep = [e for e in Entries if json.loads(e["MessageBody"])["operation_id"] != "op-3"]
        response = real(QueueUrl=QueueUrl, Entries=keep)
        refused = [e for e in Entries if e not in keep]
        failed = [{"Id": e["Id"], "SenderFault": False, "Code": "InternalError", "Message": "x"} for e in refused]
        return {"Successful": response.get("Successful", []), "Failed": failed}

    monkeypatch.setattr(app.clients.sqs, "send_message_batch", always_refusing_op_3)
    monkeypatch.setattr(app.dispatcher, "_sleep", lambda seconds: None)
    # When the relay handles them
    response = app.relay.handle({"Records": [record(image, str(100 + n)) for n, image in enumerate(items)]})
    # Then the stream is told to resume at op-3's record, and the next call (op-10, op-11) was never made,
    # so the retry sends again at most what shared op-3's call
    assert response == {"batchItemFailures": [{"itemIdentifier": "103"}]}
    assert sorted(queued_ids(app)) == sorted(f"op-{n}" for n in range(10) if n != 3)


def test_a_dynamodb_failure_recording_a_refusal_stops_the_batch_there(app, monkeypatch):
    # Given a good record, a bad one, and a good one after it, while the state table fails
    def failing(**kwargs):
        raise ClientError({"Error": {"Code": "InternalServerError", "Message": "boom"}}, "UpdateItem")

    monkeypatch.setattr(app.clients.dynamodb, "update_item", failing)
    records = [record(item("op-a"), "1"), record(item("op-bad", "no.such.v1", {}), "2"), record(item("op-b"), "3")]
    # When the relay handles them
    response = app.relay.handle({"Records": records})
    # Then what came before was sent, the failed write is where the stream resumes, and nothing after it went out
    assert response == {"batchItemFailures": [{"itemIdentifier": "2"}]}
    assert queued_ids(app) == ["op-a"]


def test_a_first_content_read_late_whose_job_type_is_unreadable_is_restored_and_listed_as_unreadable(app):
    # Given a request rewritten (the relay taking the rewrite's old image for the first content), whose first
    # write, read late, holds no job type it could carry
    first = {"operation_id": {"S": "op-1"}, "payload": {"M": {"user_id": {"S": USER}}}}
    second, third = item("op-1"), item("op-1", payload={"user_id": {"S": str(uuid.uuid4())}})
    app.relay.handle({"Records": [record(third, "3", "MODIFY", old=second)]})
    # When its INSERT is read at last / Then it is restored, with nothing to dispatch, and the conflict it lists
    # names the job type as unreadable
    assert app.relay.restore_first_content(record(first, "1")) == "op-1"
    operation = app.operations.require("op-1")
    assert operation.runnable() is None
    assert operation.conflicts[-1].job_type == "(unreadable)"


@pytest.mark.parametrize(
    "owned",
    [
        {"state": {"S": "SUCCEEDED"}},
        {"state": {"S": "BOGUS"}},
        {"state": {"N": "3"}},
        {"attempts": {"S": "many"}},
        {"history": {"S": "not a list"}},
        {"history": {"L": [{"N": "1"}]}},
        {"lease_owner": {"S": "someone"}, "lease_until": {"N": "99999999999"}},
        {"fingerprint": {"S": "0" * 32}},
        {"attention": {"S": "FAILED"}, "attention_sk": {"S": "x#y"}},
    ],
    ids=lambda owned: "+".join(owned),
)
def test_attributes_converge_owns_written_by_a_producer_are_ignored(app, recorder, owned):
    # Given a producer's item carrying attributes converge owns, with wrong types or values
    written = item("op-1", **owned)
    boto3.client("dynamodb").put_item(TableName=app.settings.jobs_table, Item=written)
    # When the relay handles it
    response = app.relay.handle({"Records": [record(written, "1")]})
    # Then the request is dispatched as if they were not there, and the state they claim is nowhere
    assert response == {"batchItemFailures": []}
    [message] = queued(app)
    assert json.loads(message["Body"])["operation_id"] == "op-1"
    assert state_items(app) == []
    assert app.operations.require("op-1").state is OperationState.ACCEPTED
    # And the job runs once, its receipt converge's own
    result = app.pipeline.process(message["Body"], Delivery("m-1", 1, 3, lambda: 30_000))
    assert result.outcome is Outcome.SUCCEEDED
    assert recorder.effects == ["op-1"]
    receipt = app.operations.require("op-1")
    assert (receipt.state, receipt.attempts, receipt.last_error) == (OperationState.SUCCEEDED, 1, None)
    assert [entry.state for entry in receipt.history] == ["ACCEPTED", "IN_PROGRESS", "SUCCEEDED"]


def test_an_insert_read_after_a_rewrite_restores_its_content_as_the_first(app):
    # Given a request written, rewritten (the relay gave that batch up) and rewritten again, the relay reading only
    # the last rewrite, whose old image it takes for the first content
    first = item("op-1")
    second = item("op-1", payload={"user_id": {"S": str(uuid.uuid4())}})
    third = item("op-1", payload={"user_id": {"S": str(uuid.uuid4())}})
    app.relay.handle({"Records": [record(third, "3", "MODIFY", old=second)]})
    assert app.operations.require("op-1").runnable().payload == {"user_id": second["payload"]["M"]["user_id"]["S"]}
    # When its INSERT is read at last (as the reconciler replays the given-up batch)
    metrics.clear_metrics()
    restored = app.relay.restore_first_content(record(first, "1"))
    # Then the first content is the operation's again, and the content pinned by mistake is listed as a conflict
    assert restored == "op-1"
    operation = app.operations.require("op-1")
    assert operation.runnable().payload == {"user_id": USER}
    assert len(operation.conflicts) == 2
    pinned = operation.conflicts[1]
    assert (pinned.fingerprint, pinned.job_type) == (content_fingerprint(second), "mail.notice.v1")
    assert pinned.source == (
        "jobs table: a later write, read before the request's first (its stream batch was replayed late)"
    )
    # And the restore is counted, for the operator's dashboard
    assert metrics.metric_set["first_content_restored"]["Value"] == [1.0]
    metrics.clear_metrics()
    # And reading it again, or any other record, restores nothing
    assert app.relay.restore_first_content(record(first, "1")) is None
    assert app.relay.restore_first_content(record(third, "3", "MODIFY", old=second)) is None
    assert app.relay.restore_first_content(record(None, "4", "REMOVE", old=first)) is None
    assert app.relay.restore_first_content(record(item("op-2"), "5")) is None  # no record pinned: nothing to restore
    assert app.relay.restore_first_content({"eventName": "INSERT", "dynamodb": {"NewImage": {"x": {"S": "1"}}}}) is None
