"""What a re-dispatch (redrive, resume, resolve, the reconciler) may send: the request the operation
was admitted with, and nothing when that request is gone or now holds other content."""

from __future__ import annotations

import pytest

from converge.dispatch import NotRunnable
from converge.receipt import Operation
from converge.request import JobRequest

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
