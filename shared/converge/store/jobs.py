"""The jobs table: the producers' requests, one item each, whose stream is the outbox.

Producers write it (a plain PutItem, or inside their own transaction); converge writes a request only for
its own enqueue, conditional on the id being new, and reads one back. It never updates an item.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from converge.model.request import JobRequest
from converge.store.codecs import request_item, state_key
from converge.store.conditions import condition_failed, failed_item
from converge.store.transact import TransactItem

PARENT_ATTRIBUTE = "parent_id"
"""On a continuation's request, the operation whose settle wrote it (converge writes it; shown on the receipt,
never trusted for anything: a producer's item may carry any attribute)."""


class JobsTable:
    """Writes and reads of the jobs table (the requests)."""

    def __init__(self, table_name: str, dynamodb_client: Any) -> None:
        self._table = table_name
        self._client = dynamodb_client

    def put_request(
        self,
        job_type: str,
        operation_id: str,
        payload: dict[str, Any],
        correlation_id: str | None = None,
        submitted_by: str | None = None,
        run_at: str | None = None,
        expires_at: str | None = None,
    ) -> dict[str, Any]:
        """The `Put` entry for a producer's own TransactWriteItems (business write and job, atomically): the
        request, unless its id exists (then the transaction is cancelled with the item that exists)."""
        request = JobRequest(
            operation_id, job_type, payload, correlation_id, submitted_by, run_at=run_at, expires_at=expires_at
        )
        return {
            "Put": {
                "TableName": self._table,
                "Item": request_item(request),
                "ConditionExpression": "attribute_not_exists(operation_id)",
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        }

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

    def put(self, put: dict[str, Any]) -> tuple[bool, dict[str, Any] | None]:
        """Make a `put_request` Put on its own: (True, None) when written, else (False, the item that holds the
        id; None if it was deleted meanwhile)."""
        try:
            self._client.put_item(**put["Put"])
        except ClientError as exc:
            if not condition_failed(exc):
                raise
            return False, failed_item(exc) or self.item(put["Put"]["Item"]["operation_id"]["S"])
        return True, None

    def item(self, operation_id: str) -> dict[str, Any] | None:
        """The request's item, read strongly consistent."""
        response = self._client.get_item(TableName=self._table, Key=state_key(operation_id), ConsistentRead=True)
        return response.get("Item")
