"""Marker items: leases and claims where "already claimed" is an answer, never a crash."""

from __future__ import annotations

import boto3
import pytest
from botocore.exceptions import ClientError

from converge.model.clock import FakeClock
from converge.store.markers import MarkerStatus, MarkerStore


@pytest.fixture
def markers(tables):
    clock = FakeClock()
    return MarkerStore(tables["markers"], boto3.client("dynamodb"), clock), clock


def test_a_second_lease_on_a_live_key_is_refused_with_the_holder(markers):
    store, _ = markers
    assert store.lease("mail", "op-1", "a", 30).acquired
    second = store.lease("mail", "op-1", "b", 30)
    assert not second.acquired
    assert second.holder.owner == "a"


def test_an_expired_lease_is_taken_over_and_the_previous_holder_reported(markers):
    store, clock = markers
    store.lease("mail", "op-1", "a", 30)
    clock.advance(31)
    taken = store.lease("mail", "op-1", "b", 30)
    assert taken.acquired
    assert taken.previous.owner == "a"


def test_the_handler_name_scopes_the_key(markers):
    store, _ = markers
    assert store.claim("mail", "op-1", "a").claimed
    assert store.claim("audit", "op-1", "a").claimed  # another handler, same operation
    again = store.claim("mail", "op-1", "b")
    assert not again.claimed
    assert again.holder.status is MarkerStatus.CLAIMED


def test_a_claim_without_lease_holds_and_is_never_leased_over(markers):
    store, clock = markers
    store.claim("mail", "op-1", "a")
    clock.advance(3600)
    assert not store.lease("mail", "op-1", "b", 30).acquired
    assert not store.claim("mail", "op-1", "b").claimed


def test_release_only_removes_our_own_marker(markers):
    store, _ = markers
    store.lease("mail", "op-1", "a", 30)
    assert not store.release("mail", "op-1", "b")
    assert store.release("mail", "op-1", "a")
    assert store.peek("mail", "op-1") is None


def test_markers_carry_a_retention_ttl(markers, tables):
    store, clock = markers
    store.lease("mail", "op-1", "a", 30)
    item = boto3.client("dynamodb").get_item(
        TableName=tables["markers"], Key={"pk": {"S": "mail#op-1"}, "sk": {"S": "claim"}}
    )["Item"]
    assert int(item["expires_at"]["N"]) > clock.now() + 24 * 3600


class _Client:
    """Wraps the real client to report the condition failure in another shape."""

    def __init__(self, real, with_item: bool) -> None:
        self._real = real
        self._with_item = with_item
        self.exceptions = real.exceptions

    def put_item(self, **kwargs):
        try:
            return self._real.put_item(**kwargs)
        except ClientError as exc:
            response = {"Error": exc.response["Error"]}
            if self._with_item and "Item" in exc.response:
                response["Item"] = exc.response["Item"]
            # A plain ClientError (not the modeled subclass), with or without the winning item.
            raise ClientError(response, "PutItem") from None

    def __getattr__(self, name):
        return getattr(self._real, name)


@pytest.mark.parametrize("with_item", [True, False])
def test_a_condition_failure_is_a_no_op_whichever_way_it_is_reported(tables, with_item):
    # Given a client that reports uniqueness as a plain ClientError, with or without the winning item
    clock = FakeClock()
    store = MarkerStore(tables["markers"], _Client(boto3.client("dynamodb"), with_item), clock)
    assert store.claim("mail", "op-1", "a").claimed
    # When a second claim collides / Then it is a returned "already claimed", with the holder known either way
    again = store.claim("mail", "op-1", "b")
    assert not again.claimed
    assert again.holder.owner == "a"


def test_other_dynamodb_errors_propagate(tables):
    store = MarkerStore("no-such-table", boto3.client("dynamodb"), FakeClock())
    with pytest.raises(ClientError) as error:
        store.lease("mail", "op-1", "a", 30)
    assert error.value.response["Error"]["Code"] == "ResourceNotFoundException"


def test_a_claim_with_a_lease_expires_and_its_taker_learns_who_held_it(markers):
    # Given a claim-then-effect claim by a, leased for 30 s
    store, clock = markers
    assert store.claim("ledger", "op-1", "a", lease_seconds=30).claimed
    # While its lease is live, another owner is refused
    clock.advance(29)
    assert not store.claim("ledger", "op-1", "b", lease_seconds=30).claimed
    # When it has expired, b takes the claim over and is told a held it (to settle what a may have done)
    clock.advance(2)
    taken = store.claim("ledger", "op-1", "b", lease_seconds=30)
    assert taken.claimed
    assert taken.previous is not None
    assert (taken.previous.owner, taken.previous.status) == ("a", MarkerStatus.CLAIMED)
    # And the marker now holds b's claim, leased from now
    held = store.peek("ledger", "op-1")
    assert (held.owner, held.status, held.lease_until) == ("b", MarkerStatus.CLAIMED, clock.now() + 30)


def test_a_first_claim_has_no_previous_holder(markers):
    store, _ = markers
    first = store.claim("ledger", "op-1", "a", lease_seconds=30)
    assert (first.claimed, first.previous) == (True, None)
