"""What a re-dispatch (redrive, resume, resolve, the reconciler) may send: the request the operation
was admitted with, and nothing when that request is gone or now holds other content."""

from __future__ import annotations

import json

import pytest

import converge.flow.dispatch as dispatch_module
from converge.flow.dispatch import Dispatcher, Outgoing
from converge.flow.registry import JobBinding, Policy, Queue, Registry
from converge.model.envelope import Envelope
from converge.model.errors import InvalidMessage, NotRunnable, SendFailed
from converge.model.request import JobRequest
from converge.store.codecs import operation_from_records, request_item

from .conftest import Notice
from .sqs_deliveries import receive

REQUEST = JobRequest("op-1", "mail.notice.v1", {"user_id": "2c9d6c2e-8f5e-4c43-9a51-0d2b9d0c1f00"})


@pytest.fixture
def counted_dispatch(monkeypatch) -> list[tuple[str, int]]:
    """The dispatcher's counts, as (name, value)."""
    seen: list[tuple[str, int]] = []
    monkeypatch.setattr(dispatch_module, "count", lambda name, job_type=None, value=1: seen.append((name, value)))
    return seen


def state(fingerprint: str) -> dict:
    return {"operation_id": {"S": "op-1"}, "state": {"S": "FAILED"}, "fingerprint": {"S": fingerprint}}


def test_the_admitted_request_is_what_is_sent_again(app):
    # Given an operation whose stored request is the content it was admitted with
    operation = operation_from_records("op-1", request_item(REQUEST), state(REQUEST.fingerprint))
    # When a re-dispatch asks what to send / Then it is that request's envelope
    envelope = app.dispatcher.envelope_for(operation)
    assert (envelope.operation_id, envelope.job_type, envelope.payload) == ("op-1", "mail.notice.v1", REQUEST.payload)


@pytest.mark.parametrize(
    ("request_item", "why"),
    [
        (None, "the request is not in the jobs table"),
        (
            request_item(JobRequest("op-1", "mail.notice.v1", {"user_id": "7a317fca-0f80-42bf-8b8c-98139302e431"})),
            "the jobs table now holds other content under this id",
        ),
    ],
    ids=["request gone", "other content, original not kept"],
)
def test_nothing_is_sent_when_the_admitted_request_is_not_there_and_the_refusal_says_why(app, request_item, why):
    # Given an operation admitted with one content whose stored request is gone, or was overwritten
    operation = operation_from_records("op-1", request_item, state(REQUEST.fingerprint))
    # When a re-dispatch asks what to send / Then nothing is, and the refusal names the operation and the cause
    with pytest.raises(NotRunnable) as refused:
        app.dispatcher.envelope_for(operation)
    assert str(refused.value) == f"nothing safe to dispatch for op-1: {why}"


class Refusing:
    """The SQS client, refusing every entry of every batch (a throttled or unavailable queue)."""

    def __init__(self, real):
        self.real = real
        self.calls = 0

    def send_message_batch(self, QueueUrl, Entries):
        self.calls += 1
        failed = [{"Id": e["Id"], "SenderFault": False, "Code": "ServiceUnavailable", "Message": "x"} for e in Entries]
        return {"Successful": [], "Failed": failed}

    def __getattr__(self, name):
        return getattr(self.real, name)


def test_one_message_sent_again_is_on_its_queue_or_the_send_raises_naming_it(app, monkeypatch):
    # Given the admitted request's envelope, routed to its job's queue
    outgoing = app.dispatcher.outgoing(
        operation_from_records("op-1", request_item(REQUEST), None).runnable().envelope()
    )
    # When it is sent / Then it is on the queue, once, and nothing is raised
    app.dispatcher.send_one(outgoing)
    [message] = receive(app)
    assert json.loads(message["Body"])["operation_id"] == "op-1"
    # When the queue refuses it, even after the inline retries
    refusing = Refusing(app.clients.sqs)
    monkeypatch.setattr(app.dispatcher, "_sqs", refusing)
    monkeypatch.setattr(app.dispatcher, "_sleep", lambda seconds: None)
    # Then the send raises, naming the operation, so the caller (redrive, resume, resolve) knows it did not go out
    with pytest.raises(SendFailed) as failed:
        app.dispatcher.send_one(outgoing)
    assert str(failed.value) == "could not send op-1 to its queue"
    assert refusing.calls == 3  # the first try and the two inline retries


# -- how a batch goes out: windows of ten per queue, in order, retried inline with a growing pause ----------


class FakeSqs:
    """SendMessageBatch as SQS answers it, with entries failing as scripted (per call, by entry position)."""

    def __init__(self, failing: list[set[int]] | None = None, broken_queues: frozenset[str] = frozenset()) -> None:
        self.calls: list[tuple[str, list[str]]] = []  # (queue, the operation ids sent)
        self.failing = list(failing or [])
        self.broken_queues = broken_queues

    def send_message_batch(self, QueueUrl: str, Entries: list[dict]) -> dict:
        self.calls.append((QueueUrl, [json.loads(entry["MessageBody"])["operation_id"] for entry in Entries]))
        if QueueUrl in self.broken_queues:
            raise RuntimeError("queue unavailable")
        fail = self.failing.pop(0) if self.failing else set()
        failed = [{"Id": entry["Id"], "Code": "InternalError"} for i, entry in enumerate(Entries) if i in fail]
        return {"Successful": [], "Failed": failed}


def outgoing_to(queue_url: str, operation_id: str) -> Outgoing:
    envelope = Envelope(operation_id=operation_id, job_type="mail.notice.v1", payload=REQUEST.payload)
    return Outgoing(queue_url, envelope)


def dispatcher(app, sqs: FakeSqs, pauses: list[float]) -> Dispatcher:
    return Dispatcher(app.settings.queues, app.registry, sqs, sleep=pauses.append)


def test_a_long_run_to_one_queue_goes_out_ten_to_a_call_in_order(app, counted_dispatch):
    sqs, pauses = FakeSqs(), []
    items = [outgoing_to("q-a", f"op-{n:02d}") for n in range(21)]
    assert dispatcher(app, sqs, pauses).send(items) is None
    assert [len(ids) for _, ids in sqs.calls] == [10, 10, 1]
    assert [op for _, ids in sqs.calls for op in ids] == [f"op-{n:02d}" for n in range(21)]
    assert pauses == []
    assert counted_dispatch == [("dispatched", 21)]


def test_queues_of_one_window_are_sent_in_the_order_of_their_first_item(app, counted_dispatch):
    # Given a window whose first item goes to queue b, then a, then b again
    sqs, pauses = FakeSqs(), []
    items = [outgoing_to("q-b", "op-1"), outgoing_to("q-a", "op-2"), outgoing_to("q-b", "op-3")]
    assert dispatcher(app, sqs, pauses).send(items) is None
    # Then b's call (holding its two items) goes first
    assert sqs.calls == [("q-b", ["op-1", "op-3"]), ("q-a", ["op-2"])]


def test_failed_entries_are_retried_inline_after_a_doubling_pause(app, counted_dispatch):
    # Given a call whose second entry fails twice, then goes out
    sqs, pauses = FakeSqs(failing=[{1}, {0}]), []
    items = [outgoing_to("q-a", "op-1"), outgoing_to("q-a", "op-2")]
    # When the batch is sent
    assert dispatcher(app, sqs, pauses).send(items) is None
    # Then only the failed entry is sent again, after 0.05 s and then 0.1 s
    assert sqs.calls == [("q-a", ["op-1", "op-2"]), ("q-a", ["op-2"]), ("q-a", ["op-2"])]
    assert pauses == [0.05, 0.1]


def test_an_entry_that_keeps_failing_stops_the_send_and_is_named_with_what_was_not_sent(app, counted_dispatch):
    # Given three items to two queues, where every attempt at the first queue's second entry fails
    sqs, pauses = FakeSqs(failing=[{1}, {0}, {0}]), []
    items = [outgoing_to("q-a", "op-1"), outgoing_to("q-a", "op-2"), outgoing_to("q-b", "op-3")]
    # When the batch is sent / Then the index of the first item that did not go out comes back
    assert dispatcher(app, sqs, pauses).send(items) == 1
    # And nothing after it was sent (queue b was never called), counted as not dispatched from it on
    assert [queue for queue, _ in sqs.calls] == ["q-a", "q-a", "q-a"]
    assert counted_dispatch == [("dispatch_failed", 2)]


def test_a_queue_that_cannot_be_called_stops_the_send_at_its_first_item(app, counted_dispatch):
    sqs, pauses = FakeSqs(broken_queues=frozenset({"q-b"})), []
    items = [outgoing_to("q-a", "op-1"), outgoing_to("q-b", "op-2"), outgoing_to("q-a", "op-3")]
    assert dispatcher(app, sqs, pauses).send(items) == 1
    assert counted_dispatch == [("dispatch_failed", 2)]


def test_routing_keeps_the_jobs_queue_and_the_attributes_it_is_given(app):
    envelope = Envelope(operation_id="op-1", job_type="mail.notice.v1", payload=REQUEST.payload)
    extra = {"redriven_by": {"DataType": "String", "StringValue": "operator"}}
    outgoing = app.dispatcher.outgoing(envelope, attributes=extra)
    assert outgoing.queue is Queue.CRITICAL
    assert outgoing.attributes == extra
    assert outgoing.entry("0")["MessageAttributes"]["redriven_by"] == extra["redriven_by"]


def test_a_recurring_job_has_no_queue_and_routing_it_says_so(app):
    registry = Registry()
    registry.register(
        JobBinding(
            job_type="report.daily.v1",
            message=Notice,
            runner=lambda: None,
            queue=None,
            policy=Policy.RECURRING,
        )
    )
    envelope = Envelope(operation_id="op-r", job_type="report.daily.v1", payload=REQUEST.payload)
    with pytest.raises(InvalidMessage, match=r"^report.daily.v1 is a recurring job; it runs on its schedule"):
        Dispatcher(app.settings.queues, registry, None).outgoing(envelope)
