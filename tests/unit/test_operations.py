"""The operations store over the state table: the lease, the outcome, the receipt, the listings."""

from __future__ import annotations

import boto3
import pytest
from botocore.exceptions import ClientError

from converge.model.clock import FakeClock, iso
from converge.model.records import CONFLICTS_LIMIT, HISTORY_LIMIT, ConflictEntry, Lease, Refused, Subject
from converge.model.request import JobRequest, fingerprint
from converge.model.states import Flag, OperationState, StuckKind
from converge.store.operations import OperationStore

from .conftest import sent

PAYLOAD = {"user_id": "00000000-0000-4000-8000-000000000001"}
FP = fingerprint("mail.notice.v1", PAYLOAD)


class CountingClient:
    """The DynamoDB client, with its calls counted by operation."""

    def __init__(self) -> None:
        self._client = boto3.client("dynamodb")
        self.calls: list[str] = []

    def __getattr__(self, name):
        method = getattr(self._client, name)
        if not callable(method):
            return method

        def counted(**kwargs):
            self.calls.append(name)
            return method(**kwargs)

        return counted


@pytest.fixture
def clock():
    return FakeClock()


@pytest.fixture
def client(tables):
    return CountingClient()


@pytest.fixture
def store(tables, client, clock):
    return OperationStore(tables["jobs"], tables["state"], client, clock=clock)


def subject(operation_id="op-1", content=FP):
    return Subject(operation_id, "mail.notice.v1", content, "2030-01-01T00:00:00.000Z")


def state_item(tables, operation_id="op-1"):
    return boto3.client("dynamodb").get_item(TableName=tables["state"], Key={"operation_id": {"S": operation_id}})[
        "Item"
    ]


def test_the_happy_path_is_two_writes_no_read_and_no_index_keys(store, client, tables):
    # Given an admitted operation with no state record yet
    store.admit(JobRequest("op-1", "mail.notice.v1", PAYLOAD))
    client.calls.clear()
    # When a delivery takes it and settles it
    lease = store.state.acquire(subject(), "m-1:a", 30)
    assert isinstance(lease, Lease) and lease.previous is None and not lease.takeover
    assert store.state.settle(lease, OperationState.SUCCEEDED, "done") is None
    # Then that was two UpdateItems, no read
    assert client.calls == ["update_item", "update_item"]
    # And the record carries no attention keys (the sparse indexes are never written on the happy path)
    item = state_item(tables)
    assert not {"attention", "attention_sk", "conflict", "conflict_sk", "lease_owner"} & set(item)
    receipt = store.require("op-1")
    assert receipt.state is OperationState.SUCCEEDED
    assert [entry.state for entry in receipt.history] == ["ACCEPTED", "IN_PROGRESS", "SUCCEEDED"]
    assert receipt.history[0].at == "2030-01-01T00:00:00.000Z"  # when it was accepted
    assert receipt.attempts == 1


def test_a_refused_lease_says_why_from_the_record_as_it_stood(store, client, clock):
    # Given an operation leased by a live holder
    store.state.acquire(subject(), "holder", 30)
    client.calls.clear()
    # When another delivery tries: refused with the live lease, from the failed write itself (no read)
    with pytest.raises(Refused) as refused:
        store.state.acquire(subject(), "second", 30)
    busy = refused.value
    assert busy.current.lease_live(clock.now())
    assert busy.current.lease_owner == "holder"
    assert client.calls == ["update_item"]
    # When other content tries: refused, and the record shows the fingerprint it was admitted with
    clock.advance(31)
    with pytest.raises(Refused) as conflict:
        store.state.acquire(subject(content="other"), "third", 30)
    assert conflict.value.current.fingerprint == FP
    # When the lease expires and the same content comes: a takeover, the dead holder's lease in `previous`
    taken = store.state.acquire(subject(), "fourth", 30)
    assert isinstance(taken, Lease) and taken.takeover and taken.previous.lease_owner == "holder"
    # And the first holder can no longer record an outcome
    stale = Lease("op-1", "mail.notice.v1", "holder", 0, 1, (), (), None)
    with pytest.raises(Refused):
        store.state.settle(stale, OperationState.SUCCEEDED, "late")
    assert store.state.settle(taken, OperationState.SUCCEEDED, "done") is None
    # When a copy arrives after it settled: refused, settled
    with pytest.raises(Refused) as after:
        store.state.acquire(subject(), "fifth", 30)
    assert after.value.current.state is OperationState.SUCCEEDED


def test_a_released_lease_makes_the_next_attempt_a_fresh_one_not_a_takeover(store):
    lease = store.state.acquire(subject(), "m-1", 30)
    assert store.state.release(lease, "attempt 1 failed; retrying", "TransientError: down") is None
    again = store.state.acquire(subject(), "m-2", 30)
    assert isinstance(again, Lease) and not again.takeover and again.attempt == 2


def test_the_current_outcome_is_kept_apart_from_earlier_errors(store, tables):
    # Given an operation that failed once, then for good (FAILED), then was redriven and succeeded
    lease = store.state.acquire(subject(), "m-1", 30)
    store.state.release(lease, "attempt 1 failed; retrying", "TransientError: SES throttled")
    lease = store.state.acquire(subject(), "m-2", 30)
    store.state.settle(lease, OperationState.FAILED, "gave up", error="TransientError: still down")
    failed = store.require("op-1")
    assert failed.last_error == "TransientError: still down"
    assert [row["operation_id"] for row in store.listings.list_attention(OperationState.FAILED).operations] == ["op-1"]
    assert store.state.transition(failed, OperationState.ACCEPTED, "redriven from the DLQ", count_redrive=True)
    lease = store.state.acquire(subject(), "m-3", 30)
    store.state.settle(lease, OperationState.SUCCEEDED, "effect applied")
    # Then the receipt's current outcome has no error, the earlier ones are kept, attempts count all three
    receipt = store.require("op-1").to_json()
    assert receipt["state"] == "SUCCEEDED"
    assert receipt["last_error"] is None
    assert [error["error"] for error in receipt["errors"]] == [
        "TransientError: SES throttled",
        "TransientError: still down",
    ]
    assert receipt["attempts"] == 3
    assert receipt["redrives"] == 1
    assert store.listings.list_attention(OperationState.FAILED).operations == []


def test_the_history_stays_bounded_and_keeps_when_it_was_accepted(store):
    for attempt in range(3 * HISTORY_LIMIT):
        lease = store.state.acquire(subject(), f"m-{attempt}", 30)
        store.state.release(lease, f"attempt {attempt} failed", "TransientError: again")
    history = store.require("op-1").history
    assert len(history) <= HISTORY_LIMIT
    assert history[0].state == "ACCEPTED"
    assert history[-1].reason == f"attempt {3 * HISTORY_LIMIT - 1} failed"


def test_pause_lists_the_operation_and_a_later_lease_takes_it_off_the_list(store):
    assert store.state.pause(subject(), "kill switch is off") is None
    assert [row["operation_id"] for row in store.listings.list_attention(OperationState.PAUSED).operations] == ["op-1"]
    # Pausing again is refused: already PAUSED
    with pytest.raises(Refused) as again:
        store.state.pause(subject(), "again")
    assert again.value.current.state is OperationState.PAUSED
    assert isinstance(store.state.acquire(subject(), "m-1", 30), Lease)
    assert store.listings.list_attention(OperationState.PAUSED).operations == []


def test_conflicts_are_recorded_listed_and_bounded(store):
    # Given an operation admitted with FP
    store.admit(JobRequest("op-1", "mail.notice.v1", PAYLOAD))
    entry = ConflictEntry("2030-01-01T00:00:01.000Z", "other-fp", "mail.notice.v1", "jobs table: other content")
    # When other content is recorded as a conflict, many times over
    for _ in range(CONFLICTS_LIMIT + 3):
        assert store.state.record_conflict("op-1", entry, FP)
    # Then it is listed under CONFLICT, keeps its own fingerprint, and counts what it did not keep
    receipt = store.require("op-1")
    assert receipt.fingerprint == FP
    assert len(receipt.conflicts) == CONFLICTS_LIMIT
    assert receipt.state_record.conflicts_dropped == 3
    assert [row["operation_id"] for row in store.listings.list_attention(Flag.CONFLICT).operations] == ["op-1"]
    # And "other" content that is in fact its own is no conflict at all
    own = ConflictEntry("2030-01-01T00:00:02.000Z", FP, "mail.notice.v1", "jobs table")
    assert not store.state.record_conflict("op-1", own, FP)


def test_stuck_is_listed_with_its_reason_until_a_worker_takes_the_operation(store):
    seen = store.state.record("op-1")
    assert store.state.mark_stuck(seen, StuckKind.DEAD_LETTERED, "its message is in the DLQ", subject=subject())
    [row] = store.listings.list_attention(Flag.STUCK).operations
    assert (row["operation_id"], row["state"], row["stuck_kind"]) == ("op-1", "ACCEPTED", "dead_lettered")
    assert row["stuck_reason"] == "its message is in the DLQ"
    # A mark from a stale read is refused
    assert not store.state.mark_stuck(seen, StuckKind.DEAD_LETTERED, "again", subject=subject())
    # A delivery that takes the operation clears the listing
    assert isinstance(store.state.acquire(subject(), "m-1", 30), Lease)
    assert store.listings.list_attention(Flag.STUCK).operations == []


def test_listing_anything_but_an_attention_key_is_refused(store):
    from converge.model.errors import InvalidTransition

    with pytest.raises(InvalidTransition, match="attention key"):
        store.listings.list_attention(OperationState.SUCCEEDED)


class WithoutItemOnConflict(CountingClient):
    """A DynamoDB that answers a failed condition without the item (ReturnValuesOnConditionCheckFailure is
    not honoured by every implementation, and not by older API versions)."""

    def __getattr__(self, name):
        method = super().__getattr__(name)
        if name != "put_item":
            return method

        def stripped(**kwargs):
            try:
                return method(**kwargs)
            except Exception as exc:
                getattr(exc, "response", {}).pop("Item", None)
                raise

        return stripped


def test_an_admission_refused_without_the_item_reads_the_item_that_holds_the_id(tables, clock):
    # Given an admitted request, and a DynamoDB whose refusals carry no item
    store = OperationStore(tables["jobs"], tables["state"], WithoutItemOnConflict(), clock=clock)
    assert store.admit(JobRequest("op-1", "mail.notice.v1", PAYLOAD)).created
    # When the same request is admitted again
    again = store.admit(JobRequest("op-1", "mail.notice.v1", PAYLOAD))
    # Then it is the same operation, found by reading the item that holds the id (then its state record)
    assert not again.created and again.operation.operation_id == "op-1"
    assert again.operation.job_type == "mail.notice.v1"
    assert store.jobs._client.calls[-3:] == ["put_item", "get_item", "get_item"]
    # And other content under the id is still refused as a conflict
    from converge.model.errors import IdentityConflict

    with pytest.raises(IdentityConflict):
        store.admit(JobRequest("op-1", "mail.notice.v1", {"user_id": "00000000-0000-4000-8000-000000000002"}))


def test_a_store_with_the_default_names_queries_the_templates_schedule_index_and_keeps_markers_on_its_clock(
    tables, client, clock
):
    # Given a store built with the index names left to their defaults (the template's) and the markers table
    store = OperationStore(tables["jobs"], tables["state"], client, clock=clock, markers_table=tables["markers"])
    # When it lists overdue operations / Then the schedule index it queries exists (none is overdue yet)
    assert store.listings.overdue(clock.now(), 10) == []
    # And a step's marker is timed by the store's clock, not the wall clock
    assert store.markers is not None
    assert store.markers.claim_step("op-1", "send", 0, "claim_then_effect", "worker-a") is None
    assert store.markers.steps("op-1")["send"].at == iso(clock.now())


def test_a_schedule_index_named_for_the_store_is_the_one_its_overdue_listing_queries(tables, clock):
    # Given a store told its schedule index has another name
    dynamodb = boto3.client("dynamodb")
    calls = sent(dynamodb)
    store = OperationStore(tables["jobs"], tables["state"], dynamodb, clock=clock, schedule_index="renamed-index")
    # When it lists overdue operations / Then it queries that index (which this table does not have)
    with pytest.raises(ClientError):
        store.listings.overdue(clock.now(), 10)
    assert [params.get("IndexName") for name, params in calls if name == "Query"] == ["renamed-index"]


def test_reading_an_operation_leaves_its_steps_and_continuations_unread_unless_asked(tables, client, clock):
    # Given an operation a delivery started, with a step marker, in a store that has the markers table
    store = OperationStore(tables["jobs"], tables["state"], client, clock=clock, markers_table=tables["markers"])
    store.admit(JobRequest("op-1", "mail.notice.v1", PAYLOAD))
    assert isinstance(store.state.acquire(subject(), "worker-a", 30), Lease)
    assert store.markers is not None
    assert store.markers.claim_step("op-1", "send", 0, "claim_then_effect", "worker-a") is None
    client.calls.clear()
    # When it is read without asking for them / Then neither is read: no Query of the markers
    operation = store.get("op-1")
    assert operation is not None and (operation.steps, operation.continuations) == (None, None)
    assert "query" not in client.calls
    # And asked for, the step is there
    detailed = store.get("op-1", steps=True)
    assert detailed is not None and [step.name for step in detailed.steps or ()] == ["send"]
