"""What a re-dispatch (redrive, resume, resolve, the reconciler) may send: the request the operation
was admitted with, and nothing when that request is gone or now holds other content."""

from __future__ import annotations

import json

import pytest

from converge.dispatch import NotRunnable, SendFailed
from converge.receipt import Operation
from converge.request import JobRequest

from .sqs_rules import receive

REQUEST = JobRequest("op-1", "mail.notice.v1", {"user_id": "2c9d6c2e-8f5e-4c43-9a51-0d2b9d0c1f00"})


def state(fingerprint: str) -> dict:
    return {"operation_id": {"S": "op-1"}, "state": {"S": "FAILED"}, "fingerprint": {"S": fingerprint}}


def test_the_admitted_request_is_what_is_sent_again(app):
    # Given an operation whose stored request is the content it was admitted with
    operation = Operation.from_records("op-1", REQUEST.to_item(), state(REQUEST.fingerprint))
    # When a re-dispatch asks what to send / Then it is that request's envelope
    envelope = app.dispatcher.envelope_for(operation)
    assert (envelope.operation_id, envelope.job_type, envelope.payload) == ("op-1", "mail.notice.v1", REQUEST.payload)


@pytest.mark.parametrize(
    ("request_item", "why"),
    [
        (None, "the request is not in the jobs table"),
        (
            JobRequest("op-1", "mail.notice.v1", {"user_id": "7a317fca-0f80-42bf-8b8c-98139302e431"}).to_item(),
            "the jobs table now holds other content under this id",
        ),
    ],
    ids=["request gone", "other content, original not kept"],
)
def test_nothing_is_sent_when_the_admitted_request_is_not_there_and_the_refusal_says_why(app, request_item, why):
    # Given an operation admitted with one content whose stored request is gone, or was overwritten
    operation = Operation.from_records("op-1", request_item, state(REQUEST.fingerprint))
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
    outgoing = app.dispatcher.outgoing(Operation.from_records("op-1", REQUEST.to_item(), None).runnable().envelope())
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
