"""The worker's SQS actions: how long a handed-back message stays away, and what a DLQ copy carries.

Each delay is read back from moto's queue (when the message shows again), with a jitter source
pinned to the top or the bottom of its range so that the bounds of full jitter can be seen.
"""

from __future__ import annotations

import json
import uuid

import boto3
import pytest

from converge.flow.registry import JobBinding, Policy, Queue, Registry
from converge.flow.worker import MAX_HAND_BACK
from converge.model.clock import SequentialIds, iso
from converge.model.errors import LeaseHeld, PermanentError, TransientError
from converge.model.states import OperationState
from converge.runtime import Converge
from converge.runtime.clients import Clients
from localcloud.sqs_time import age_messages

from ..conftest import REGION
from .conftest import Notice, RecordingRunner
from .sqs_deliveries import (
    Context,
    LowerBound,
    UpperBound,
    Window,
    assert_shows_again_after,
    dead_letters,
    dispatch,
    hidden_for,
    hold_lease,
    lambda_event,
    receive,
)

MANY = 12  # attempts for the patient job below, so that backoffs can grow to their cap


@pytest.fixture
def patient(settings, recorder, clock):
    """A converge whose only job may be attempted twelve times (queue and binding agree)."""
    registry = Registry()
    registry.register(
        JobBinding(
            job_type="mail.patient.v1",
            message=Notice,
            runner=lambda: RecordingRunner(recorder),
            queue=Queue.CRITICAL,
            policy=Policy.EFFECT_THEN_CLAIM,
            default_enabled=True,
            max_attempts=MANY,
        )
    )

    def build(rng):
        return Converge(
            settings.model_copy(update={"max_receive_count": MANY}),
            registry=registry,
            clients=Clients(dynamodb=boto3.client("dynamodb"), sqs=boto3.client("sqs"), ssm=boto3.client("ssm")),
            clock=clock,
            ids=SequentialIds("attempt"),
            rng=rng,
        )

    return build


def fail_once_on(app, recorder, attempt, error, job_type="mail.patient.v1"):
    """Dispatch a fresh operation and let the worker fail its effect with `error` on this attempt."""
    operation_id = f"op-{uuid.uuid4().hex[:8]}"
    app.enqueue(job_type, operation_id, {"user_id": str(uuid.uuid4())})
    dispatch(app, operation_id)
    recorder.fail_effect.append(error)
    [message] = receive(app)
    with Window() as handled:
        response = app.worker.handle(lambda_event([message], attempt), Context())
    return operation_id, message, response, handled


@pytest.mark.parametrize(
    ("attempt", "ceiling"),
    [(1, 4), (2, 8), (3, 16), (4, 32), (8, 512), (9, 900), (11, 900)],
)
def test_a_retry_waits_at_most_the_exponential_ceiling_capped_at_fifteen_minutes(patient, recorder, attempt, ceiling):
    # Given a job that may be tried twelve times, and jitter drawing the top of its range
    app = patient(UpperBound())
    # When a transient failure happens on this attempt
    operation_id, message, response, handled = fail_once_on(
        app, recorder, attempt, TransientError("provider unavailable")
    )
    # Then the message comes back after min(900 s, 2 s x 2^attempt), and the operation stays open
    assert response["batchItemFailures"] == [{"itemIdentifier": message["MessageId"]}]
    assert_shows_again_after(ceiling, handled)
    assert app.operations.require(operation_id).state is OperationState.IN_PROGRESS


def test_full_jitter_can_retry_at_once(patient, recorder):
    # Given jitter drawing the bottom of its range
    app = patient(LowerBound())
    # When a transient failure happens late in the job's attempts
    _, message, response, _ = fail_once_on(app, recorder, 9, TransientError("provider unavailable"))
    # Then the full-jitter draw starts at zero: the message is visible again at once
    assert response["batchItemFailures"] == [{"itemIdentifier": message["MessageId"]}]
    assert hidden_for() is None


@pytest.mark.parametrize(
    ("rng", "lease_seconds", "expected"),
    [
        (LowerBound(), 60, 61),  # just after the holder's lease ends
        (UpperBound(), 60, 66),  # spread by up to five seconds, so duplicates do not return together
    ],
    ids=["earliest", "latest"],
)
def test_a_busy_message_comes_back_when_the_holders_lease_is_over(app, recorder, rng, lease_seconds, expected):
    # Given another delivery holding a live lease on the operation
    app.rng = rng
    operation_id = "op-busy"
    app.enqueue("mail.notice.v1", operation_id, {"user_id": str(uuid.uuid4())})
    dispatch(app, operation_id)
    hold_lease(app, operation_id, "another-delivery", lease_seconds)
    # When the worker receives the message
    [message] = receive(app)
    with Window() as handled:
        response = app.worker.handle(lambda_event([message]), Context())
    # Then the message is handed back until just after that lease ends, and nothing ran
    assert response["batchItemFailures"] == [{"itemIdentifier": message["MessageId"]}]
    assert_shows_again_after(expected, handled)
    assert recorder.effects == []


def test_a_busy_answer_without_a_known_expiry_comes_back_after_half_a_minute(app, recorder):
    # Given a runner that finds its work held elsewhere without knowing for how long
    app.rng = UpperBound()
    _, message, response, handled = fail_once_on(
        app, recorder, 1, LeaseHeld("the provider's own lock"), "mail.notice.v1"
    )
    # Then the message comes back after 30 s plus the spread
    assert response["batchItemFailures"] == [{"itemIdentifier": message["MessageId"]}]
    assert_shows_again_after(36, handled)


def test_a_dead_lettered_copy_carries_its_origin_and_why_it_failed(app, recorder, clock):
    # Given a job whose effect fails permanently, with a long reason
    reason = "template missing: " + "x" * 1_500
    operation_id, message, response, _ = fail_once_on(app, recorder, 1, PermanentError(reason), "mail.notice.v1")
    # When the worker has handled it
    assert response["batchItemFailures"] == []
    [copy] = dead_letters(app)
    # Then the DLQ holds the same body, the relay's own attributes and the failure, for redrive to filter on
    assert copy["Body"] == message["Body"]
    attributes = {name: value["StringValue"] for name, value in copy["MessageAttributes"].items()}
    assert attributes == {
        "job_type": "mail.notice.v1",
        "operation_id": operation_id,
        "error_class": "PermanentError",
        "error_reason": f"PermanentError: {reason}"[:1000],
        "outcome": "failed",
        "failed_at": iso(clock.now()),
        "accepted_at": message["MessageAttributes"]["accepted_at"]["StringValue"],
        "source_queue": app.settings.queue_url,
    }
    assert {value["DataType"] for value in copy["MessageAttributes"].values()} == {"String"}


def test_message_attributes_in_either_shape_reach_the_dlq_and_unusable_ones_are_dropped(app):
    # Given a poison message whose attributes come in the Lambda event's shape, in the SQS API's shape,
    # without a string value (binary), without a type, or not as an object at all
    boto3.client("sqs").send_message(QueueUrl=app.settings.queue_url, MessageBody="not json")
    [message] = receive(app)
    event = lambda_event([message])
    event["Records"][0]["messageAttributes"] = {
        "not_an_object": "oops",
        "lambda_shape": {"dataType": "String", "stringValue": "a"},
        "api_shape": {"DataType": "String", "StringValue": "b"},
        "binary": {"dataType": "Binary", "binaryValue": "AAE="},
        "untyped": {"stringValue": "c"},
        "last": {"dataType": "Number", "stringValue": "7"},
    }
    # When the worker dead-letters it
    assert app.worker.handle(event, Context()) == {"batchItemFailures": []}
    # Then the usable attributes are carried over with their types, and the rest do not stop the copy
    [copy] = dead_letters(app)
    carried = {name: (value["DataType"], value["StringValue"]) for name, value in copy["MessageAttributes"].items()}
    assert {name: carried[name] for name in ("lambda_shape", "api_shape", "last")} == {
        "lambda_shape": ("String", "a"),
        "api_shape": ("String", "b"),
        "last": ("Number", "7"),
    }
    assert not {"not_an_object", "binary", "untyped"} & set(carried)
    assert carried["error_class"] == ("String", "InvalidMessage")


def failing_batch(app, recorder, prefix: str) -> list[dict]:
    """21 messages received in one batch, each of whose effects fails transiently (backoffs at their ceiling)."""
    app.rng = UpperBound()
    for n in range(21):
        app.enqueue("mail.notice.v1", f"{prefix}{n}", {"user_id": str(uuid.uuid4())})
        dispatch(app, f"{prefix}{n}")
        recorder.fail_effect.append(TransientError("provider unavailable"))
    messages = receive(app) + receive(app) + receive(app)
    assert len(messages) == 21
    return messages


def test_every_handed_back_message_of_a_large_batch_gets_its_backoff_ten_to_a_call(app, recorder):
    # Given 21 messages in one batch, each failing transiently
    messages = failing_batch(app, recorder, "op-b")
    calls: list[list[dict]] = []
    app.clients.sqs.meta.events.register(
        "provide-client-params.sqs.ChangeMessageVisibilityBatch",
        lambda params, **_: calls.append(params["Entries"]),
    )
    # When the worker handles the batch
    response = app.worker.handle(lambda_event(messages), Context())
    assert len(response["batchItemFailures"]) == 21
    # Then the backoffs are set ten to a call, once each, every entry under its own id as SQS requires
    # (moto accepts repeated ids; SQS refuses the whole call with BatchEntryIdsNotDistinct)
    assert [len(entries) for entries in calls] == [10, 10, 1]
    assert all(len({entry["Id"] for entry in entries}) == len(entries) for entries in calls)
    # And every message comes back after its 4 s backoff, none after the queue's own 30 s
    age_messages(5, REGION)
    assert len(receive(app) + receive(app) + receive(app)) == 21


def test_an_early_copy_due_days_ahead_stays_away_as_long_as_sqs_allows_each_time_it_is_received(app, recorder, clock):
    # Given a copy of a request due in two days (a replayed dispatch), delivered now
    app.enqueue("mail.notice.v1", "op-early", {"user_id": str(uuid.uuid4())})
    dispatch(app, "op-early")
    for receipt in range(2):
        [message] = receive(app)
        body = json.loads(message["Body"])
        message["Body"] = json.dumps({**body, "run_at": iso(clock.now() + 2 * 86400)})
        # When the worker meets it (the first time, then once it shows again)
        with Window() as handled:
            response = app.worker.handle(lambda_event([message], receipt + 1), Context())
        # Then it is handed back for as long as SQS allows from its receive (less what a receive may have spent
        # before the handler: the batching window and the invocation), not refused for asking more and back at
        # the queue's own timeout; nothing ran
        assert response["batchItemFailures"] == [{"itemIdentifier": message["MessageId"]}]
        assert_shows_again_after(MAX_HAND_BACK, handled)
        assert MAX_HAND_BACK <= 12 * 3600 - 15 * 60 - 5 * 60
        age_messages(MAX_HAND_BACK + 1, REGION)
    assert recorder.effects == []


class Http:
    status_code = 200


def test_a_hand_back_sqs_refuses_for_one_message_is_logged_with_its_code_and_the_delay_it_missed(app, recorder, capsys):
    # Given a message whose effect fails transiently, and SQS refusing its visibility change in the answer (as it
    # does entry by entry, for a receipt handle gone stale)
    app.rng = UpperBound()
    app.enqueue("mail.notice.v1", "op-stale", {"user_id": str(uuid.uuid4())})
    dispatch(app, "op-stale")
    recorder.fail_effect.append(TransientError("provider unavailable"))
    [message] = receive(app)
    refused = {"Id": "0", "SenderFault": True, "Code": "ReceiptHandleIsInvalid", "Message": "the handle has expired"}
    app.clients.sqs.meta.events.register(
        "before-call.sqs.ChangeMessageVisibilityBatch",
        lambda **_: (Http(), {"Successful": [], "Failed": [refused]}),
    )
    capsys.readouterr()
    # When the worker handles it
    response = app.worker.handle(lambda_event([message]), Context())
    # Then the message is still handed back (it comes back after the queue's own timeout), and the warning says
    # which code SQS gave and which delay the message missed
    assert response["batchItemFailures"] == [{"itemIdentifier": message["MessageId"]}]
    logged = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith('{"level"')]
    (warning,) = [line for line in logged if line["message"].startswith("could not change a message's visibility")]
    assert (warning["code"], warning["reason"], warning["delay"]) == (
        "ReceiptHandleIsInvalid",
        "the handle has expired",
        4,
    )


def test_when_sqs_fails_one_call_of_a_large_batchs_hand_backs_the_other_calls_are_still_made(app, recorder, capsys):
    # Given 21 messages in one batch, each failing transiently, and SQS failing the first visibility call outright
    messages = failing_batch(app, recorder, "op-f")
    calls: list[int] = []

    def fail_the_first(params: dict, **_: object) -> None:
        calls.append(len(params["Entries"]))
        if len(calls) == 1:
            raise ConnectionError("sqs unreachable")

    app.clients.sqs.meta.events.register("provide-client-params.sqs.ChangeMessageVisibilityBatch", fail_the_first)
    # When the worker handles the batch
    response = app.worker.handle(lambda_event(messages), Context())
    # Then every message is handed back, and the calls after the failed one are made all the same
    assert len(response["batchItemFailures"]) == 21
    assert calls == [10, 10, 1]
    assert "could not change message visibility" in capsys.readouterr().out


def test_a_record_without_a_message_id_is_answered_with_an_empty_identifier_so_the_whole_batch_comes_back(
    app, recorder
):
    # Given a batch whose second record has no messageId (not what SQS sends: a hand-made or damaged event)
    for op in ("op-m1", "op-m2"):
        app.enqueue("mail.notice.v1", op, {"user_id": str(uuid.uuid4())})
        dispatch(app, op)
    event = lambda_event(receive(app))
    del event["Records"][1]["messageId"]
    # When the worker handles it
    response = app.worker.handle(event, Context())
    # Then the record that could not be run is answered with an empty identifier, which Lambda takes as the whole
    # batch failed (every message comes back: none is lost), and the first record ran
    assert response == {"batchItemFailures": [{"itemIdentifier": ""}]}
    assert len(recorder.effects) == 1


def test_a_record_whose_accepted_at_attribute_is_not_a_map_still_runs(app, recorder):
    # Given a record whose accepted_at message attribute is a bare string, not the event's map of type and value
    app.enqueue("mail.notice.v1", "op-odd", {"user_id": str(uuid.uuid4())})
    dispatch(app, "op-odd")
    event = lambda_event(receive(app))
    event["Records"][0]["messageAttributes"]["accepted_at"] = "2026-01-01T00:00:00Z"
    # When the worker handles it / Then it runs, its acceptance time taken as unknown
    assert app.worker.handle(event, Context()) == {"batchItemFailures": []}
    assert len(recorder.effects) == 1
    assert app.operations.require("op-odd").state is OperationState.SUCCEEDED
