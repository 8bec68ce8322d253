"""The effect counter: what the team's own resources accepted from its functions, read by operation id.

Counted where the effects land, never from converge's records: each write a function made to a table, bucket,
topic or queue the template declares, or an e-mail SES accepted, with the operation whose record the function was
running (localcloud.effect_log). A resource is named by its logical id in the template (`"OrdersTable"`); e-mail by
`"ses"`. Without an operation id, a count covers every function's calls (a producer's too); `items` and `objects`
without one read what the table or bucket holds now.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from localcloud.effect_log import Effect


class Effects:
    """A live view: every call reads the effects made so far."""

    def __init__(self, local: Any) -> None:
        self._local = local

    @property
    def _log(self) -> Any:
        return self._local.effect_log

    def of(self, operation_id: str) -> dict[str, int]:
        """The operation's effects by resource: distinct items and objects it wrote, messages it sent.

        `{"OrdersTable": 1, "ses": 1}`: one row written (however often), one e-mail sent."""
        return self._log.tally().of(operation_id)

    def made(self, operation_id: str | None = None) -> list[Effect]:
        """Each effect (resource, kind, key, action, operation_id, function_id, at) in the order it was accepted;
        of one operation, or all."""
        return [e for e in self._log.effects if operation_id is None or e.operation_id == operation_id]

    def operations(self) -> set[str]:
        """The operations that made any effect."""
        return {e.operation_id for e in self._log.effects if e.operation_id is not None}

    def emails(self, operation_id: str | None = None) -> int:
        """E-mails SES accepted (SendEmail, SendRawEmail, ...): of one operation, or from every function."""
        return self._count("ses", operation_id, distinct=False)

    def items(self, table: str, operation_id: str | None = None) -> int:
        """Distinct items of the table the operation wrote (put, updated or deleted); without one, the items the
        table holds now."""
        self._require(table, "item")
        if operation_id is not None:
            return self._count(table, operation_id, distinct=True)
        client, name = self._local.client("dynamodb"), self._physical(table)
        pages = client.get_paginator("scan").paginate(TableName=name, Select="COUNT", ConsistentRead=True)
        return sum(page["Count"] for page in pages)

    def writes(self, table: str, operation_id: str | None = None) -> int:
        """Writes to the table the service accepted (one per item of a transaction or batch): of one operation, or
        from every function."""
        self._require(table, "item")
        return self._count(table, operation_id, distinct=False)

    def objects(self, bucket: str, operation_id: str | None = None) -> int:
        """Distinct keys the operation wrote in the bucket; without one, the objects the bucket holds now."""
        self._require(bucket, "object")
        if operation_id is not None:
            return self._count(bucket, operation_id, distinct=True)
        pages = self._local.client("s3").get_paginator("list_objects_v2").paginate(Bucket=self._physical(bucket))
        return sum(page.get("KeyCount", 0) for page in pages)

    def versions(self, bucket: str, operation_id: str | None = None) -> int:
        """Object writes to the bucket the service accepted (an overwrite is a second version): of one operation, or
        from every function."""
        self._require(bucket, "object")
        return self._count(bucket, operation_id, distinct=False)

    def publishes(self, topic: str, operation_id: str | None = None) -> int:
        """Messages the topic accepted: of one operation, or from every function."""
        self._require(topic, "publish")
        return self._count(topic, operation_id, distinct=False)

    def sends(self, queue: str, operation_id: str | None = None) -> int:
        """Messages the queue (one of the template's own, not converge's) accepted: of one operation, or all."""
        self._require(queue, "send")
        return self._count(queue, operation_id, distinct=False)

    def clear(self) -> None:
        """Forget the effects counted so far (what the services hold stays): a test sharing its cloud may start here."""
        self._log.clear()

    # -- helpers -------------------------------------------------------------------------------------------------

    def _count(self, resource: str, operation_id: str | None, distinct: bool) -> int:
        found = [
            e
            for e in self._log.effects
            if e.resource == resource and (operation_id is None or e.operation_id == operation_id)
        ]
        if not distinct:
            return len(found)
        return len({(e.operation_id, e.key) for e in found})

    def _require(self, resource: str, kind: str) -> None:
        known = self._log.resources.logical_ids(kind)
        if resource not in known:
            what = {"item": "tables", "object": "buckets", "publish": "topics", "send": "queues"}[kind]
            raise KeyError(f"{resource!r} is not one of the template's {what} (its logical id): {known}")

    def _physical(self, resource: str) -> str:
        return str(self._log.resources.physical(resource))
