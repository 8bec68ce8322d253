"""What a lost race on a step's marker costs and tells: the winner comes back with the failed write itself.

Calls are counted on the DynamoDB client as it sends them (botocore's own event hooks), not by
replacing it, so moto still answers every call.
"""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from converge.model.clock import FakeClock
from converge.store.markers import MarkerStore

from .conftest import sent


@pytest.fixture
def dynamodb(tables):
    return boto3.client("dynamodb")


@pytest.fixture
def clock():
    return FakeClock()


def test_releasing_a_step_drops_only_a_claim_and_says_whether_it_did(tables, dynamodb, clock):
    # Given one step claimed and another recorded done
    store = MarkerStore(tables["markers"], dynamodb, clock)
    assert store.claim_step("op-9", "charge", 0, "claim_then_effect", "worker-a") is None
    assert store.record_step("op-9", "notify", 1, "effect_then_claim", "worker-a", None, "sent") is None
    # When the claim is released / Then it is gone, and a second release finds nothing to drop
    assert store.release_step("op-9", "charge") is True
    assert store.release_step("op-9", "charge") is False
    # When a step recorded done is released / Then it is refused and kept: its effect happened
    assert store.release_step("op-9", "notify") is False
    assert list(store.steps("op-9")) == ["notify"]
    # And any other failure is raised, never taken for "not claimed"
    with pytest.raises(ClientError, match="ResourceNotFoundException"):
        MarkerStore("no-such-table", dynamodb, clock).release_step("op-9", "charge")


def without_the_failed_item(client: Any) -> Any:
    """The client as an emulator that returns no item with a failed condition would answer."""
    real = client.put_item

    def put_item(**request: Any) -> Any:
        try:
            return real(**request)
        except ClientError as exc:
            exc.response.pop("Item", None)
            raise

    return put_item


def test_a_lost_step_claim_without_the_item_in_the_refusal_reads_the_holder_once_and_strongly(
    tables, dynamodb, clock, monkeypatch
):
    # Given a step recorded done, and a refusal that does not carry the item that refused
    store = MarkerStore(tables["markers"], dynamodb, clock)
    assert store.record_step("op-8", "charge", 1, "claim_then_effect", "a", {"charge": "ch-a"}, "done") is None
    monkeypatch.setattr(dynamodb, "put_item", without_the_failed_item(dynamodb))
    calls = sent(dynamodb)
    # When another delivery claims it / Then the holder is read once, consistently, by the step's own key
    held = store.claim_step("op-8", "charge", 1, "claim_then_effect", "b")
    assert held is not None and (held.owner, held.result) == ("a", {"charge": "ch-a"})
    reads = [params for name, params in calls if name == "GetItem"]
    assert len(reads) == 1 and reads[0]["ConsistentRead"] is True
    assert reads[0]["Key"] == {"pk": {"S": "operation#op-8"}, "sk": {"S": "step#charge"}}


def test_a_step_write_refused_for_a_marker_gone_since_is_raised(tables, dynamodb, clock):
    # Given no marker for the step (an operator forgot it), When an operator's decision settles it
    store = MarkerStore(tables["markers"], dynamodb, clock)
    from converge.model.records import StepRecord, StepState

    gone = StepRecord("charge", 1, "claim_then_effect", StepState.CLAIMED, "2026-12-01T00:00:00Z", "a")
    # Then the refusal is raised (there is no holder to answer with)
    with pytest.raises(ClientError, match="ConditionalCheckFailed"):
        store.settle_step("op-7", gone, StepState.DONE, "applied")


def test_a_step_write_that_fails_for_another_reason_is_raised_not_read_as_a_lost_claim(
    tables, dynamodb, clock, monkeypatch
):
    # Given a step recorded done, and DynamoDB throttling the next write
    store = MarkerStore(tables["markers"], dynamodb, clock)
    assert store.record_step("op-6", "charge", 1, "claim_then_effect", "a", {"charge": "ch-a"}, "done") is None
    throttled = ClientError({"Error": {"Code": "ProvisionedThroughputExceededException"}}, "PutItem")
    monkeypatch.setattr(dynamodb, "put_item", lambda **_: (_ for _ in ()).throw(throttled))
    # When another delivery claims it / Then the throttling is raised, never taken for the holder's answer
    with pytest.raises(ClientError, match="ProvisionedThroughputExceeded"):
        store.claim_step("op-6", "charge", 1, "claim_then_effect", "b")


def test_an_operations_steps_are_read_page_after_page(tables, dynamodb, clock, monkeypatch):
    # Given five steps recorded, and DynamoDB answering a query two items at a time
    store = MarkerStore(tables["markers"], dynamodb, clock)
    for position, name in enumerate(["a", "b", "c", "d", "e"]):
        assert store.record_step("op-5", name, position, "keyed_effect", "w", None, "done") is None
    real_query = dynamodb.query
    pages: list[int] = []

    def small_pages(**request: Any) -> Any:
        answer = real_query(**request, Limit=2)
        pages.append(len(answer["Items"]))
        return answer

    monkeypatch.setattr(dynamodb, "query", small_pages)
    # When the operation's steps are read / Then every page was read, and all five found
    assert sorted(store.steps("op-5")) == ["a", "b", "c", "d", "e"] and len(pages) == 3
