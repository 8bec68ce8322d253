"""What a refused write raises: the one family of exceptions the store's writes answer a failed condition with."""

from __future__ import annotations

import boto3
import pytest
from botocore.exceptions import ClientError

from converge.model.records import ExtraRefused, Refused, StateRecord, WriteRefused
from converge.model.request import JobRequest
from converge.model.states import OperationState
from converge.store.conditions import met_item
from converge.store.jobs import JobsTable, RequestExists

PAYLOAD = {"user_id": "00000000-0000-4000-8000-000000000001"}


def test_a_refusal_carries_the_record_it_met_and_says_what_it_is():
    # Given the record a write's condition failed on
    current = StateRecord("op-1", OperationState.SUCCEEDED)
    # When it is raised / Then it is a WriteRefused with that record, and says which operation stood how
    refused = Refused(current)
    assert isinstance(refused, WriteRefused) and refused.current is current
    assert str(refused) == "op-1 is SUCCEEDED: the write's condition did not hold"


def test_an_item_refused_carries_where_it_stood_what_it_was_and_what_its_condition_meant():
    # Given an extra item refused in a settle's transaction
    refused = ExtraRefused(1, "continuation op-1:next", {"operation_id": {"S": "op-1:next"}}, "exists already")
    # Then it names its place, what it was, the item it met and what that means, in one sentence
    assert isinstance(refused, WriteRefused)
    assert (refused.index, refused.what, refused.unmet) == (1, "continuation op-1:next", "exists already")
    assert refused.current == {"operation_id": {"S": "op-1:next"}}
    assert refused.said == str(refused) == "continuation op-1:next exists already"
    # And an item that asked for nothing is named without one, its condition meaning "exists already"
    plain = ExtraRefused(0, "count b::1")
    assert (plain.current, plain.said) == (None, "count b::1 exists already")


def test_what_a_failed_condition_met_is_the_item_returned_else_the_item_read_again():
    # Given a failure that returned the item, and one that did not
    returned = ClientError(
        {"Error": {"Code": "ConditionalCheckFailedException"}, "Item": {"operation_id": {"S": "op-1"}}}, "PutItem"
    )
    bare = ClientError({"Error": {"Code": "ConditionalCheckFailedException"}}, "PutItem")
    reads: list[str] = []

    def read() -> dict:
        reads.append("read")
        return {"operation_id": {"S": "op-read"}}

    # Then the returned item is the answer without a read, and without one the item is read once
    assert met_item(returned, read) == {"operation_id": {"S": "op-1"}} and reads == []
    assert met_item(bare, read) == {"operation_id": {"S": "op-read"}} and reads == ["read"]


def test_a_taken_request_id_raises_with_the_request_that_holds_it(tables):
    # Given a request already written under an id
    jobs = JobsTable(tables["jobs"], boto3.client("dynamodb"))
    jobs.put(jobs.put_request(JobRequest("op-1", "mail.notice.v1", PAYLOAD)))
    # When another put under the same id is made / Then RequestExists carries the request that holds it
    with pytest.raises(RequestExists) as taken:
        jobs.put(jobs.put_request(JobRequest("op-1", "mail.notice.v1", {"user_id": "other"})))
    assert str(taken.value) == "the operation id holds a request already"
    assert taken.value.item is not None and taken.value.item["operation_id"] == {"S": "op-1"}
