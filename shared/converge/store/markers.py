"""The markers table: an operation's steps (`converge.flow.steps`), one item each, keyed by (operation id, step name).

The table's key is a partition `pk` and a sort key `sk`. An operation's steps share its partition, one item
each (`sk` "step#<name>"), so one Query reads all of them.

A failed condition is an answer ("the step is recorded", "claimed by another delivery"), returned as the
marker that holds the step; the item that won comes back with the failure (ReturnValuesOnConditionCheckFailure),
so no second read is needed. Any other error propagates. Conditions are written with the store's `Update`
builder and values with its codec, as every other table's.
"""

from __future__ import annotations

import json
from typing import Any

from botocore.exceptions import ClientError

from converge.model.clock import Clock, SystemClock, iso
from converge.model.records import StepRecord, StepResult, StepState, clip
from converge.store.codecs import number_value, string_value
from converge.store.conditions import condition_failed
from converge.store.partitions import items_of, operation_key, put_unless_held
from converge.store.updates import Update

# A step's marker carries no time to live: it is kept as long as its operation's record (the state table keeps every
# record). An operation may wait up to a year between two steps, wait again, then stay PAUSED, UNKNOWN or FAILED for
# as long as no one acts, and its resumed, resolved or retried run must still find every step it did: any time to
# live counted from a marker's writing can be outlived, and the run would then repeat its steps' effects.

STEP_SK = "step#"


class MarkerStore:
    """An operation's step markers in the markers table (partition key `pk`, sort key `sk`)."""

    def __init__(self, table_name: str, dynamodb_client: Any, clock: Clock | None = None) -> None:
        self._table = table_name
        self._client = dynamodb_client
        self._clock = clock or SystemClock()

    def steps(self, operation_id: str) -> dict[str, StepRecord]:
        """Every step marker of the operation, by name: one strongly consistent Query (a page holds them all
        unless a job has hundreds of steps; further pages are read if it does)."""
        found: dict[str, StepRecord] = {}
        for item in items_of(self._client, self._table, operation_id, STEP_SK):
            step = _step(item)
            found[step.name] = step
        return found

    def claim_step(
        self,
        operation_id: str,
        name: str,
        position: int,
        policy: str,
        owner: str,
        result: StepResult = None,
        note: str = "claimed",
    ) -> StepRecord | None:
        """Claim a step before its effect (claim_then_effect; a signal's wait, with its time as `result`); None:
        claimed, else the marker that holds it."""
        item = self._step_item(operation_id, name, position, policy, owner, StepState.CLAIMED, result, note)
        condition = Update()
        condition.require(f"attribute_not_exists({condition.name('pk')})")
        return self._put_step(item, condition)

    def record_step(
        self, operation_id: str, name: str, position: int, policy: str, owner: str, result: StepResult, note: str
    ) -> StepRecord | None:
        """Record a step done with its result, unless it is recorded already (a claim of it is completed);
        None: recorded, else the marker recorded before (whose result is the step's)."""
        item = self._step_item(operation_id, name, position, policy, owner, StepState.DONE, result, note)
        condition = Update()
        condition.require(f"attribute_not_exists({condition.name('pk')}) OR {_claimed(condition)}")
        return self._put_step(item, condition)

    def release_step(self, operation_id: str, name: str) -> bool:
        """Drop a step's claim whose effect is known not to have happened, so a retry runs it at once."""
        condition = Update()
        condition.require(_claimed(condition))
        try:
            self._client.delete_item(TableName=self._table, Key=_step_key(operation_id, name), **condition.conditions())
        except ClientError as exc:
            if not condition_failed(exc):
                raise
            return False
        return True

    def settle_step(self, operation_id: str, step: StepRecord, to: StepState, note: str) -> bool:
        """An operator's decision on a claimed step (done: the effect happened; failed: it did not and must not
        run); False when the step is no longer the claim that was read."""
        item = self._step_item(operation_id, step.name, step.position, step.policy, step.owner, to, None, note)
        condition = Update()
        condition.require(_claimed(condition))
        return self._put_step(item, condition) is None

    def forget_step(self, operation_id: str, step: StepRecord) -> bool:
        """An operator's decision that a claimed step's effect did not happen and it may run again."""
        return self.release_step(operation_id, step.name)

    def _put_step(self, item: dict[str, Any], condition: Update) -> StepRecord | None:
        """Put the step's item if its condition holds; None: written, else the marker that holds the step (one
        gone since, which an operator forgot, raises: the caller's write may be tried again)."""
        held = put_unless_held(self._client, self._table, item, condition)
        return None if held is None else _step(held)

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
            "position": number_value(position),
            "status": string_value(state),
            "policy": string_value(policy),
            "owner": string_value(owner),
            "at": string_value(iso(now)),
            "note": string_value(clip(note)),
        }  # no `expires_at`: a step's marker outlives any time to live (see above)
        if result is not None:
            item["result"] = string_value(json.dumps(result, separators=(",", ":"), sort_keys=True))
        return item


def _step_key(operation_id: str, name: str) -> dict[str, Any]:
    return operation_key(operation_id, f"{STEP_SK}{name}")


def _claimed(condition: Update) -> str:
    """The step is still a claim (no delivery recorded it done, no operator settled it)."""
    return f"{condition.name('status')} = {condition.value(string_value(StepState.CLAIMED))}"


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
