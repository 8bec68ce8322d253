"""Marker items: conditional-put leases and claims keyed by (handler name, message key).

The handler name scopes the key, so two handlers may process the same operation while the second
run of one handler collides. A failed condition is an answer ("already claimed", "leased
elsewhere"), returned as a value; the item that won comes back with the failure
(ReturnValuesOnConditionCheckFailure), so no second read is needed. Any other error propagates.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from botocore.exceptions import ClientError

from converge.model.clock import Clock, SystemClock
from converge.store.conditions import condition_failed, failed_item

RETENTION_SECONDS = 7 * 24 * 3600
"""How long a marker outlives its work (the table's TTL removes it after this)."""


class MarkerStatus(StrEnum):
    LEASED = "LEASED"
    CLAIMED = "CLAIMED"


@dataclass(frozen=True)
class Marker:
    handler: str
    key: str
    status: MarkerStatus
    owner: str
    lease_until: float


@dataclass(frozen=True)
class LeaseResult:
    """`acquired` is False when another live lease or a claim holds the key (see `holder`).

    `previous` is the expired lease this one replaced, if any: its holder may have done the work.
    """

    acquired: bool
    holder: Marker | None = None
    previous: Marker | None = None

    @property
    def already_claimed(self) -> bool:
        return self.holder is not None and self.holder.status is MarkerStatus.CLAIMED


@dataclass(frozen=True)
class ClaimResult:
    """`claimed` is False when the key was already claimed or is leased by a live other owner."""

    claimed: bool
    holder: Marker | None = None
    previous: Marker | None = None


class MarkerStore:
    """Leases and claims in the markers table (partition key `pk`, TTL attribute `expires_at`)."""

    def __init__(self, table_name: str, dynamodb_client: Any, clock: Clock | None = None) -> None:
        self._table = table_name
        self._client = dynamodb_client
        self._clock = clock or SystemClock()

    @staticmethod
    def pk(handler: str, key: str) -> str:
        return f"{handler}#{key}"

    def peek(self, handler: str, key: str) -> Marker | None:
        response = self._client.get_item(
            TableName=self._table, Key={"pk": {"S": self.pk(handler, key)}}, ConsistentRead=True
        )
        return self._marker(response.get("Item"))

    def lease(self, handler: str, key: str, owner: str, lease_seconds: float) -> LeaseResult:
        """Take the key for `lease_seconds` unless a live lease or a claim holds it."""
        now = self._clock.now()
        try:
            response = self._client.put_item(
                TableName=self._table,
                Item=self._item(handler, key, MarkerStatus.LEASED, owner, now + lease_seconds),
                ConditionExpression="attribute_not_exists(pk) OR (#status = :leased AND lease_until < :now)",
                ExpressionAttributeNames={"#status": "status"},
                ExpressionAttributeValues={":leased": {"S": MarkerStatus.LEASED}, ":now": {"N": _num(now)}},
                ReturnValues="ALL_OLD",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as exc:
            if not condition_failed(exc):
                raise
            return LeaseResult(acquired=False, holder=self._holder(exc, handler, key))
        return LeaseResult(acquired=True, previous=self._marker(response.get("Attributes")))

    def claim(self, handler: str, key: str, owner: str, lease_seconds: float | None = None) -> ClaimResult:
        """Mark the key claimed, unless it already is or another owner's lease on it is live.

        With `lease_seconds`, the claim itself carries a lease (claim-then-effect): if its holder
        dies before finishing, the claim can be taken over once the lease expires. Without it, the
        claim holds for the marker's whole retention.
        """
        now = self._clock.now()
        hold = RETENTION_SECONDS if lease_seconds is None else lease_seconds
        try:
            response = self._client.put_item(
                TableName=self._table,
                Item=self._item(handler, key, MarkerStatus.CLAIMED, owner, now + hold),
                ConditionExpression="attribute_not_exists(pk) OR #owner = :owner OR lease_until < :now",
                ExpressionAttributeNames={"#owner": "owner"},
                ExpressionAttributeValues={":owner": {"S": owner}, ":now": {"N": _num(now)}},
                ReturnValues="ALL_OLD",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as exc:
            if not condition_failed(exc):
                raise
            return ClaimResult(claimed=False, holder=self._holder(exc, handler, key))
        previous = self._marker(response.get("Attributes"))
        if previous is not None and previous.owner == owner:
            previous = None
        return ClaimResult(claimed=True, previous=previous)

    def release(self, handler: str, key: str, owner: str) -> bool:
        """Give up our own lease or claim early (the effect did not happen), so a retry need not wait."""
        try:
            self._client.delete_item(
                TableName=self._table,
                Key={"pk": {"S": self.pk(handler, key)}},
                ConditionExpression="#owner = :owner",
                ExpressionAttributeNames={"#owner": "owner"},
                ExpressionAttributeValues={":owner": {"S": owner}},
            )
        except ClientError as exc:
            if not condition_failed(exc):
                raise
            return False
        return True

    def forget(self, handler: str, key: str) -> None:
        """Delete the key's marker whoever holds it: an operator's decision that the work must run afresh."""
        self._client.delete_item(TableName=self._table, Key={"pk": {"S": self.pk(handler, key)}})

    def _holder(self, exc: ClientError, handler: str, key: str) -> Marker | None:
        """The marker that won: from the failed call when the SDK returned it, else by reading it."""
        item = failed_item(exc)
        return self._marker(item) if item else self.peek(handler, key)

    def _item(self, handler: str, key: str, status: MarkerStatus, owner: str, lease_until: float) -> dict[str, Any]:
        return {
            "pk": {"S": self.pk(handler, key)},
            "status": {"S": status},
            "owner": {"S": owner},
            "lease_until": {"N": _num(lease_until)},
            "expires_at": {"N": str(int(self._clock.now()) + RETENTION_SECONDS)},
        }

    @staticmethod
    def _marker(item: dict[str, Any] | None) -> Marker | None:
        if not item:
            return None
        handler, _, key = item["pk"]["S"].partition("#")
        return Marker(
            handler=handler,
            key=key,
            status=MarkerStatus(item["status"]["S"]),
            owner=item.get("owner", {}).get("S", ""),
            lease_until=float(item.get("lease_until", {}).get("N", "0")),
        )


def _num(value: float) -> str:
    return f"{value:.3f}"
