"""An operation's partition in the markers table: its step markers (`converge.store.markers`) and its signal items
(`converge.store.signals`) share it, so both read and write it through these.

The partition key is `pk` "operation#<id>"; each kind of item has a prefix of its own in the sort key `sk`
("step#", "signal#"). A conditional put that fails answers with the item that held (returned with the failure,
else read again strongly consistent), never a second write.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from botocore.exceptions import ClientError

from converge.store.codecs import string_value
from converge.store.conditions import condition_failed, met_item
from converge.store.updates import Update


def operation_key(operation_id: str, sk: str) -> dict[str, Any]:
    """The key of one item of an operation's partition."""
    return {"pk": string_value(f"operation#{operation_id}"), "sk": string_value(sk)}


def operation_id_of(item: dict[str, Any]) -> str:
    """The operation whose partition holds an item."""
    return str(item["pk"]["S"]).removeprefix("operation#")


def items_of(client: Any, table: str, operation_id: str, prefix: str) -> Iterator[dict[str, Any]]:
    """Every item of the operation's partition whose sort key starts with `prefix`: one strongly consistent Query,
    and its further pages if there are any."""
    request: dict[str, Any] = {
        "TableName": table,
        "KeyConditionExpression": "pk = :pk AND begins_with(sk, :prefix)",
        "ExpressionAttributeValues": {
            ":pk": string_value(f"operation#{operation_id}"),
            ":prefix": string_value(prefix),
        },
        "ConsistentRead": True,
    }
    while True:
        response = client.query(**request)
        yield from response["Items"]
        if "LastEvaluatedKey" not in response:
            return
        request["ExclusiveStartKey"] = response["LastEvaluatedKey"]


def put_unless_held(client: Any, table: str, item: dict[str, Any], condition: Update) -> dict[str, Any] | None:
    """Put the item if its condition holds: None when written, else the item that held its key. A failure whose
    item is gone since (an operator forgot a step) raises it: the caller's write may be tried again."""
    try:
        client.put_item(
            TableName=table, Item=item, ReturnValuesOnConditionCheckFailure="ALL_OLD", **condition.conditions()
        )
    except ClientError as exc:
        if not condition_failed(exc):
            raise
        held = met_item(exc, lambda: _read(client, table, item))
        if not held:
            raise
        return held
    return None


def _read(client: Any, table: str, item: dict[str, Any]) -> dict[str, Any] | None:
    response = client.get_item(TableName=table, Key={"pk": item["pk"], "sk": item["sk"]}, ConsistentRead=True)
    found: dict[str, Any] | None = response.get("Item")
    return found
