"""Users of the reference application: a read port and its DynamoDB adapter over the app table."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from catalogue.clients import LazyClient
from catalogue.records import flag, string, user_key


@dataclass(frozen=True)
class User:
    user_id: str
    email: str = field(repr=False)
    display_name: str = field(repr=False)
    email_confirmed: bool
    deleted: bool


class UserDirectory(Protocol):
    def get(self, user_id: str) -> User | None: ...


class DynamoUserDirectory:
    """Users stored as `user#<id>` rows; a soft-deleted user carries `deleted_at`."""

    def __init__(self, table_name: str, dynamodb_client: Any = None) -> None:
        self.table_name = table_name
        self._dynamodb = LazyClient("dynamodb", dynamodb_client)

    def get(self, user_id: str) -> User | None:
        item = self._dynamodb().get_item(TableName=self.table_name, Key={"pk": {"S": user_key(user_id)}}).get("Item")
        if item is None:
            return None
        return User(
            user_id=user_id,
            email=string(item, "email") or "",
            display_name=string(item, "display_name") or "",
            email_confirmed=flag(item, "email_confirmed"),
            deleted="deleted_at" in item,
        )
