"""Marker items: conditional-put leases and claims keyed by (handler name, message key), and the steps of
an operation (`converge.flow.steps`), keyed by (operation id, step name).

The table's key is a partition `pk` and a sort key `sk`. A handler's lease or claim is one partition with
one item (`sk` "claim"); the handler name scopes the key, so two handlers may process the same operation
while the second run of one handler collides. An operation's steps share its partition, one item each
(`sk` "step#<name>"), so one Query reads all of them.

A failed condition is an answer ("already claimed", "leased elsewhere", "the step is recorded"),
returned as a value; the item that won comes back with the failure (ReturnValuesOnConditionCheckFailure),
so no second read is needed. Any other error propagates.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from botocore.exceptions import ClientError

from converge.model.clock import Clock, SystemClock, iso
from converge.model.records import StepRecord, StepResult, StepState, clip
from converge.store.conditions import condition_failed, failed_item

RETENTION_SECONDS = 7 * 24 * 3600
"""How long a handler's lease or claim outlives its work (the table's TTL removes it after this; steps never expire)."""

# A step's marker carries no time to live: it is kept as long as its operation's record (the state table keeps every
# record). An operation may wait up to a year between two steps, wait again, then stay PAUSED, UNKNOWN or FAILED for
# as long as no one acts, and its resumed, resolved or retried run must still find every step it did: any time to
# live counted from a marker's writing can be outlived, and the run would then repeat its steps' effects.

CLAIM_SK = "claim"
STEP_SK = "step#"


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

    def _key(self, handler: str, key: str) -> dict[str, Any]:
        return {"pk": {"S": self.pk(handler, key)}, "sk": {"S": CLAIM_SK}}

    def peek(self, handler: str, key: str) -> Marker | None:
        response = self._client.get_item(TableName=self._table, Key=self._key(handler, key), ConsistentRead=True)
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
                Key=self._key(handler, key),
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
        self._client.delete_item(TableName=self._table, Key=self._key(handler, key))

    def _holder(self, exc: ClientError, handler: str, key: str) -> Marker | None:
        """The marker that won: from the failed call when the SDK returned it, else by reading it."""
        item = failed_item(exc)
        return self._marker(item) if item else self.peek(handler, key)

    def _item(self, handler: str, key: str, status: MarkerStatus, owner: str, lease_until: float) -> dict[str, Any]:
        return {
            **self._key(handler, key),
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

    # -- an operation's steps ---------------------------------------------------------------------------------

    def steps(self, operation_id: str) -> dict[str, StepRecord]:
        """Every step marker of the operation, by name: one strongly consistent Query (a page holds them all
        unless a job has hundreds of steps; further pages are read if it does)."""
        found: dict[str, StepRecord] = {}
        request: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "pk = :pk AND begins_with(sk, :step)",
            "ExpressionAttributeValues": {":pk": {"S": _operation_pk(operation_id)}, ":step": {"S": STEP_SK}},
            "ConsistentRead": True,
        }
        while True:
            response = self._client.query(**request)
            for item in response["Items"]:
                step = _step(item)
                found[step.name] = step
            if "LastEvaluatedKey" not in response:
                return found
            request["ExclusiveStartKey"] = response["LastEvaluatedKey"]

    def claim_step(self, operation_id: str, name: str, position: int, policy: str, owner: str) -> StepRecord | None:
        """Claim a step before its effect (claim_then_effect); None: claimed, else the marker that holds it."""
        item = self._step_item(operation_id, name, position, policy, owner, StepState.CLAIMED, None, "claimed")
        return self._put_step(item, "attribute_not_exists(pk)", {})

    def record_step(
        self, operation_id: str, name: str, position: int, policy: str, owner: str, result: StepResult, note: str
    ) -> StepRecord | None:
        """Record a step done with its result, unless it is recorded already (a claim of it is completed);
        None: recorded, else the marker recorded before (whose result is the step's)."""
        item = self._step_item(operation_id, name, position, policy, owner, StepState.DONE, result, note)
        return self._put_step(item, "attribute_not_exists(pk) OR #status = :claimed", {":claimed": StepState.CLAIMED})

    def release_step(self, operation_id: str, name: str) -> bool:
        """Drop a step's claim whose effect is known not to have happened, so a retry runs it at once."""
        try:
            self._client.delete_item(
                TableName=self._table,
                Key=_step_key(operation_id, name),
                ConditionExpression="#status = :claimed",
                ExpressionAttributeNames={"#status": "status"},
                ExpressionAttributeValues={":claimed": {"S": StepState.CLAIMED}},
            )
        except ClientError as exc:
            if not condition_failed(exc):
                raise
            return False
        return True

    def settle_step(self, operation_id: str, step: StepRecord, to: StepState, note: str) -> bool:
        """An operator's decision on a claimed step (done: the effect happened; failed: it did not and must not
        run); False when the step is no longer the claim that was read."""
        item = self._step_item(operation_id, step.name, step.position, step.policy, step.owner, to, None, note)
        return self._put_step(item, "#status = :claimed", {":claimed": StepState.CLAIMED}) is None

    def forget_step(self, operation_id: str, step: StepRecord) -> bool:
        """An operator's decision that a claimed step's effect did not happen and it may run again."""
        return self.release_step(operation_id, step.name)

    def _put_step(self, item: dict[str, Any], condition: str, values: dict[str, str]) -> StepRecord | None:
        extra: dict[str, Any] = {}
        if values:
            extra["ExpressionAttributeValues"] = {name: {"S": value} for name, value in values.items()}
            extra["ExpressionAttributeNames"] = {"#status": "status"}
        try:
            self._client.put_item(
                TableName=self._table,
                Item=item,
                ConditionExpression=condition,
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
                **extra,
            )
        except ClientError as exc:
            if not condition_failed(exc):
                raise
            held = failed_item(exc)
            if not held:
                response = self._client.get_item(
                    TableName=self._table, Key={"pk": item["pk"], "sk": item["sk"]}, ConsistentRead=True
                )
                held = response.get("Item")
            if not held:  # gone since (an operator forgot it): the caller's write may be tried again
                raise
            return _step(held)
        return None

    def _step_item(
        self,
        operation_id: str,
        name: str,
        position: int,
        policy: str,
        owner: str,
        state: StepState,
        result: StepResult,
        note: str,
    ) -> dict[str, Any]:
        now = self._clock.now()
        item = {
            **_step_key(operation_id, name),
            "position": {"N": str(position)},
            "status": {"S": state},
            "policy": {"S": policy},
            "owner": {"S": owner},
            "at": {"S": iso(now)},
            "note": {"S": clip(note)},
        }  # no `expires_at`: the table's time to live removes a handler's claims, never an operation's steps
        if result is not None:
            item["result"] = {"S": json.dumps(result, separators=(",", ":"), sort_keys=True)}
        return item


def _operation_pk(operation_id: str) -> str:
    return f"operation#{operation_id}"


def _step_key(operation_id: str, name: str) -> dict[str, Any]:
    return {"pk": {"S": _operation_pk(operation_id)}, "sk": {"S": f"{STEP_SK}{name}"}}


def _step(item: dict[str, Any]) -> StepRecord:
    stored = item.get("result", {}).get("S")
    return StepRecord(
        name=item["sk"]["S"].removeprefix(STEP_SK),
        position=int(item["position"]["N"]),  # every step item is written whole (`_step_item`)
        policy=item["policy"]["S"],
        state=StepState(item["status"]["S"]),
        at=item["at"]["S"],
        owner=item["owner"]["S"],
        result=json.loads(stored) if stored else None,
        note=item["note"]["S"],
    )


def _num(value: float) -> str:
    return f"{value:.3f}"
