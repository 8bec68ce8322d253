"""The redrive decision as a table: operation, binding and kill switch in, one action and its reason out."""

from __future__ import annotations

import pytest

from converge.flow.registry import JobBinding, Policy, Queue
from converge.model.envelope import Envelope
from converge.model.records import Operation, StateRecord
from converge.model.request import fingerprint
from converge.model.states import OperationState
from converge.operate.redrive_decision import (
    SQS_REDRIVEN_ERROR_CLASS,
    Action,
    RedriveRequest,
    decide,
    error_class,
    matches,
    resent_attributes,
)
from converge.screening.identifiers import Identifier
from converge.screening.message import JobMessage

JOB = "mail.notice.v1"
NOW = 1_800_000_000.0
PAYLOAD = {"user_id": "u-1"}


class Notice(JobMessage):
    user_id: Identifier


BINDING = JobBinding(JOB, Notice, lambda: None, Queue.CRITICAL, Policy.EFFECT_THEN_CLAIM)
ENVELOPE = Envelope(operation_id="op-1", job_type=JOB, payload=PAYLOAD)
OTHER_CONTENT = Envelope(operation_id="op-1", job_type=JOB, payload={"user_id": "u-2"})


def stored(state: OperationState, content: str | None = None) -> Operation:
    """An operation as read from the state table, admitted with `content`'s fingerprint (the envelope's)."""
    print_ = content or fingerprint(JOB, PAYLOAD)
    return Operation("op-1", JOB, PAYLOAD, state, record=StateRecord("op-1", state, JOB, fingerprint=print_))


S = OperationState

# (operation state or None for no operation, envelope, binding known, toggle on) -> action, reason contains
TABLE = [
    (None, ENVELOPE, True, True, Action.ERROR, "no such operation"),
    (S.SUCCEEDED, ENVELOPE, True, True, Action.DELETE, "already SUCCEEDED"),
    (S.NOOP, ENVELOPE, True, False, Action.DELETE, "already NOOP"),  # settled beats a kill switch
    (S.SUCCEEDED, OTHER_CONTENT, False, None, Action.DELETE, "already SUCCEEDED"),  # and everything else
    (S.UNKNOWN, ENVELOPE, True, True, Action.LEFT, "converge ops resolve"),
    (S.REJECTED, ENVELOPE, True, True, Action.LEFT, "would fail again"),
    (S.FAILED, OTHER_CONTENT, True, True, Action.ERROR, "identity conflict"),
    (S.FAILED, ENVELOPE, False, None, Action.ERROR, "unknown job type 'mail.notice.v1'"),
    (S.FAILED, ENVELOPE, True, False, Action.DISABLED, "kill switch mail.notice is off"),
    (S.FAILED, ENVELOPE, True, True, Action.MOVE, "FAILED: back to its queue"),
    (S.IN_PROGRESS, ENVELOPE, True, True, Action.MOVE, "IN_PROGRESS: back to its queue"),
    (S.ACCEPTED, ENVELOPE, True, True, Action.MOVE, "ACCEPTED: back to its queue"),
    (S.PAUSED, ENVELOPE, True, False, Action.DISABLED, "is off"),
    (S.CANCELLED, ENVELOPE, True, True, Action.DELETE, "already CANCELLED"),  # a copy of it is a no-op
    (S.EXPIRED, ENVELOPE, True, True, Action.DELETE, "already EXPIRED"),
    (S.SCHEDULED, ENVELOPE, True, True, Action.MOVE, "SCHEDULED: back to its queue"),  # handed back until run_at
]


@pytest.mark.parametrize(("state", "envelope", "known", "enabled", "action", "says"), TABLE)
def test_each_case_has_one_action_and_says_why(state, envelope, known, enabled, action, says):
    operation = stored(state) if state is not None else None
    decision = decide(operation, envelope, BINDING if known else None, enabled, NOW)
    assert decision.action is action
    assert says in decision.reason


def test_every_state_has_a_row():
    assert {row[0] for row in TABLE if row[0] is not None} == set(OperationState)


def test_an_operation_without_a_fingerprint_is_not_a_conflict():
    # An operation admitted before fingerprints were stored moves on its message's content.
    bare = Operation("op-1", JOB, PAYLOAD, S.FAILED, record=StateRecord("op-1", S.FAILED, JOB))
    assert decide(bare, OTHER_CONTENT, BINDING, True, NOW).action is Action.MOVE


@pytest.mark.parametrize(
    ("run_at", "waiting", "action", "says"),
    [
        (NOW + 60, None, Action.SUPERSEDED, "an early copy: the operation is SCHEDULED until"),
        (NOW + 86400, "cool-off", Action.SUPERSEDED, "waiting at 'cool-off' until"),
        (NOW, None, Action.MOVE, "SCHEDULED: back to its queue"),  # its time has come: the copy may be its delivery
        (NOW - 60, "cool-off", Action.MOVE, "SCHEDULED: back to its queue"),
    ],
)
def test_a_copy_of_an_operation_scheduled_ahead_is_superseded_by_its_own_delivery(run_at, waiting, action, says):
    # Given an operation SCHEDULED for run_at (a request's, or a wait's between two steps), its toggle off
    record = StateRecord(
        "op-1", S.SCHEDULED, JOB, fingerprint=fingerprint(JOB, PAYLOAD), run_at=run_at, waiting=waiting
    )
    operation = Operation("op-1", JOB, PAYLOAD, S.SCHEDULED, record=record)
    # When redrive decides on a dead letter of it, Then a copy before that time is deleted, whatever the toggle says
    decision = decide(operation, ENVELOPE, BINDING, True, NOW)
    assert decision.action is action and says in decision.reason
    assert decide(operation, ENVELOPE, BINDING, False, NOW).action is (
        Action.SUPERSEDED if action is Action.SUPERSEDED else Action.DISABLED
    )
    # And other content is an identity conflict first, never deleted as superseded
    assert decide(operation, OTHER_CONTENT, BINDING, True, NOW).action is Action.ERROR


def message(sent_seconds: float | None = None, error: str | None = None) -> dict:
    attributes = {"error_class": {"DataType": "String", "StringValue": error}} if error else {}
    system = {"SentTimestamp": str(int(sent_seconds * 1000))} if sent_seconds is not None else {}
    return {"MessageAttributes": attributes, "Attributes": system}


@pytest.mark.parametrize(
    ("fields", "letter", "expected"),
    [
        ({}, message(), True),
        ({"job_types": [JOB]}, message(), True),
        ({"job_types": ["mail.notice"]}, message(), True),  # a toggle name means every version
        ({"job_types": ["files.copy.v1"]}, message(), False),
        ({"error_classes": ["ProviderDown"]}, message(error="ProviderDown"), True),
        ({"error_classes": ["ProviderDown"]}, message(), False),
        ({"error_classes": [SQS_REDRIVEN_ERROR_CLASS]}, message(), True),
        ({"operation_ids": ["op-1"]}, message(), True),
        ({"operation_ids": ["op-2"]}, message(), False),
        ({"older_than_seconds": 60}, message(sent_seconds=1000 - 61), True),
        ({"older_than_seconds": 60}, message(sent_seconds=1000 - 59), False),
        ({"newer_than_seconds": 60}, message(sent_seconds=1000 - 59), True),
        ({"newer_than_seconds": 60}, message(sent_seconds=1000 - 61), False),
    ],
)
def test_the_filters(fields, letter, expected):
    request = RedriveRequest.model_validate({"queue": "critical", **fields})
    assert matches(request, ENVELOPE, letter, now=1000.0) is expected


def test_error_class_and_resent_attributes():
    assert error_class(message(error="Boom")) == "Boom"
    assert error_class(message()) == SQS_REDRIVEN_ERROR_CLASS
    first = resent_attributes({"MessageAttributes": {"job_type": {"DataType": "String", "StringValue": JOB}}})
    assert first == {
        "job_type": {"DataType": "String", "StringValue": JOB},
        "redrive_count": {"DataType": "Number", "StringValue": "1"},
    }
    again = resent_attributes({"MessageAttributes": {"redrive_count": first["redrive_count"]}})
    assert again["redrive_count"]["StringValue"] == "2"
