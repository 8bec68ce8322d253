"""The jobs table: the producers' requests, one item each, whose stream is the outbox.

Producers write it (a plain PutItem, or inside their own transaction); converge writes a request only for
its own enqueue, conditional on the id being new, and reads one back. It never updates an item.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from converge.model.request import JobRequest
from converge.model.signals import SignalItemKey
from converge.store import signal_items
from converge.store.codecs import request_item, state_key
from converge.store.conditions import condition_failed, met_item
from converge.store.transact import TransactItem

PARENT_ATTRIBUTE = "parent_id"
"""On a continuation's request, the operation whose settle wrote it (converge writes it; shown on the receipt,
never trusted for anything: a producer's item may carry any attribute)."""


class RequestExists(Exception):
    """A request's id is taken: `item` is the request that holds it (None if it was deleted meanwhile)."""

    def __init__(self, item: dict[str, Any] | None) -> None:
        super().__init__("the operation id holds a request already")
        self.item = item


class JobsTable:
    """Writes and reads of the jobs table (the requests)."""

    def __init__(self, table_name: str, dynamodb_client: Any) -> None:
        self._table = table_name
        self._client = dynamodb_client

    def put_request(self, request: JobRequest) -> dict[str, Any]:
        """The `Put` entry for a producer's own TransactWriteItems (business write and job, atomically): the
        request, unless its id exists (then the transaction is cancelled with the item that exists)."""
        return {
            "Put": {
                "TableName": self._table,
                "Item": request_item(request),
                "ConditionExpression": "attribute_not_exists(operation_id)",
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        }

    def signal_put(self, key: SignalItemKey, payload: dict[str, Any]) -> dict[str, Any]:
        """The `Put` of a signal item for a producer's own TransactWriteItems (`converge.store.signal_items`)."""
        return signal_items.signal_put(self._table, key, payload)

    def continuation_put(self, request: JobRequest, parent_id: str) -> TransactItem:
        """The next operation's request, for the transaction that settles its parent: a Put conditional on its
        id being new, so a retried or raced settle can never write it twice."""
        item = {**request_item(request), PARENT_ATTRIBUTE: {"S": parent_id}}
        return TransactItem(
            "Put",
            {
                "TableName": self._table,
                "Item": item,
                "ConditionExpression": "attribute_not_exists(operation_id)",  # (its old item is not needed back)
            },
            what=f"continuation {request.operation_id}",
        )

    def put(self, put: dict[str, Any]) -> None:
        """Make a `put_request` Put on its own; RequestExists, with the item that holds the id, when it is taken."""
        try:
            self._client.put_item(**put["Put"])
        except ClientError as exc:
            if not condition_failed(exc):
                raise
            raise RequestExists(met_item(exc, lambda: self.item(put["Put"]["Item"]["operation_id"]["S"]))) from None

    def item(self, operation_id: str) -> dict[str, Any] | None:
        """The request's item, read strongly consistent."""
        response = self._client.get_item(TableName=self._table, Key=state_key(operation_id), ConsistentRead=True)
        return response.get("Item")
