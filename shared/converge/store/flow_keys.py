"""The flow controls' key items in the markers table: a limiter's, a cap's and a debounced job type's keys each share
a partition (`pk`), one item per key (`sk` = "key#<key>"); an operator's listing reads a partition whole."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from converge.store.codecs import string_value

KEY_SK = "key#"


def key_item(pk: str, key: str) -> dict[str, Any]:
    """The table key of one key's item in the partition `pk`."""
    return {"pk": string_value(pk), "sk": string_value(KEY_SK + key)}


def key_items(client: Any, table: str, pk: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """Each key's item in the partition, with its key: one Query (more pages only for many keys)."""
    pages = client.get_paginator("query").paginate(
        TableName=table, KeyConditionExpression="pk = :pk", ExpressionAttributeValues={":pk": string_value(pk)}
    )
    for page in pages:
        for item in page["Items"]:
            sk = item["sk"]["S"]  # a Query's items carry their table key
            if sk.startswith(KEY_SK):
                yield sk[len(KEY_SK) :], item
