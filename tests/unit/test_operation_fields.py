"""The stored receipt as an operator reads it (`converge ops show --json`): every field, under its name."""

from __future__ import annotations

import uuid
from itertools import islice

import boto3
import pytest

from converge.model.clock import iso
from converge.model.errors import InvalidTransition, OperationNotFound, PermanentError, TransientError
from converge.model.outcomes import Outcome
from converge.model.records import Subject
from converge.model.request import JobRequest, fingerprint
from converge.model.states import Flag, OperationState

from .conftest import deliver, sent
from .sqs_deliveries import hold_lease


def test_the_operators_view_of_an_operation_names_every_field_of_its_receipt(app, recorder, clock):
    # Given an operation enqueued with a correlation id, whose first attempt failed and will be retried
    app.enqueue("mail.notice.v1", "op-view", {"user_id": "2c9d6c2e-8f5e-4c43-9a51-0d2b9d0c1f00"}, "corr-7")
    accepted_at = iso(clock.now())
    clock.advance(5)
    recorder.fail_effect.append(TransientError("x"))
    assert deliver(app, "op-view").outcome is Outcome.RETRY
    # When an operator reads it
    view = app.operations.require("op-view").to_json()
    # Then every field of the receipt is there, under the documented name: the lease given back,
    # the error as the current outcome's, and not again among the earlier ones (there are none yet)
    retried_at = iso(clock.now())
    assert view == {
        "operation_id": "op-view",
        "job_type": "mail.notice.v1",
        "state": "IN_PROGRESS",
        "reason": "attempt 1 failed; retrying",
        "attempts": 1,
        "redrives": 0,
        "last_error": "TransientError: x",
        "errors": [],
        "history": [
            {"state": "ACCEPTED", "at": retried_at, "reason": "accepted"},
            {"state": "IN_PROGRESS", "at": retried_at, "reason": "started"},
            {"state": "IN_PROGRESS", "at": retried_at, "reason": "attempt 1 failed; retrying"},
        ],
        "lease": None,
        "stuck": None,
        "conflicts": [],
        "conflicts_dropped": 0,
        "request": "stored",
        "steps": None,  # read only for an operator's receipt (`require(id, steps=True)`)
        "parent_id": None,  # not a continuation
        "continuations": None,  # read only for an operator's receipt, like the steps
        "correlation_id": "corr-7",
        "submitted_by": None,
        "run_at": None,  # neither delayed nor bounded in time
        "waiting": None,  # not waiting between two steps
        "waiting_for": None,  # nor for a signal (`ctx.wait_for`)
        "signals": None,  # read only for an operator's receipt, like the steps
        "expires_at": None,
        "payload": {"user_id": "2c9d6c2e-8f5e-4c43-9a51-0d2b9d0c1f00"},
        "created_at": retried_at,
        "updated_at": retried_at,
    }
    assert accepted_at < retried_at  # the record is created by the first delivery (no accepted_at came with it)


def test_enqueueing_an_existing_operation_is_answered_by_the_refused_put_alone(app):
    # Given an admitted operation
    payload = {"user_id": "2c9d6c2e-8f5e-4c43-9a51-0d2b9d0c1f00"}
    assert app.enqueue("mail.notice.v1", "op-twice", payload).created
    calls = sent(app.clients.dynamodb)
    # When the producer enqueues it again (a retry after a timeout, say)
    again = app.enqueue("mail.notice.v1", "op-twice", payload)
    # Then it gets the existing request from the refused conditional put itself (no read of the jobs
    # table), and its state from one read of the state table
    assert (again.created, again.operation.operation_id, again.operation.state) == (
        False,
        "op-twice",
        OperationState.ACCEPTED,
    )
    assert [(name, params["TableName"]) for name, params in calls] == [
        ("PutItem", app.settings.jobs_table),
        ("GetItem", app.settings.state_table),
    ]


def test_walking_an_attention_state_follows_every_page_of_that_job_type_only(app, recorder):
    # Given five FAILED operations, three of them of one job type
    for n, job_type in enumerate(["mail.notice.v1"] * 3 + ["files.copy.v1"] * 2):
        fail(app, recorder, f"op-f{n}", job_type)
    calls = sent(app.clients.dynamodb)
    # When they are walked two to a page, for that job type
    walked = list(
        islice(app.operations.listings.iter_attention(OperationState.FAILED, "mail.notice.v1", page_size=2), 10)
    )
    # Then each of the three comes once, over two queries of at most two
    assert sorted(row["operation_id"] for row in walked) == ["op-f0", "op-f1", "op-f2"]
    queries = [params for name, params in calls if name == "Query"]
    assert [params["Limit"] for params in queries] == [2, 2]


def test_one_page_of_an_attention_state_is_bounded_by_default(app):
    # Given 51 operations needing attention (refused input: one write each)
    for n in range(51):
        app.operations.state.reject(Subject(f"op-p{n}", "mail.notice.v1", f"fp-{n}"), "refused")
    # When one page is listed without a limit / Then it holds 50 and says there is more
    page = app.operations.listings.list_attention(OperationState.REJECTED)
    assert len(page.operations) == 50
    assert page.next_token is not None
    # And the next page holds the last one
    rest = app.operations.listings.list_attention(OperationState.REJECTED, start=page.next_token)
    assert len(rest.operations) == 1
    assert {row["operation_id"] for row in [*page.operations, *rest.operations]} == {f"op-p{n}" for n in range(51)}


def test_only_attention_states_can_be_listed_and_the_refusal_names_them(app):
    with pytest.raises(InvalidTransition) as error:
        app.operations.listings.list_attention(OperationState.SUCCEEDED)
    message = str(error.value)
    assert message == (
        "SUCCEEDED is not an attention key; choose one of "
        "CANCELLED, EXPIRED, FAILED, PAUSED, REJECTED, SCHEDULED, UNKNOWN, STUCK, CONFLICT"
    )


def test_a_stored_reason_is_one_line_of_at_most_300_characters(app, recorder):
    # Given failures whose messages span lines, fit the limit exactly, or run past it
    cases = {
        "op-lines": ("template\n   missing  here", "PermanentError: template missing here"),
        "op-exact": ("x" * (300 - len("PermanentError: ")), "PermanentError: " + "x" * 284),
        "op-long": ("y" * 400, "PermanentError: " + "y" * 283 + "…"),
    }
    for operation_id, (message, _) in cases.items():
        app.enqueue("mail.notice.v1", operation_id, {"user_id": str(uuid.uuid4())})
        recorder.fail_effect.append(PermanentError(message))
        deliver(app, operation_id)
    # Then each is stored on one line, whole when it fits, cut to 300 characters with an ellipsis when not
    for operation_id, (_, stored_as) in cases.items():
        stored = app.operations.require(operation_id)
        assert (stored.last_error, stored.history[-1].reason) == (stored_as, stored_as)
        assert len(stored.last_error) <= 300


def test_a_missing_operation_is_named_in_the_error(app):
    with pytest.raises(OperationNotFound) as error:
        app.operations.require("op-nowhere")
    assert str(error.value) == "no operation 'op-nowhere'"


def test_an_empty_reason_is_stored_as_empty(app):
    app.enqueue("mail.notice.v1", "op-quiet", {"user_id": str(uuid.uuid4())})
    app.operations.state.transition(app.operations.require("op-quiet"), OperationState.IN_PROGRESS, "")
    assert app.operations.require("op-quiet").history[-1].reason == ""


def stored_item(app, operation_id):
    return boto3.client("dynamodb").get_item(
        TableName=app.settings.state_table, Key={"operation_id": {"S": operation_id}}
    )["Item"]


def test_leaving_an_attention_state_takes_the_operation_off_the_attention_index(app, recorder):
    # Given a FAILED operation, listed as needing attention
    fail(app, recorder, "op-redriven")
    assert [
        row["operation_id"] for row in app.operations.listings.list_attention(OperationState.FAILED).operations
    ] == ["op-redriven"]
    assert {"attention", "attention_sk"} <= set(stored_item(app, "op-redriven"))
    # When an operator redrives it, reopened and listed as STUCK until a worker takes it
    failed = app.operations.require("op-redriven")
    assert app.operations.state.transition(failed, OperationState.ACCEPTED, "redriven", stuck=("reopened", "redriven"))
    assert app.operations.listings.list_attention(OperationState.FAILED).operations == []
    assert [row["operation_id"] for row in app.operations.listings.list_attention(Flag.STUCK).operations] == [
        "op-redriven"
    ]
    # And a worker picks it up again, and its attempt fails and will be retried
    recorder.fail_effect.append(TransientError("again"))
    assert deliver(app, "op-redriven", attempt=1).outcome is Outcome.RETRY
    # Then it is listed under no key, and neither its attention keys nor its STUCK reason remain
    assert app.operations.listings.list_attention(Flag.STUCK).operations == []
    assert not {"attention", "attention_sk", "stuck"} & set(stored_item(app, "op-redriven"))


def test_each_redrive_is_counted_on_the_operation(app, recorder):
    # Given an operation that failed, was redriven, and failed again
    for n in range(2):
        fail(app, recorder, "op-twice-redriven", enqueue=n == 0)
        failed = app.operations.require("op-twice-redriven")
        assert failed.state is OperationState.FAILED
        # When an operator redrives it
        assert app.operations.state.transition(failed, OperationState.ACCEPTED, f"redrive {n}", count_redrive=True)
    # Then each redrive is counted once
    assert app.operations.require("op-twice-redriven").redrives == 2


def test_an_operator_move_from_a_state_read_before_a_change_applies_nothing(app, recorder):
    # Given an operator's read of a FAILED operation, which another operator then redrives
    fail(app, recorder, "op-raced")
    seen = app.operations.require("op-raced")
    assert app.operations.state.transition(seen, OperationState.ACCEPTED, "first operator")
    # When the second operator's move, from what they read, is written
    # Then it applies nothing and says so: the record holds the first move alone
    assert (
        app.operations.state.transition(seen, OperationState.ACCEPTED, "second operator", count_redrive=True) is False
    )
    stored = app.operations.require("op-raced")
    assert (stored.state, stored.redrives, stored.history[-1].reason) == (OperationState.ACCEPTED, 0, "first operator")


def fail(app, recorder, operation_id, job_type="mail.notice.v1", enqueue=True):
    """An operation whose delivery failed for good: FAILED, listed as needing attention."""
    if enqueue:
        app.enqueue(job_type, operation_id, {"user_id": str(uuid.uuid4())})
    recorder.fail_effect.append(PermanentError("boom"))
    assert deliver(app, operation_id).outcome is Outcome.FAILED


def test_the_operators_view_shows_a_live_lease_a_stuck_mark_and_a_kept_original(app, recorder, clock):
    # Given an operation admitted but not started yet: no state record, so no reason, lease or mark
    app.enqueue("mail.notice.v1", "op-shown", {"user_id": str(uuid.uuid4())})
    fresh = app.operations.require("op-shown").to_json()
    assert (fresh["state"], fresh["reason"], fresh["lease"], fresh["stuck"]) == ("ACCEPTED", None, None, None)
    assert fresh["request"] == "stored"
    # When another delivery holds its lease
    held = hold_lease(app, "op-shown", "holder-1", 60)
    # Then the view names the holder and until when, and the reason of the latest move
    view = app.operations.require("op-shown").to_json()
    assert (view["reason"], view["lease"]) == ("started", {"owner": "holder-1", "until": iso(held.until)})
    # When it fails, and an operator reopens it, listed as STUCK until a worker takes it
    app.operations.state.settle(held, OperationState.FAILED, "boom", error="PermanentError: boom")
    failed = app.operations.require("op-shown")
    assert app.operations.state.transition(
        failed, OperationState.ACCEPTED, "redriven", stuck=("reopened", "sent again")
    )
    # Then the view shows the mark, its kind and its reason, and no lease
    view = app.operations.require("op-shown").to_json()
    assert (view["lease"], view["stuck"]) == (None, {"kind": "reopened", "reason": "sent again"})
    # When the producer overwrites the request with other content (the relay records the conflict)
    stored = boto3.client("dynamodb").get_item(
        TableName=app.settings.jobs_table, Key={"operation_id": {"S": "op-shown"}}
    )["Item"]
    other = {**stored, "payload": {"M": {"user_id": {"S": str(uuid.uuid4())}}}}
    record = {"eventName": "MODIFY", "dynamodb": {"NewImage": other, "OldImage": stored, "SequenceNumber": "9"}}
    assert app.relay.handle({"Records": [record]}) == {"batchItemFailures": []}
    # Then the view says the original request was kept, and shows the original's payload
    view = app.operations.require("op-shown").to_json()
    assert view["request"] == "original kept after a conflict"
    assert view["payload"] == {"user_id": stored["payload"]["M"]["user_id"]["S"]}


RUN_AT = "2030-01-02T00:00:00.000Z"
EXPIRES_AT = "2030-01-03T00:00:00.000Z"


def stored_request(app, operation_id):
    return boto3.client("dynamodb").get_item(
        TableName=app.settings.jobs_table, Key={"operation_id": {"S": operation_id}}
    )["Item"]


def test_admitting_stores_the_whole_request_and_answers_with_it(app):
    # Given a request with every documented attribute: correlation id, caller, and both times
    payload = {"user_id": str(uuid.uuid4())}
    # When it is admitted
    admission = app.operations.admit(
        JobRequest("op-whole", "mail.notice.v1", payload, "corr-1", "tenant-a", run_at=RUN_AT, expires_at=EXPIRES_AT)
    )
    # Then each attribute is stored under its own name
    item = stored_request(app, "op-whole")
    assert (item["correlation_id"], item["submitted_by"]) == ({"S": "corr-1"}, {"S": "tenant-a"})
    assert (item["run_at"], item["expires_at"]) == ({"S": RUN_AT}, {"S": EXPIRES_AT})
    # And the answer is the operation as admitted, without a read: new, ACCEPTED, with its request
    assert admission.created is True
    view = admission.operation.to_json()
    assert (view["job_type"], view["state"], view["payload"], view["request"]) == (
        "mail.notice.v1",
        "ACCEPTED",
        payload,
        "stored",
    )
    assert (view["correlation_id"], view["submitted_by"]) == ("corr-1", "tenant-a")
    assert (view["run_at"], view["expires_at"]) == (RUN_AT, EXPIRES_AT)


def test_a_producers_own_transaction_stores_the_whole_request(app):
    # Given the Put entry converge builds for a producer's TransactWriteItems, with every documented attribute
    payload = {"user_id": str(uuid.uuid4())}
    put = app.operations.jobs.put_request(
        JobRequest("op-tx", "mail.notice.v1", payload, "corr-2", "tenant-b", run_at=RUN_AT, expires_at=EXPIRES_AT)
    )
    # When the producer writes it in a transaction (beside its own business writes, left out here)
    app.clients.dynamodb.transact_write_items(TransactItems=[put])
    # Then the operation reads back with each attribute as given
    view = app.operations.require("op-tx").to_json()
    assert (view["payload"], view["correlation_id"], view["submitted_by"]) == (payload, "corr-2", "tenant-b")
    assert (view["run_at"], view["expires_at"]) == (RUN_AT, EXPIRES_AT)


def test_admitting_an_existing_operation_again_answers_with_the_stored_request(app):
    # Given an admitted operation
    payload = {"user_id": str(uuid.uuid4())}
    app.operations.admit(JobRequest("op-again", "mail.notice.v1", payload, "corr-first"))
    # When the producer admits the same content again, with another correlation id
    again = app.operations.admit(JobRequest("op-again", "mail.notice.v1", payload, "corr-second"))
    # Then it is told the operation exists, and is shown the request as first stored
    assert again.created is False
    view = again.operation.to_json()
    assert (view["job_type"], view["payload"], view["request"]) == ("mail.notice.v1", payload, "stored")
    assert view["correlation_id"] == "corr-first"


def test_walking_an_attention_state_reads_at_most_100_operations_a_query_by_default(app):
    # Given 101 operations needing attention (refused input: one write each)
    for n in range(101):
        app.operations.state.reject(Subject(f"op-w{n}", "mail.notice.v1", f"fp-{n}"), "refused")
    calls = sent(app.clients.dynamodb)
    # When they are walked without a page size
    walked = [row["operation_id"] for row in app.operations.listings.iter_attention(OperationState.REJECTED)]
    # Then every one comes once, and no query asks for more than 100
    assert sorted(walked) == sorted(f"op-w{n}" for n in range(101))
    assert [params["Limit"] for name, params in calls if name == "Query"] == [100, 100]


def test_an_operators_reads_of_an_operation_are_strongly_consistent(app, recorder):
    # Given an operation that has run
    app.enqueue("mail.notice.v1", "op-read", {"user_id": str(uuid.uuid4())})
    assert deliver(app, "op-read").outcome is Outcome.SUCCEEDED
    calls = sent(app.clients.dynamodb)
    # When an operator reads it whole, and its state record alone
    app.operations.require("op-read")
    app.operations.state.record("op-read")
    # Then every read asks for the latest write (an operator acts on what it reads)
    assert [(name, params["TableName"], params.get("ConsistentRead")) for name, params in calls] == [
        ("GetItem", app.settings.jobs_table, True),
        ("GetItem", app.settings.state_table, True),
        ("GetItem", app.settings.state_table, True),
    ]


def test_only_the_lease_asks_for_the_records_old_image(app):
    # Given an admitted operation a delivery will run
    payload = {"user_id": str(uuid.uuid4())}
    app.enqueue("mail.notice.v1", "op-ran", payload)
    subject = Subject("op-ran", "mail.notice.v1", fingerprint("mail.notice.v1", payload))
    calls = sent(app.clients.dynamodb)
    # When the lease is taken and the outcome settled, and another operation is paused, then cancelled by hand
    lease = app.operations.state.acquire(subject, "m-1", 30)
    assert app.operations.state.settle(lease, OperationState.SUCCEEDED, "sent") is None
    assert app.operations.state.pause(Subject("op-paused", "mail.notice.v1", "fp-p"), "kill switch is off") is None
    assert app.operations.state.transition(app.operations.require("op-paused"), OperationState.CANCELLED, "not wanted")
    # Then the lease's write alone returns the record as it was (its holder learns the history from it);
    # the others return nothing when they apply, so they cost only the write
    writes = [params.get("ReturnValues") for name, params in calls if name == "UpdateItem"]
    assert writes == ["ALL_OLD", None, None, None]
