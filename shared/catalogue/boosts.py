"""Boost expiry (recurring, fail-closed): expire boosts whose end time has passed, a page at a time.

Only active boosts carry `expiry_shard`, so the sparse index lists exactly the boosts that may be
due and the sweep never scans the table. Each expiry is a conditional update that also removes
the boost from the index: a re-run, or two overlapping ticks, expire each boost once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from botocore.exceptions import ClientError

from catalogue.clients import LazyClient
from catalogue.records import BOOST_EXPIRY_INDEX, BOOST_SHARDS, boost_key
from catalogue.settings import CatalogueSettings
from converge import JobMessage, TickContext, error_code, logger
from converge.model.clock import iso

PAGE_SIZE = 100
MAX_PAGES_PER_TICK = 50


class BoostExpirySweepTick(JobMessage):
    """A recurring job carries no payload: each tick works out what is due from the clock."""


@dataclass(frozen=True)
class DuePage:
    boost_ids: list[str]
    cursor: dict[str, Any] | None


class BoostStore(Protocol):
    def shards(self) -> list[str]: ...

    def due(self, shard: str, now: float, limit: int, cursor: dict[str, Any] | None) -> DuePage: ...

    def expire(self, boost_id: str, now: float) -> bool:
        """Expire one boost if it is still active and due; False when it was not (already swept, extended)."""
        ...


class DynamoBoostStore:
    def __init__(self, table_name: str, dynamodb_client: Any = None, index_name: str = BOOST_EXPIRY_INDEX) -> None:
        self.table_name = table_name
        self.index_name = index_name
        self._dynamodb = LazyClient("dynamodb", dynamodb_client)

    def shards(self) -> list[str]:
        return [f"active#{shard}" for shard in range(BOOST_SHARDS)]

    def due(self, shard: str, now: float, limit: int, cursor: dict[str, Any] | None) -> DuePage:
        request: dict[str, Any] = {
            "TableName": self.table_name,
            "IndexName": self.index_name,
            "KeyConditionExpression": "expiry_shard = :shard AND ends_at <= :now",
            "ExpressionAttributeValues": {":shard": {"S": shard}, ":now": {"N": str(int(now))}},
            "Limit": limit,
        }
        if cursor:
            request["ExclusiveStartKey"] = cursor
        page = self._dynamodb().query(**request)
        ids = [item["pk"]["S"].removeprefix("boost#") for item in page.get("Items", [])]
        return DuePage(ids, page.get("LastEvaluatedKey"))

    def expire(self, boost_id: str, now: float) -> bool:
        try:
            self._dynamodb().update_item(
                TableName=self.table_name,
                Key={"pk": {"S": boost_key(boost_id)}},
                UpdateExpression="SET #status = :expired, expired_at = :at REMOVE expiry_shard",
                # The index is eventually consistent: re-check on the item itself.
                ConditionExpression="attribute_exists(expiry_shard) AND ends_at <= :now",
                ExpressionAttributeNames={"#status": "status"},
                ExpressionAttributeValues={
                    ":expired": {"S": "expired"},
                    ":at": {"S": iso(now)},
                    ":now": {"N": str(int(now))},
                },
            )
        except ClientError as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                return False
            raise
        return True


class BoostExpirySweep:
    """Each tick expires due boosts in bounded pages and stops early when the Lambda runs short of time."""

    def __init__(self, boosts: BoostStore, page_size: int = PAGE_SIZE, max_pages: int = MAX_PAGES_PER_TICK) -> None:
        self.boosts = boosts
        self.page_size = page_size
        self.max_pages = max_pages

    def tick(self, ctx: TickContext) -> dict[str, Any]:
        now = ctx.clock.now()
        counts = {"pages": 0, "examined": 0, "expired": 0, "skipped": 0}
        complete = True
        for shard in self.boosts.shards():
            cursor: dict[str, Any] | None = None
            while complete:
                if ctx.out_of_time() or counts["pages"] >= self.max_pages:
                    complete = False  # the next tick carries on: every expiry so far is already recorded
                    break
                page = self.boosts.due(shard, now, self.page_size, cursor)
                counts["pages"] += 1
                for boost_id in page.boost_ids:
                    counts["examined"] += 1
                    counts["expired" if self.boosts.expire(boost_id, now) else "skipped"] += 1
                cursor = page.cursor
                if cursor is None:
                    break
        logger.info("boost expiry sweep tick", extra={**counts, "complete": complete})
        return {**counts, "complete": complete}


def build_runner() -> BoostExpirySweep:
    return BoostExpirySweep(DynamoBoostStore(CatalogueSettings.from_env().require("app_table")))
