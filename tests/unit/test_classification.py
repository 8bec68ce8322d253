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
from botocore.exceptions import ClientError, EndpointConnectionError, ReadTimeoutError

from converge.model.errors import (
    ConvergeError,
    InvalidMessage,
    LeaseHeld,
    OutcomeUnknown,
    OutOfTime,
    PermanentError,
    TransientError,
    UnknownJobType,
    missing_grant,
)
from converge.model.outcomes import Outcome, classify, describe, unforeseen
from converge.model.states import OperationState

from .conftest import deliver
from .sqs_deliveries import (
    Context,
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


def client_error(code: str) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": code}}, "SendEmail")


# error, whether it is unforeseen (a bug, most likely: logged at ERROR with its traceback)
FORESEEN_OR_NOT = [
    (TransientError("provider unavailable"), False),
    (PermanentError("template missing"), False),
    (OutcomeUnknown("the provider cannot tell"), False),
    (InvalidMessage("payload.user_id: bad"), False),
    (LeaseHeld("held"), False),
    (OutOfTime("3 ms left"), False),
    (throttled(), False),
    (client_error("ThrottlingException"), False),
    (client_error("ServiceUnavailable"), False),
    (EndpointConnectionError(endpoint_url="https://email.us-east-1.amazonaws.com"), False),
    (ReadTimeoutError(endpoint_url="https://email.us-east-1.amazonaws.com"), False),
    (ConnectionResetError("connection reset by peer"), False),
    (TimeoutError("timed out"), False),
    (KeyError("user_id"), True),
    (TypeError("run() takes 3 positional arguments but 4 were given"), True),
    (AttributeError("'NoneType' object has no attribute 'key'"), True),
    (client_error("AccessDeniedException"), False),  # a missing grant: a configuration error, named (below)
    (ValueError("bad"), True),
]


@pytest.mark.parametrize(
    ("error", "is_unforeseen"),
    FORESEEN_OR_NOT,
    ids=[f"{type(e).__name__}-{n}" for n, (e, _) in enumerate(FORESEEN_OR_NOT)],
)
def test_only_an_error_that_is_neither_converges_own_nor_a_passing_failure_is_unforeseen(error, is_unforeseen):
    # Given an error raised during an attempt
    # Then it is unforeseen (a bug, whose author needs its traceback) only if converge did not name it and it is
    # not a known passing failure of AWS or the network
    assert unforeseen(error) is is_unforeseen


RETRIED = [
    (error, unforeseen)
    for error, unforeseen in FORESEEN_OR_NOT
    if not isinstance(error, ConvergeError) and not missing_grant(error)
]


@pytest.mark.parametrize(("error", "_"), RETRIED, ids=[f"{type(e).__name__}-{n}" for n, (e, _) in enumerate(RETRIED)])
def test_passing_failures_and_unforeseen_errors_alike_are_retried_until_the_last_attempt(error, _):
    # Given an error converge did not name: a passing failure, or a bug a deploy may fix
    # Then it is retried, and the last attempt fails (what changes for a bug is only how it is logged)
    assert classify(error, final_attempt=False) is Outcome.RETRY
    assert classify(error, final_attempt=True) is Outcome.FAILED_FINAL


def test_what_each_outcome_means_for_the_message():
    # Then only settled outcomes (and a conflict: recorded, never run) are deleted from the queue, and only
    # invalid input and permanent failures are copied to the DLQ at once (a last attempt's message is left
    # to SQS's own redrive)
    acknowledged = {outcome for outcome in Outcome if outcome.acknowledged}
    assert acknowledged == {
        Outcome.SUCCEEDED,
        Outcome.NOOP,
        Outcome.DUPLICATE,
        Outcome.CONFLICT,
        Outcome.PAUSED,
        Outcome.UNKNOWN,
        Outcome.REJECTED,
        Outcome.FAILED,
        Outcome.EXPIRED,  # recorded EXPIRED, never run
        Outcome.WAITING,  # recorded SCHEDULED between two steps; its resumption was sent as a new message
        Outcome.HELD,  # over a rate limit before it started: recorded SCHEDULED, sent again as a new message
    }
    # (an EARLY copy goes back to the queue until its run_at, like a BUSY or REQUEUE one)
    assert not Outcome.EARLY.acknowledged
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
    # `attempts` counts the leases taken on the operation (the delivery's receive count decides
    # whether it is the last attempt): one here, or the other holder's one when the lease is held.
    table = {
        "out of time": Expected(Outcome.REQUEUE, OperationState.IN_PROGRESS, 1, "back now"),
        "lease held": Expected(Outcome.BUSY, OperationState.IN_PROGRESS, 1, "back after 66 s"),
        "invalid input": Expected(Outcome.REJECTED, OperationState.REJECTED, 1, "dlq", "InvalidMessage"),
        "unknown job type": Expected(Outcome.REJECTED, OperationState.REJECTED, 1, "dlq", "UnknownJobType"),
        "permanent": Expected(Outcome.FAILED, OperationState.FAILED, 1, "dlq", "PermanentError"),
        "outcome unknown": Expected(Outcome.UNKNOWN, OperationState.UNKNOWN, 1, "deleted"),
    }
    if case in table:
        return table[case]
    # Transient, throttled and unforeseen errors: retried after a backoff, until the last attempt,
    # which records FAILED and hands the message straight back for SQS to move to the DLQ.
    if final:
        return Expected(Outcome.FAILED_FINAL, OperationState.FAILED, 1, "back now")
    return Expected(Outcome.RETRY, OperationState.IN_PROGRESS, 1, f"back after {2 * 2**attempt} s")


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
        # another delivery holds a live lease on the operation for 60 more seconds
        hold_lease(app, operation_id)
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
    assert stored.history[-1].state == want.state.value
    if case == "lease held":
        # untouched by this delivery: still the other holder's lease, no error
        assert stored.state_record.lease_owner == "another-delivery"
        assert stored.last_error is None and [entry.reason for entry in stored.history] == ["accepted", "started"]
    elif want.outcome is Outcome.REQUEUE:
        # handed back without an outcome: the lease given back at once, no error to record
        assert stored.state_record.lease_owner is None
        assert stored.last_error is None and stored.history[-1].reason == "handed back: too little time left"
    else:
        assert stored.state_record.lease_owner is None
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
    failed = [row["operation_id"] for row in app.operations.listings.list_attention(OperationState.FAILED).operations]
    assert failed == [operation_id]
    # And the message is handed straight back, for SQS's redrive to move to the DLQ on its next receive
    assert response["batchItemFailures"] == [{"itemIdentifier": message["MessageId"]}]
    assert hidden_for() is None


@pytest.mark.parametrize("case", ["out of time", "transient", "unforeseen"])
def test_a_handed_back_result_still_names_its_error_and_its_class(app, recorder, case):
    # Given a delivery that cannot finish now, because its attempt raised one of the errors that hand a message back
    operation_id = f"op-{uuid.uuid4().hex[:8]}"
    app.enqueue("mail.notice.v1", operation_id, {"user_id": str(uuid.uuid4())})
    error = ERRORS[case]()
    recorder.fail_effect.append(error)
    error_class = type(error).__name__
    # When the pipeline decides / Then its result says which error it was, for logs and callers
    result = deliver(app, operation_id)
    assert result.error_class == error_class
    assert result.reason.startswith(f"{error_class}: ")


def test_a_busy_result_says_who_holds_the_operation_until_when_without_an_error(app, recorder, clock):
    # Given another delivery holding the operation's lease for 60 more seconds
    operation_id = f"op-{uuid.uuid4().hex[:8]}"
    app.enqueue("mail.notice.v1", operation_id, {"user_id": str(uuid.uuid4())})
    held = hold_lease(app, operation_id)
    # When the pipeline decides
    result = deliver(app, operation_id)
    # Then it is busy, read from the refused lease (no error was raised), and says until when
    assert result.outcome is Outcome.BUSY and result.error_class is None
    assert result.reason == f"leased by another delivery until {held.until:.0f}"
    assert result.retry_after == pytest.approx(60)


# the codes AWS answers a call its caller's role may not make, by service
REFUSALS = [
    ("AccessDeniedException", "SendEmail"),  # SES, DynamoDB, Secrets Manager, KMS
    ("AccessDenied", "PutObject"),  # S3, SQS
    ("AuthorizationError", "Publish"),  # SNS
]


@pytest.mark.parametrize(("code", "operation"), REFUSALS)
def test_a_missing_grant_fails_at_once_whatever_the_attempt(code, operation):
    # Given a call the role may not make, refused with the service's own code
    refused = ClientError({"Error": {"Code": code, "Message": "not authorized"}}, operation)
    # Then no retry can fix it: the operation fails at its first attempt (its message to the DLQ now, for a redrive
    # once the grant is deployed), logged as the configuration error it is, not as an unforeseen bug
    assert missing_grant(refused)
    assert classify(refused, final_attempt=False) is Outcome.FAILED
    assert classify(refused, final_attempt=True) is Outcome.FAILED
    assert not unforeseen(refused)


def test_a_missing_grant_is_described_action_first_so_a_bounded_reason_keeps_it():
    # Given AWS's refusal, whose head names the caller's role session (long in a nested stack)
    session = "arn:aws:sts::123456789012:assumed-role/" + "r" * 120 + "/" + "f" * 64
    action = "not authorized to perform: ses:SendEmail on resource: arn:aws:ses:us-east-1:123456789012:identity/x"
    refused = ClientError(
        {"Error": {"Code": "AccessDeniedException", "Message": f"User: {session} is {action} because no policy"}},
        "SendEmail",
    )
    # When it is described for a receipt
    reason = describe(refused)
    # Then the action and the resource come first, the caller's session is left out, and the code and call follow
    assert reason.startswith(f"missing grant: {action} because no policy")
    assert session not in reason
    assert reason.endswith("(AccessDeniedException calling SendEmail)")
    # And any other error is described as before: its class and its message
    assert describe(KeyError("user_id")) == "KeyError: 'user_id'"


def test_a_missing_grant_without_the_call_it_came_from_says_so():
    # Given an access-denied error that carries AWS's answer but not the call it answered (raised by a library above
    # botocore, say, from a response it read itself)
    class Refused(Exception):
        response = {"Error": {"Code": "AccessDenied", "Message": "not authorized to perform: s3:PutObject"}}

    # When it is described for a receipt / Then the call is named as unknown, not left blank or named None
    assert describe(Refused()) == "missing grant: not authorized to perform: s3:PutObject (AccessDenied calling ?)"
