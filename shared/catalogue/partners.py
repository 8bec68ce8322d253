"""Partners of the reference application: a read port and its DynamoDB adapter over the app table."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from catalogue.clients import LazyClient
from catalogue.records import partner_key, string


@dataclass(frozen=True)
class Partner:
    partner_id: str
    name: str
    active: bool
    email: str = field(default="", repr=False)
    """Where the partner's notices go (a credit to their balance); none means no notice."""


class PartnerDirectory(Protocol):
    def get(self, partner_id: str) -> Partner | None: ...


class DynamoPartnerDirectory:
    def __init__(self, table_name: str, dynamodb_client: Any = None) -> None:
        self.table_name = table_name
        self._dynamodb = LazyClient("dynamodb", dynamodb_client)

    def get(self, partner_id: str) -> Partner | None:
        key = {"pk": {"S": partner_key(partner_id)}}
        item = self._dynamodb().get_item(TableName=self.table_name, Key=key).get("Item")
        if item is None:
            return None
        active = string(item, "status") != "closed" and "deleted_at" not in item
        return Partner(partner_id, string(item, "name") or "", active, string(item, "email") or "")
