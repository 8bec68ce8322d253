"""The outbox relay's visible outcomes: what a refused record counts, and where a valid one goes."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import boto3
import pytest
from botocore.exceptions import ClientError

from converge.flow.dispatch import Dispatcher
from converge.flow.registry import JobBinding, Policy, Queue, Registry
from converge.flow.relay import Relay
from converge.model.clock import iso
from converge.model.envelope import Envelope
from converge.model.request import JobRequest
from converge.model.states import OperationState
from converge.observability import metrics
from converge.store.codecs import content_fingerprint

from .conftest import Notice
from .sqs_deliveries import dispatch, receive


def test_a_record_the_relay_refuses_is_rejected_visibly_and_counted(app):
    # Given a raw producer item of a job type nobody registered
    app.operations.admit(JobRequest("op-stray", "no.such.v1", {"user_id": "u-1"}))
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
            "UnusableRequest: payload must be a map (M) of primitive values, not string",
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
    # And it is listed under its job type as written, even when the rest of the item cannot be read
    assert stored.job_type == item["job_type"]["S"]
    listed = app.operations.listings.list_attention(OperationState.REJECTED, item["job_type"]["S"]).operations
    assert [row["operation_id"] for row in listed] == [operation_id]


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


def test_an_aws_error_on_one_record_is_reported_and_nothing_after_it_is_sent(app, monkeypatch):
    # Given a batch of a valid record, one whose rejection cannot be written (the state table throttles),
    # and another valid record after it
    raw_put(app, operation_id={"S": "op-fine"}, job_type={"S": "mail.notice.v1"}, payload=USER)
    raw_put(app, operation_id={"S": "op-stray"}, job_type={"S": "no.such.v1"}, payload=USER)
    raw_put(app, operation_id={"S": "op-later"}, job_type={"S": "mail.notice.v1"}, payload=USER)
    table = boto3.client("dynamodb")
    items = {
        op: table.get_item(TableName=app.settings.jobs_table, Key={"operation_id": {"S": op}})["Item"]
        for op in ("op-fine", "op-stray", "op-later")
    }

    def throttled(*_, **__):
        raise ClientError({"Error": {"Code": "ThrottlingException", "Message": "slow down"}}, "UpdateItem")

    monkeypatch.setattr(app.operations.state, "reject", throttled)
    metrics.clear_metrics()
    # When the relay handles the batch in stream order
    response = app.relay.handle(
        {
            "Records": [
                stream_record(items["op-fine"], "100"),
                stream_record(items["op-stray"], "200"),
                stream_record(items["op-later"], "300"),
            ]
        }
    )
    # Then the record that met the AWS error is reported by its sequence number; what came before it went
    # out, and nothing after it did (the stream's retry resumes there, so nothing is sent twice)
    assert response == {"batchItemFailures": [{"itemIdentifier": "200"}]}
    assert [json.loads(m["Body"])["operation_id"] for m in receive(app)] == ["op-fine"]
    assert metrics.metric_set["relayed"]["Value"] == [1.0]
    metrics.clear_metrics()
    # And the relay keeps why, in the words the reconciler lists a replay that failed the same way with
    assert (
        app.relay.last_failure
        == "ClientError: An error occurred (ThrottlingException) when calling the UpdateItem operation: slow down"
    )
    # And a later batch that goes out whole leaves no reason behind
    monkeypatch.undo()
    assert app.relay.handle({"Records": [stream_record(items["op-later"], "300")]}) == {"batchItemFailures": []}
    assert app.relay.last_failure is None


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
    monkeypatch.setattr(app.relay._dispatcher, "_sqs", NoFailedList(app.clients.sqs))
    raw_put(app, operation_id={"S": "op-sent"}, job_type={"S": "mail.notice.v1"}, payload=USER)
    # When the relay sends it / Then nothing is reported failed and the message is on its queue
    dispatch(app, "op-sent")
    assert [json.loads(m["Body"])["operation_id"] for m in receive(app)] == ["op-sent"]


class PartlyFailing:
    """The SQS client, reporting the first two entries of each of its next `times` batches as failed (not sent)."""

    def __init__(self, real, times):
        self.real = real
        self.times = times
        self.calls = 0

    def send_message_batch(self, QueueUrl, Entries):
        self.calls += 1
        if self.calls > self.times:
            return self.real.send_message_batch(QueueUrl=QueueUrl, Entries=Entries)
        failed, sent = Entries[:2], Entries[2:]
        response = self.real.send_message_batch(QueueUrl=QueueUrl, Entries=sent) if sent else {"Successful": []}
        response["Failed"] = [
            {"Id": entry["Id"], "SenderFault": False, "Code": "InternalError", "Message": "try again"}
            for entry in failed
        ]
        return response

    def __getattr__(self, name):
        return getattr(self.real, name)


def three_records(app):
    table = boto3.client("dynamodb")
    records = []
    for n in range(3):
        raw_put(app, operation_id={"S": f"op-{n}"}, job_type={"S": "mail.notice.v1"}, payload=USER)
        item = table.get_item(TableName=app.settings.jobs_table, Key={"operation_id": {"S": f"op-{n}"}})["Item"]
        records.append(stream_record(item, str(n)))
    return records


def test_entries_sqs_refuses_once_are_sent_again_at_once(app, monkeypatch):
    # Given SQS refusing two entries of the first batch only
    sqs = PartlyFailing(app.clients.sqs, times=1)
    monkeypatch.setattr(app.relay._dispatcher, "_sqs", sqs)
    records = three_records(app)
    metrics.clear_metrics()
    # When the relay sends them
    response = app.relay.handle({"Records": records})
    # Then the refused entries are sent again in a second call, and every record went out, once
    assert response == {"batchItemFailures": []}
    assert sqs.calls == 2
    assert sorted(json.loads(m["Body"])["operation_id"] for m in receive(app)) == ["op-0", "op-1", "op-2"]
    assert metrics.metric_set["relayed"]["Value"] == [3.0]
    metrics.clear_metrics()


def test_entries_sqs_keeps_refusing_are_retried_by_the_stream_from_the_first_and_counted(app, monkeypatch):
    # Given SQS refusing two entries of every batch
    sqs = PartlyFailing(app.clients.sqs, times=100)
    monkeypatch.setattr(app.relay._dispatcher, "_sqs", sqs)
    records = three_records(app)
    metrics.clear_metrics()
    # When the relay sends them
    response = app.relay.handle({"Records": records})
    # Then, after the inline retries, the first refused record is the batch item failure (the stream
    # retries from it), the three from it on are counted as not dispatched, and none as relayed
    assert response == {"batchItemFailures": [{"itemIdentifier": "0"}]}
    assert sqs.calls == 3
    assert metrics.metric_set["dispatch_failed"]["Value"] == [3.0]
    assert "relayed" not in metrics.metric_set
    metrics.clear_metrics()
    # And the relay keeps why, as the reason the reconciler lists a replay that failed the same way with
    assert app.relay.last_failure == "SQS did not take the message (SendMessageBatch failed after its inline retries)"


def test_a_producers_overwrite_is_recorded_with_what_the_operator_reads_on_the_receipt(app, clock):
    # Given a dispatched request, and the producer then writing other content under its id
    first = {"operation_id": {"S": "op-over"}, "job_type": {"S": "mail.notice.v1"}, "payload": USER}
    other = {**first, "payload": {"M": {"user_id": {"S": "7a317fca-0f80-42bf-8b8c-98139302e431"}}}}
    record = stream_record(other, "2")
    record["eventName"] = "MODIFY"
    record["dynamodb"]["OldImage"] = first
    metrics.clear_metrics()
    # When the relay carries the overwrite
    assert app.relay.handle({"Records": [record]}) == {"batchItemFailures": []}
    # Then it is counted once, under the name the conflict alarm and dashboards read
    assert metrics.metric_set["identity_conflict"]["Value"] == [1.0]
    metrics.clear_metrics()
    # And the receipt says where the conflict came from, in the words `converge ops show` prints
    [conflict] = app.operations.require("op-over").conflicts
    assert conflict.to_item() == {
        "at": iso(clock.now()),
        "fingerprint": content_fingerprint(other),
        "job_type": "mail.notice.v1",
        "source": "jobs table: a producer wrote other content under this operation id",
    }
    assert receive(app) == []


def test_a_rejection_at_the_relay_is_stored_as_accepted_when_the_producer_wrote_it(app, clock):
    # Given a producer's item the relay cannot carry, written five seconds before the relay sees it
    item = {"operation_id": {"S": "op-late"}, "job_type": {"S": "no.such.v1"}, "payload": USER}
    raw_put(app, **item)
    record = stream_record(item, "1")
    record["dynamodb"]["ApproximateCreationDateTime"] = clock.now() - 5
    # When the relay carries its stream record
    assert app.relay.handle({"Records": [record]}) == {"batchItemFailures": []}
    # Then the REJECTED record says it was accepted when the stream says it was written, not when it was read,
    # and holds the item's job type and content
    stored = app.operations.require("op-late")
    assert [(entry.state, entry.at) for entry in stored.history] == [
        ("ACCEPTED", iso(clock.now() - 5)),
        ("REJECTED", iso(clock.now())),
    ]
    assert (stored.job_type, stored.fingerprint) == ("no.such.v1", content_fingerprint(item))


def test_a_raw_item_whose_job_type_cannot_be_read_is_rejected_under_a_name_that_says_so(app):
    # Given a producer's raw item whose job_type is a number
    raw_put(app, operation_id={"S": "op-numeric"}, job_type={"N": "7"}, payload=USER)
    # When the relay carries its stream record
    dispatch(app, "op-numeric")
    # Then nothing is queued, and it is REJECTED and listed under "(unreadable)"
    assert receive(app) == []
    stored = app.operations.require("op-numeric")
    assert stored.state is OperationState.REJECTED
    assert stored.state_record.job_type == "(unreadable)"
    listed = app.operations.listings.list_attention(OperationState.REJECTED, "(unreadable)").operations
    assert [row["operation_id"] for row in listed] == ["op-numeric"]


@pytest.mark.parametrize(
    ("tenant", "group"),
    [
        ("partner-7", "partner-7"),
        (42, "42"),  # a number names its group by its text
        ("p" * 200, "p" * 128),  # SQS allows 128 characters
        ("", None),  # no tenant: no group
    ],
    ids=["text", "number", "too long", "empty"],
)
def test_a_tenants_value_becomes_the_message_group(app, tenant, group):
    # Given a job whose binding names a tenant field
    registry = Registry()
    registry.register(
        JobBinding(
            job_type="mail.tenant.v1",
            message=Notice,
            runner=lambda: None,
            queue=Queue.DEFAULT,
            policy=Policy.EFFECT_THEN_CLAIM,
            tenant_field="user_id",
        )
    )
    envelope = Envelope(operation_id="op-t", job_type="mail.tenant.v1", payload={"user_id": tenant})
    # When the dispatcher routes its envelope
    outgoing = Dispatcher(app.settings.queues, registry, boto3.client("sqs")).outgoing(envelope)
    # Then the tenant's value (as text, at most 128 characters) is its message group, and the entry sent carries it
    assert outgoing.group == group
    assert outgoing.entry("0").get("MessageGroupId") == group
    assert outgoing.queue_url == app.settings.queues.url(Queue.DEFAULT)


def queue_counts(app) -> tuple[int, int]:
    attributes = boto3.client("sqs").get_queue_attributes(
        QueueUrl=app.settings.queue_url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesDelayed"],
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"]), int(attributes["ApproximateNumberOfMessagesDelayed"])


def test_a_short_delay_is_recorded_scheduled_and_waits_in_the_message(app, clock):
    # Given a raw item due in ten minutes (within SQS's 900 s message delay)
    run_at = clock.now() + 600
    raw_put(
        app, operation_id={"S": "op-soon"}, job_type={"S": "mail.notice.v1"}, payload=USER, run_at={"S": iso(run_at)}
    )
    # When the relay carries it
    dispatch(app, "op-soon")
    # Then the operation is SCHEDULED, listed with its time and how it waits, and its message is delayed
    stored = app.operations.require("op-soon")
    assert stored.state is OperationState.SCHEDULED
    assert stored.history[-1].reason == f"waiting for its run_at {iso(run_at)} (message delay)"
    assert stored.state_record.run_at == run_at
    listed = app.operations.listings.list_attention(OperationState.SCHEDULED).operations
    assert [row["operation_id"] for row in listed] == ["op-soon"]
    assert queue_counts(app) == (0, 1)


def test_a_request_already_due_when_relayed_is_sent_at_once(app, clock):
    # Given a raw item whose run_at has just passed
    run_at = clock.now() - 1
    raw_put(
        app, operation_id={"S": "op-due"}, job_type={"S": "mail.notice.v1"}, payload=USER, run_at={"S": iso(run_at)}
    )
    metrics.clear_metrics()
    # When the relay carries it / Then its message is visible now, and it is counted as relayed
    dispatch(app, "op-due")
    [message] = receive(app)
    assert json.loads(message["Body"])["run_at"] == iso(run_at)
    assert metrics.metric_set["relayed"]["Value"] == [1.0]
    metrics.clear_metrics()


def test_a_delayed_request_cancelled_before_the_relay_is_never_sent(app, clock):
    # Given a delayed raw item whose operation was cancelled before its stream record was carried
    run_at = clock.now() + 600
    raw_put(
        app, operation_id={"S": "op-off"}, job_type={"S": "mail.notice.v1"}, payload=USER, run_at={"S": iso(run_at)}
    )
    assert app.cancel("op-off", "no longer wanted").applied
    # When the relay carries it
    dispatch(app, "op-off")
    # Then nothing is queued, and it stays CANCELLED
    assert queue_counts(app) == (0, 0)
    assert app.operations.require("op-off").state is OperationState.CANCELLED


def test_a_request_that_comes_due_while_it_is_being_scheduled_is_sent_at_once_and_counted(app, clock, monkeypatch):
    # Given a request due in ten minutes, and a SCHEDULED write that takes until past that time
    run_at = clock.now() + 600
    raw_put(
        app, operation_id={"S": "op-now"}, job_type={"S": "mail.notice.v1"}, payload=USER, run_at={"S": iso(run_at)}
    )
    schedule = app.operations.state.schedule

    def slow_schedule(*args, **kwargs):
        refused = schedule(*args, **kwargs)
        clock.advance(700)
        return refused

    monkeypatch.setattr(app.operations.state, "schedule", slow_schedule)
    metrics.clear_metrics()
    # When the relay carries it
    dispatch(app, "op-now")
    # Then it is recorded SCHEDULED, but its message is sent visible now (no delay left), counted as relayed
    assert app.operations.require("op-now").state is OperationState.SCHEDULED
    assert queue_counts(app) == (1, 0)
    assert metrics.metric_set["relayed"]["Value"] == [1.0]
    metrics.clear_metrics()


def test_a_relay_without_delayed_dispatch_leaves_a_delayed_request_on_the_stream_saying_why(app, clock, capsys):
    # Given a relay built without delayed dispatch, and a delayed request
    relay = Relay(
        registry=app.registry,
        state=app.operations.state,
        dispatcher=app.dispatcher,
        settlement=app.settlement,
        clock=clock,
    )
    run_at = iso(clock.now() + 600)
    raw_put(app, operation_id={"S": "op-cfg"}, job_type={"S": "mail.notice.v1"}, payload=USER, run_at={"S": run_at})
    image = boto3.client("dynamodb").get_item(TableName=app.settings.jobs_table, Key={"operation_id": {"S": "op-cfg"}})[
        "Item"
    ]
    capsys.readouterr()
    # When it carries the record
    result = relay.handle({"Records": [stream_record(image, "1")]})
    # Then the record stays on the stream to be retried, and the log names what is missing; nothing is sent
    assert result == {"batchItemFailures": [{"itemIdentifier": "1"}]}
    [logged] = [json.loads(line) for line in capsys.readouterr().out.splitlines() if '"ConfigurationError"' in line]
    assert logged["stack_trace"]["value"] == "the relay has no delayed dispatch configured"
    assert queue_counts(app) == (0, 0)


# -- the relay's decision for one record (pure: no AWS call) ---------------------------------------------------


def image(operation_id: str = "op-d", **extra: dict) -> dict:
    return {"operation_id": {"S": operation_id}, "job_type": {"S": "mail.notice.v1"}, "payload": USER, **extra}


def test_a_deleted_request_and_a_record_without_a_new_image_are_skipped_saying_why(app):
    removed = app.relay.decide({"eventName": "REMOVE", "dynamodb": {"SequenceNumber": "7", "OldImage": image()}})
    assert (type(removed).__name__, removed.sequence) == ("Skip", "7")
    assert removed.why == "REMOVE: a deleted request does not touch its operation"
    bare = app.relay.decide({"eventName": "INSERT", "dynamodb": {}})
    assert (type(bare).__name__, bare.sequence, bare.why) == ("Skip", "", "the record carries no new image")


def test_the_same_request_written_again_is_a_counted_no_op(app):
    metrics.clear_metrics()
    same = app.relay.decide(
        {"eventName": "MODIFY", "dynamodb": {"SequenceNumber": "8", "NewImage": image(), "OldImage": image()}}
    )
    assert (type(same).__name__, same.sequence, same.why) == ("Skip", "8", "the same request written again: a no-op")
    assert metrics.metric_set["producer_rewrite_same"]["Value"] == [1.0]
    metrics.clear_metrics()


def test_the_stream_records_time_is_when_the_request_was_accepted_as_a_number_or_a_datetime(app, clock):
    written = clock.now() - 90
    for created in (written, datetime.fromtimestamp(written, tz=UTC)):
        decision = app.relay.decide(
            {
                "eventName": "INSERT",
                "dynamodb": {"SequenceNumber": "9", "NewImage": image(), "ApproximateCreationDateTime": created},
            }
        )
        assert decision.outgoing.accepted_at == pytest.approx(written, abs=1e-3), created


@pytest.mark.parametrize(("seconds_ahead", "deferred"), [(0, False), (1, True)], ids=["due now", "one second ahead"])
def test_a_request_is_deferred_only_while_its_run_at_is_ahead(app, clock, seconds_ahead, deferred):
    decision = app.relay.decide(
        {
            "eventName": "INSERT",
            "dynamodb": {"SequenceNumber": "1", "NewImage": image(run_at={"S": iso(clock.now() + seconds_ahead)})},
        }
    )
    assert type(decision).__name__ == ("Defer" if deferred else "Dispatch")


def test_a_request_whose_expiry_has_passed_is_still_carried_for_the_worker_to_expire(app, clock):
    # The relay admits what the producer wrote; the worker, at delivery, ends it EXPIRED (counted, listed)
    decision = app.relay.decide(
        {
            "eventName": "INSERT",
            "dynamodb": {"SequenceNumber": "1", "NewImage": image(expires_at={"S": iso(clock.now() - 60)})},
        }
    )
    assert type(decision).__name__ == "Dispatch"


def test_an_unreadable_expiry_is_rejected_naming_it(app):
    decision = app.relay.decide(
        {"eventName": "INSERT", "dynamodb": {"SequenceNumber": "1", "NewImage": image(expires_at={"S": "soon"})}}
    )
    assert type(decision).__name__ == "Reject"
    assert decision.reason.startswith("InvalidTiming: ") and "expires_at" in decision.reason


def test_undocumented_attributes_are_counted(app):
    metrics.clear_metrics()
    decision = app.relay.decide(
        {"eventName": "INSERT", "dynamodb": {"SequenceNumber": "1", "NewImage": image(note={"S": "hello"})}}
    )
    assert type(decision).__name__ == "Dispatch"
    assert metrics.metric_set["ignored_attributes"]["Value"] == [1.0]
    metrics.clear_metrics()


@pytest.mark.parametrize("shape", ["epoch seconds", "datetime"])
def test_the_queued_message_says_when_the_stream_says_the_request_was_written(app, clock, shape):
    # Given a request written ninety seconds before the relay reads its record: the creation time given as
    # epoch seconds (a Lambda event) or as a datetime (GetRecords)
    item = {"operation_id": {"S": "op-aged"}, "job_type": {"S": "mail.notice.v1"}, "payload": USER}
    raw_put(app, **item)
    written = clock.now() - 90
    record = stream_record(item, "1")
    record["dynamodb"]["ApproximateCreationDateTime"] = (
        written if shape == "epoch seconds" else datetime.fromtimestamp(written, tz=UTC)
    )
    # When the relay carries it
    assert app.relay.handle({"Records": [record]}) == {"batchItemFailures": []}
    # Then the queued message is stamped accepted at the write, not at the read
    [message] = receive(app)
    assert message["MessageAttributes"]["accepted_at"]["StringValue"] == iso(written)


def test_a_rewrite_whose_job_type_cannot_be_read_is_recorded_under_a_name_that_says_so(app, clock):
    # Given a dispatched request, and the producer then writing it again with a job type that is a number
    first = {"operation_id": {"S": "op-over"}, "job_type": {"S": "mail.notice.v1"}, "payload": USER}
    other = {**first, "job_type": {"N": "7"}}
    record = stream_record(other, "2")
    record["eventName"] = "MODIFY"
    record["dynamodb"]["OldImage"] = first
    # When the relay carries the overwrite
    assert app.relay.handle({"Records": [record]}) == {"batchItemFailures": []}
    # Then the conflict is recorded with the unreadable job type named as such, and its raw content
    [conflict] = app.operations.require("op-over").conflicts
    assert (conflict.job_type, conflict.fingerprint) == ("(unreadable)", content_fingerprint(other))


def test_an_unusable_item_is_rejected_as_accepted_when_written_and_with_its_raw_content(app, clock):
    # Given a producer's item whose payload is not a map, written five seconds before the relay sees it
    item = {"operation_id": {"S": "op-text"}, "job_type": {"S": "mail.notice.v1"}, "payload": {"S": "user 1"}}
    raw_put(app, **item)
    record = stream_record(item, "1")
    record["dynamodb"]["ApproximateCreationDateTime"] = clock.now() - 5
    # When the relay carries its stream record
    assert app.relay.handle({"Records": [record]}) == {"batchItemFailures": []}
    # Then it is REJECTED, accepted when the stream says it was written, holding the item's raw fingerprint
    stored = app.operations.require("op-text")
    assert [(entry.state, entry.at) for entry in stored.history] == [
        ("ACCEPTED", iso(clock.now() - 5)),
        ("REJECTED", iso(clock.now())),
    ]
    assert stored.fingerprint == content_fingerprint(item) and stored.fingerprint.startswith("raw-")


def test_a_deployment_without_batches_relays_a_request_under_a_batchs_id_form_as_any_other(app):
    # Given a deployment with no batches table, and a producer's request whose id has a batch child's form
    assert app.batches is None
    raw_put(app, operation_id={"S": "b-1::0:p-1"}, job_type={"S": "mail.notice.v1"}, payload=USER)
    # When the relay carries it / Then it is sent to its queue like any request (no batch can vouch or refuse)
    dispatch(app, "b-1::0:p-1")
    assert queue_counts(app) == (1, 0)
