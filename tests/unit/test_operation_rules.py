"""The stored receipt as an operator reads it (`converge ops show --json`): every field, under its name."""

from __future__ import annotations

import uuid
from itertools import islice

import boto3
import pytest

from converge.clock import iso
from converge.errors import InvalidTransition, OperationNotFound, PermanentError
from converge.operations import OperationState

from .conftest import deliver


def test_the_operators_view_of_an_operation_names_every_field_of_its_receipt(app, clock):
    # Given an operation enqueued with a correlation id, then failed once and retried
    app.enqueue("mail.notice.v1", "op-view", {"user_id": "2c9d6c2e-8f5e-4c43-9a51-0d2b9d0c1f00"}, "corr-7")
    accepted_at = iso(clock.now())
    clock.advance(5)
    operation = app.operations.require("op-view")
    app.operations.transition(
        operation, OperationState.IN_PROGRESS, "attempt 1 failed; retrying", attempts=1, last_error="TransientError: x"
    )
    # When an operator reads it
    view = app.operations.require("op-view").to_json()
    # Then every field of the receipt is there, under the documented name
    retried_at = iso(clock.now())
    assert view == {
        "operation_id": "op-view",
        "job_type": "mail.notice.v1",
        "state": "IN_PROGRESS",
        "attempts": 1,
        "history": [
            {"state": "ACCEPTED", "at": accepted_at, "reason": "enqueued"},
            {"state": "IN_PROGRESS", "at": retried_at, "reason": "attempt 1 failed; retrying"},
        ],
        "last_error": "TransientError: x",
        "correlation_id": "corr-7",
        "payload": {"user_id": "2c9d6c2e-8f5e-4c43-9a51-0d2b9d0c1f00"},
        "redrives": 0,
        "created_at": accepted_at,
        "updated_at": retried_at,
    }


def sent(client) -> list[tuple[str, dict]]:
    """Every call the client makes from now on: (operation, parameters)."""
    calls: list[tuple[str, dict]] = []
    client.meta.events.register(
        "provide-client-params.dynamodb", lambda params, model, **_: calls.append((model.name, dict(params)))
    )
    return calls


def test_enqueueing_an_existing_operation_is_answered_by_the_refused_put_alone(app):
    # Given an admitted operation
    payload = {"user_id": "2c9d6c2e-8f5e-4c43-9a51-0d2b9d0c1f00"}
    assert app.enqueue("mail.notice.v1", "op-twice", payload).created
    calls = sent(app.clients.dynamodb)
    # When the producer enqueues it again (a retry after a timeout, say)
    again = app.enqueue("mail.notice.v1", "op-twice", payload)
    # Then it gets the existing operation from the refused conditional put itself: one call, no read
    assert (again.created, again.operation.operation_id, again.operation.state) == (
        False,
        "op-twice",
        OperationState.ACCEPTED,
    )
    assert [name for name, _ in calls] == ["PutItem"]


def test_walking_an_attention_state_follows_every_page_of_that_job_type_only(app):
    # Given five FAILED operations, three of them of one job type
    for n, job_type in enumerate(["mail.notice.v1"] * 3 + ["files.copy.v1"] * 2):
        app.enqueue(job_type, f"op-f{n}", {"user_id": f"2c9d6c2e-8f5e-4c43-9a51-0d2b9d0c1f0{n}"})
        app.operations.transition(app.operations.require(f"op-f{n}"), OperationState.FAILED, "boom")
    calls = sent(app.clients.dynamodb)
    # When they are walked two to a page, for that job type
    walked = list(islice(app.operations.iter_attention(OperationState.FAILED, "mail.notice.v1", page_size=2), 10))
    # Then each of the three comes once, over two queries of at most two
    assert sorted(row["operation_id"] for row in walked) == ["op-f0", "op-f1", "op-f2"]
    queries = [params for name, params in calls if name == "Query"]
    assert [params["Limit"] for params in queries] == [2, 2]


def test_one_page_of_an_attention_state_is_bounded_by_default(app):
    # Given 51 operations needing attention
    for n in range(51):
        app.enqueue("mail.notice.v1", f"op-p{n}", {"user_id": f"2c9d6c2e-8f5e-4c43-9a51-0d2b9d0c{n:04d}"})
        app.operations.transition(app.operations.require(f"op-p{n}"), OperationState.FAILED, "boom")
    # When one page is listed without a limit / Then it holds 50 and says there is more
    page = app.operations.list_attention(OperationState.FAILED)
    assert len(page.operations) == 50
    assert page.next_token is not None


def test_only_attention_states_can_be_listed_and_the_refusal_names_them(app):
    with pytest.raises(InvalidTransition) as error:
        app.operations.list_attention(OperationState.SUCCEEDED)
    message = str(error.value)
    assert message.startswith("SUCCEEDED is not an attention state; choose one of ")
    assert all(state in message for state in ("FAILED", "PAUSED", "REJECTED", "UNKNOWN"))


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
    app.operations.transition(app.operations.require("op-quiet"), OperationState.IN_PROGRESS, "")
    assert app.operations.require("op-quiet").history[-1].reason == ""


def stored_item(app, operation_id):
    return boto3.client("dynamodb").get_item(
        TableName=app.settings.jobs_table, Key={"operation_id": {"S": operation_id}}
    )["Item"]


def test_leaving_an_attention_state_takes_the_operation_off_the_attention_index(app):
    # Given a FAILED operation, listed as needing attention
    app.enqueue("mail.notice.v1", "op-redriven", {"user_id": str(uuid.uuid4())})
    failed = app.operations.transition(app.operations.require("op-redriven"), OperationState.FAILED, "boom")
    assert [row["operation_id"] for row in app.operations.list_attention(OperationState.FAILED).operations] == [
        "op-redriven"
    ]
    # When it is re-dispatched (a redrive) and then picked up again
    accepted = app.operations.request_redispatch(failed, "redriven by an operator", token="t-1")
    assert stored_item(app, "op-redriven")["redispatch"] == {"S": "t-1"}
    app.operations.transition(accepted, OperationState.IN_PROGRESS, "attempt 1 failed; retrying")
    # Then it is no longer listed, and neither its attention keys nor its re-dispatch token remain
    assert app.operations.list_attention(OperationState.FAILED).operations == []
    assert not {"attention", "attention_sk", "redispatch"} & set(stored_item(app, "op-redriven"))


def test_each_redrive_is_counted_on_the_operation(app):
    app.enqueue("mail.notice.v1", "op-twice-redriven", {"user_id": str(uuid.uuid4())})
    for n in range(2):
        current = app.operations.require("op-twice-redriven")
        failed = app.operations.transition(current, OperationState.FAILED, "boom")
        app.operations.transition(failed, OperationState.ACCEPTED, f"redrive {n}", count_redrive=True)
    assert app.operations.require("op-twice-redriven").redrives == 2
