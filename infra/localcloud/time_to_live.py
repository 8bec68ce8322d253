"""DynamoDB's time to live on the emulated clock: an item whose TTL attribute has passed is deleted by the service.

Which tables expire items, and by which attribute, is what the deployment set from each table's
TimeToLiveSpecification in the template (gaps.py applies it with UpdateTimeToLive); it is read back here with
DescribeTimeToLive, so nothing is named in this module. As DynamoDB does:
* an item expires when its TTL attribute is a Number (epoch seconds) at or before now; an item without the
  attribute, with another type, or with a time more than five years in the past is never deleted;
* the deletion is the service's: on a table with a stream, its REMOVE record carries the old image and a
  `userIdentity` naming the service (in a Lambda event, `{"type": "Service", "principalId":
  "dynamodb.amazonaws.com"}`), which is how a consumer tells a TTL deletion from a user's;
* DynamoDB deletes an expired item some time after its time (its documentation says within a few days), never
  before, and reads may return it meanwhile. The local cloud deletes it as soon as the emulated clock passes its
  time (on every `advance()`, drain()'s fast-forwards included): the earliest a service deletion can come, the
  harshest for code that counts on an item outliving its time to live. Real time passing on its own deletes
  nothing (an item expiring while a test runs is within the documented delay).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from moto.dynamodb.models import dynamodb_backends

from .clients import ACCOUNT_ID, Clients

SERVICE_PRINCIPAL = "dynamodb.amazonaws.com"
TTL_IDENTITY = {"PrincipalId": SERVICE_PRINCIPAL, "Type": "Service"}
"""A TTL deletion's userIdentity, as GetRecords returns it (a Lambda event spells the keys principalId and type)."""
OLDEST_EXPIRED_SECONDS = 5 * 365 * 24 * 3600
"""DynamoDB leaves alone an item whose time to live is more than five years in the past."""


@dataclass(frozen=True)
class ExpiringTable:
    """A table with time to live enabled, and the attribute it reads."""

    name: str
    attribute: str


@dataclass
class TimeToLive:
    """The deployment's tables with time to live enabled; `expire(now)` deletes what has expired."""

    clients: Clients
    tables: tuple[ExpiringTable, ...]
    deleted: int = 0
    """Items deleted so far (tests read it)."""

    @classmethod
    def of(cls, clients: Clients, table_names: list[str]) -> TimeToLive:
        """The tables among `table_names` whose time to live is enabled, as DescribeTimeToLive says."""
        dynamodb = clients("dynamodb")
        found = []
        for name in table_names:
            described = dynamodb.describe_time_to_live(TableName=name)["TimeToLiveDescription"]
            if described.get("TimeToLiveStatus") == "ENABLED" and described.get("AttributeName"):
                found.append(ExpiringTable(name, described["AttributeName"]))
        return cls(clients, tuple(found))

    def expire(self, now: float) -> int:
        """Delete every item whose time to live is at or before `now`, as the service does; how many were deleted."""
        backend = dynamodb_backends[ACCOUNT_ID][self.clients.region]
        deleted = 0
        for expiring in self.tables:
            table = backend.tables.get(expiring.name)
            if table is None:
                continue
            for item in [i for i in table.all_items() if _expired(i, expiring.attribute, now)]:
                table.delete_item(item.hash_key, item.range_key)
                _mark_service_deletion(table)
                deleted += 1
        self.deleted += deleted
        return deleted


def _expired(item: Any, attribute: str, now: float) -> bool:
    value = item.attrs.get(attribute)
    if value is None or value.type != "N":
        return False
    try:
        expires = float(value.value)
    except (TypeError, ValueError):
        return False
    return now - OLDEST_EXPIRED_SECONDS <= expires <= now


def _mark_service_deletion(table: Any) -> None:
    """The REMOVE record the deletion just added to the table's stream names the service as who deleted it."""
    shard = getattr(table, "stream_shard", None)
    if shard is not None and shard.items:
        shard.items[-1].record["userIdentity"] = dict(TTL_IDENTITY)


def lambda_identity(record: dict[str, Any]) -> dict[str, str] | None:
    """A GetRecords record's userIdentity as a Lambda event carries it (None when the record has none)."""
    identity = record.get("userIdentity")
    if not isinstance(identity, dict):
        return None
    return {"type": str(identity.get("Type", "")), "principalId": str(identity.get("PrincipalId", ""))}
