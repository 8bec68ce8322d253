"""Admission: one conditional put; the same identity with the same content is the same operation."""

from __future__ import annotations

import uuid

import boto3
import pytest

from converge.model.errors import IdentityConflict, InvalidMessage, UnknownJobType
from converge.model.states import OperationState


def items(app):
    return boto3.client("dynamodb").scan(TableName=app.settings.jobs_table)["Items"]


def test_enqueue_writes_the_documented_item_and_nothing_else(app):
    user = str(uuid.uuid4())
    admission = app.enqueue("mail.notice.v1", "op-1", {"user_id": user}, correlation_id="req-9")
    assert admission.created
    # The request is exactly the documented item shape: what any producer may write itself
    [item] = items(app)
    assert item == {
        "operation_id": {"S": "op-1"},
        "job_type": {"S": "mail.notice.v1"},
        "payload": {"M": {"user_id": {"S": user}}},
        "correlation_id": {"S": "req-9"},
    }
    # And admission writes no state: an operation with no state record is ACCEPTED, not yet started
    assert boto3.client("dynamodb").scan(TableName=app.settings.state_table)["Items"] == []
    assert app.operations.require("op-1").state is OperationState.ACCEPTED


def test_the_same_id_and_content_returns_the_existing_operation(app):
    user = str(uuid.uuid4())
    app.enqueue("mail.notice.v1", "op-1", {"user_id": user})
    again = app.enqueue("mail.notice.v1", "op-1", {"user_id": user})
    assert not again.created
    assert again.operation.state is OperationState.ACCEPTED
    assert len(items(app)) == 1


def test_the_same_id_with_other_content_is_an_identity_conflict_naming_the_id(app):
    app.enqueue("mail.notice.v1", "op-1", {"user_id": str(uuid.uuid4())})
    with pytest.raises(IdentityConflict, match="op-1"):
        app.enqueue("mail.notice.v1", "op-1", {"user_id": str(uuid.uuid4())})


def test_a_raw_item_is_compared_by_content(app):
    user = str(uuid.uuid4())
    boto3.client("dynamodb").put_item(
        TableName=app.settings.jobs_table,
        Item={
            "operation_id": {"S": "raw-1"},
            "job_type": {"S": "mail.notice.v1"},
            "payload": {"M": {"user_id": {"S": user}}},
        },
    )
    assert not app.enqueue("mail.notice.v1", "raw-1", {"user_id": user}).created
    with pytest.raises(IdentityConflict):
        app.enqueue("files.copy.v1", "raw-1", {"user_id": user})


@pytest.mark.parametrize(
    ("job_type", "operation_id", "payload", "error"),
    [
        ("no.such.v1", "op-1", {"user_id": str(uuid.uuid4())}, UnknownJobType),
        ("mail.notice.v1", "op 1", {"user_id": str(uuid.uuid4())}, InvalidMessage),
        ("mail.notice.v1", "x" * 200, {"user_id": str(uuid.uuid4())}, InvalidMessage),
        ("mail.notice.v1", "op-1", {"user_id": "someone@example.com"}, InvalidMessage),
        ("mail.notice.v1", "op-1", {"user_id": str(uuid.uuid4()), "email": "a"}, InvalidMessage),
    ],
)
def test_invalid_input_is_refused_before_anything_is_written(app, job_type, operation_id, payload, error):
    with pytest.raises(error):
        app.enqueue(job_type, operation_id, payload)
    assert items(app) == []


def test_the_transactional_form_commits_with_the_producers_own_write(app):
    # Given a producer that writes its business row and the job in one transaction
    dynamodb = boto3.client("dynamodb")
    put = app.enqueue_put("mail.notice.v1", "op-tx", {"user_id": str(uuid.uuid4())})
    dynamodb.transact_write_items(
        TransactItems=[
            {
                "Put": {
                    "TableName": app.settings.markers_table,
                    "Item": {"pk": {"S": "business#row"}, "sk": {"S": "row"}},
                }
            },
            put,
        ]
    )
    # Then the operation exists exactly as enqueue() would have written it
    assert app.operations.require("op-tx").state is OperationState.ACCEPTED
    # And replaying the transaction is refused by the operation's condition, writing nothing twice
    with pytest.raises(dynamodb.exceptions.TransactionCanceledException):
        dynamodb.transact_write_items(TransactItems=[put])
