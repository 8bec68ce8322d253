"""How every kind of failure leaves a delivery: outcome, stored operation, and the message's fate.

`converge.outcomes.classify` is the one place an error becomes an outcome. These tests pin each of
its branches on a normal attempt and on the last one, first as the bare mapping and then end to
end: a real message dispatched by the relay, handled by the worker, the operation read back from
the jobs table and the message found again in its queue or the DLQ.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import pytest
from botocore.exceptions import ClientError

from converge.errors import (
    InvalidMessage,
    LeaseHeld,
    OutcomeUnknown,
    OutOfTime,
    PermanentError,
    TransientError,
    UnknownJobType,
)
from converge.operations import OperationState
from converge.outcomes import Outcome, classify

from .conftest import deliver
from .sqs_rules import (
    Context,
    UpperBound,
    Window,
    assert_shows_again_after,
    dead_letters,
    dispatch,
    hidden_for,
    lambda_event,
    receive,
)

LAST = 3  # the fake jobs' max_attempts, and the queue's maxReceiveCount in the unit settings


def throttled() -> ClientError:
    return ClientError({"Error": {"Code": "ProvisionedThroughputExceededException", "Message": "slow down"}}, "PutItem")


# error, outcome on a normal attempt, outcome on the last attempt
MAPPING = [
    (OutOfTime("12 ms left"), Outcome.REQUEUE, Outcome.REQUEUE),
    (LeaseHeld("leased by another delivery", until=1.0), Outcome.BUSY, Outcome.BUSY),
    (InvalidMessage("payload.user_id: bad"), Outcome.REJECTED, Outcome.REJECTED),
    (UnknownJobType("no.such.v1"), Outcome.REJECTED, Outcome.REJECTED),
    (PermanentError("template missing"), Outcome.FAILED, Outcome.FAILED),
    (OutcomeUnknown("the provider cannot tell"), Outcome.UNKNOWN, Outcome.UNKNOWN),
    (TransientError("provider unavailable"), Outcome.RETRY, Outcome.FAILED_FINAL),
    (throttled(), Outcome.RETRY, Outcome.FAILED_FINAL),
    (KeyError("an unforeseen bug"), Outcome.RETRY, Outcome.FAILED_FINAL),
]


@pytest.mark.parametrize(("error", "normal", "last"), MAPPING, ids=[type(error).__name__ for error, *_ in MAPPING])
def test_each_error_class_maps_to_one_outcome_on_a_normal_and_on_the_last_attempt(error, normal, last):
    # Given an error raised during an attempt
    # When it is classified on a normal attempt and on the last one
    # Then each class has its own outcome; only retryable ones turn into a failure on the last attempt
    assert classify(error, final_attempt=False) is normal
    assert classify(error, final_attempt=True) is last


def test_the_more_specific_class_decides_when_an_error_is_two_things_at_once():
    # Given errors that belong to two branches (a held lease is transient; invalid input is permanent)
    # Then the narrower class wins, whatever the attempt
    assert issubclass(LeaseHeld, TransientError) and issubclass(InvalidMessage, PermanentError)
    assert classify(LeaseHeld("held"), final_attempt=True) is Outcome.BUSY
    assert classify(InvalidMessage("bad"), final_attempt=False) is Outcome.REJECTED
    assert classify(UnknownJobType("x"), final_attempt=True) is Outcome.REJECTED


def test_what_each_outcome_means_for_the_message():
    # Then only settled outcomes are deleted from the queue, and only invalid input and permanent
    # failures are copied to the DLQ at once (a last attempt's message is left to SQS's own redrive)
    acknowledged = {outcome for outcome in Outcome if outcome.acknowledged}
    assert acknowledged == {
        Outcome.SUCCEEDED,
        Outcome.NOOP,
        Outcome.DUPLICATE,
        Outcome.PAUSED,
        Outcome.UNKNOWN,
        Outcome.REJECTED,
        Outcome.FAILED,
    }
    assert {outcome for outcome in Outcome if outcome.to_dlq_now} == {Outcome.REJECTED, Outcome.FAILED}


# -- end to end: worker, jobs table, queue and DLQ --------------------------------------------------------


@dataclass(frozen=True)
class Expected:
    outcome: Outcome
    state: OperationState
    attempts: int
    fate: str  # "dlq" (copied there, then deleted), "deleted", "back now", "back after N s"
    error_class: str | None = None


def expected(case: str, attempt: int) -> Expected:
    final = attempt == LAST
    table = {
        "out of time": Expected(Outcome.REQUEUE, OperationState.ACCEPTED, 0, "back now"),
        "lease held": Expected(Outcome.BUSY, OperationState.ACCEPTED, 0, "back after 66 s"),
        "invalid input": Expected(Outcome.REJECTED, OperationState.REJECTED, attempt, "dlq", "InvalidMessage"),
        "unknown job type": Expected(Outcome.REJECTED, OperationState.REJECTED, attempt, "dlq", "UnknownJobType"),
        "permanent": Expected(Outcome.FAILED, OperationState.FAILED, attempt, "dlq", "PermanentError"),
        "outcome unknown": Expected(Outcome.UNKNOWN, OperationState.UNKNOWN, attempt, "deleted"),
    }
    if case in table:
        return table[case]
    # Transient, throttled and unforeseen errors: retried after a backoff, until the last attempt,
    # which records FAILED and hands the message straight back for SQS to move to the DLQ.
    if final:
        return Expected(Outcome.FAILED_FINAL, OperationState.FAILED, attempt, "back now")
    return Expected(Outcome.RETRY, OperationState.IN_PROGRESS, attempt, f"back after {2 * 2**attempt} s")


ERRORS = {
    "out of time": lambda: OutOfTime("3 ms left, under the 5000 ms margin"),
    "invalid input": lambda: InvalidMessage("payload.user_id: not a user"),
    "unknown job type": lambda: UnknownJobType("no binding for old.v0"),
    "permanent": lambda: PermanentError("template missing"),
    "outcome unknown": lambda: OutcomeUnknown("the provider can neither deduplicate nor be queried"),
    "transient": lambda: TransientError("provider unavailable"),
    "throttled": throttled,
    "unforeseen": lambda: KeyError("an unforeseen bug"),
}


@pytest.mark.parametrize("attempt", [1, LAST], ids=["normal attempt", "last attempt"])
@pytest.mark.parametrize("case", [*ERRORS, "lease held"])
def test_each_failure_leaves_its_operation_and_its_message_where_the_rules_say(app, recorder, case, attempt):
    # Given an accepted operation whose message the relay has put on its queue
    app.rng = UpperBound()  # backoffs at the top of their range, so that they can be read back exactly
    operation_id = f"op-{uuid.uuid4().hex[:8]}"
    app.enqueue("mail.notice.v1", operation_id, {"user_id": str(uuid.uuid4())})
    dispatch(app, operation_id)
    if case == "lease held":
        # another delivery holds a live lease on the work for 60 more seconds
        assert app.markers.lease("mail.notice.v1", operation_id, "another-delivery", 60).acquired
    else:
        recorder.fail_effect.append(ERRORS[case]())
    want = expected(case, attempt)

    # When the worker handles the message on this attempt, and the effect fails this way
    [message] = receive(app)
    with Window() as handled:
        response = app.worker.handle(lambda_event([message], attempt), Context())

    # Then the operation is stored in the state the rules give, with the attempt and the error recorded
    stored = app.operations.require(operation_id)
    assert stored.state is want.state
    assert stored.attempts == want.attempts
    if want.state is OperationState.ACCEPTED:
        assert stored.last_error is None and [entry.state for entry in stored.history] == ["ACCEPTED"]
    else:
        assert stored.history[-1].state == want.state.value
        assert stored.last_error is not None and stored.last_error.startswith(type(ERRORS[case]()).__name__ + ": ")
    if want.outcome is Outcome.RETRY:
        assert stored.history[-1].reason == f"attempt {attempt} failed; retrying"
    # And the message went where the outcome sends it
    handed_back = [failure["itemIdentifier"] for failure in response["batchItemFailures"]]
    copies = dead_letters(app)
    if want.fate in ("dlq", "deleted"):
        assert handed_back == []
        assert len(copies) == (1 if want.fate == "dlq" else 0)
    else:
        assert handed_back == [message["MessageId"]]
        assert copies == []
        if want.fate == "back now":
            assert hidden_for() is None
        else:
            assert_shows_again_after(int(want.fate.split()[2]), handled)
    if want.fate == "dlq":
        attributes = copies[0]["MessageAttributes"]
        assert attributes["error_class"]["StringValue"] == want.error_class
        assert attributes["outcome"]["StringValue"] == want.outcome.value
        assert copies[0]["Body"] == message["Body"]
    # And the effect was attempted once, or not at all when another delivery held the work
    assert recorder.calls.count(f"effect:{operation_id}") == (0 if case == "lease held" else 1)


def test_an_unforeseen_error_on_the_last_attempt_fails_the_operation_before_its_message_leaves(app, recorder):
    # Given an operation on its last attempt, whose runner hits a bug nobody classified
    operation_id = "op-last-bug"
    app.enqueue("mail.notice.v1", operation_id, {"user_id": str(uuid.uuid4())})
    dispatch(app, operation_id)
    recorder.fail_effect.append(ZeroDivisionError("division by zero"))
    [message] = receive(app)
    # When the worker handles it
    response = app.worker.handle(lambda_event([message], attempt=LAST), Context())
    # Then the operation is FAILED (listable as needing attention), not left open while its message
    # goes to the DLQ: an open operation whose message is dead-lettered would never be looked at
    stored = app.operations.require(operation_id)
    assert stored.state is OperationState.FAILED
    assert stored.last_error == "ZeroDivisionError: division by zero"
    failed = [row["operation_id"] for row in app.operations.list_attention(OperationState.FAILED).operations]
    assert failed == [operation_id]
    # And the message is handed straight back, for SQS's redrive to move to the DLQ on its next receive
    assert response["batchItemFailures"] == [{"itemIdentifier": message["MessageId"]}]
    assert hidden_for() is None


@pytest.mark.parametrize("case", ["out of time", "transient", "unforeseen", "lease held"])
def test_a_handed_back_result_still_names_its_error_and_its_class(app, recorder, case):
    # Given a delivery that cannot finish now, for one of the reasons that hand a message back
    operation_id = f"op-{uuid.uuid4().hex[:8]}"
    app.enqueue("mail.notice.v1", operation_id, {"user_id": str(uuid.uuid4())})
    if case == "lease held":
        app.markers.lease("mail.notice.v1", operation_id, "another-delivery", 60)
        error_class = "LeaseHeld"
    else:
        error = ERRORS[case]()
        recorder.fail_effect.append(error)
        error_class = type(error).__name__
    # When the pipeline decides / Then its result says which error it was, for logs and callers
    result = deliver(app, operation_id)
    assert result.error_class == error_class
    assert result.reason.startswith(f"{error_class}: ")
