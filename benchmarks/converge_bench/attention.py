"""Listing an attention state must cost the result, not the table: read units of one page at two table sizes.

Two copies of the deployed state table (same keys, same sparse indexes) are filled straight into
moto's backend (fast, and no API calls to count): a fixed number of FAILED operations, the rest
SUCCEEDED (which carry no `attention` keys). One `OperationStore.list_attention` page is then read
through the metered API from each.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import boto3
from moto.dynamodb.models import dynamodb_backends

from converge.model.states import OperationState
from converge.store.operations import OperationStore
from converge_bench.meter import ACCOUNT_ID, Meter

REGION = "us-east-1"
IN_ATTENTION = 60
PAGE = 50


@dataclass(frozen=True)
class AttentionCost:
    table_items: int
    in_attention: int
    page_items: int
    read_units: float


def _copy_schema(client: Any, source: str, name: str) -> str:
    table = client.describe_table(TableName=source)["Table"]
    client.create_table(
        TableName=name,
        AttributeDefinitions=table["AttributeDefinitions"],
        KeySchema=table["KeySchema"],
        BillingMode="PAY_PER_REQUEST",
        GlobalSecondaryIndexes=[
            {"IndexName": index["IndexName"], "KeySchema": index["KeySchema"], "Projection": index["Projection"]}
            for index in table.get("GlobalSecondaryIndexes", [])
        ],
    )
    return name


def _item(index: int, failed: bool) -> dict[str, Any]:
    at = f"2025-01-01T00:{index // 60 % 60:02d}:{index % 60:02d}Z"
    state = "FAILED" if failed else "SUCCEEDED"
    item: dict[str, Any] = {
        "operation_id": {"S": f"bulk-{index:07d}"},
        "job_type": {"S": "bench.noop.v1"},
        "state": {"S": state},
        "fingerprint": {"S": "0" * 32},
        "attempts": {"N": "1"},
        "history": {"L": [{"M": {"state": {"S": state}, "at": {"S": at}, "reason": {"S": "benchmark fill"}}}]},
        "created_at": {"S": at},
        "updated_at": {"S": at},
    }
    if failed:
        item["attention"] = {"S": "FAILED"}
        item["attention_sk"] = {"S": f"bench.noop.v1#{at}"}
        item["last_error"] = {"S": "TransientError: benchmark fill"}
    return item


def fill(table_name: str, items: int, in_attention: int = IN_ATTENTION) -> None:
    """Write `items` operations into moto's backend directly, `in_attention` of them FAILED, spread evenly."""
    table = dynamodb_backends[ACCOUNT_ID][REGION].get_table(table_name)
    step = max(1, items // in_attention)
    for index in range(items):
        table.put_item(_item(index, failed=index % step == 0 and index // step < in_attention))


def measure(meter: Meter, state_table: str, sizes: tuple[int, ...] = (1_000, 100_000)) -> list[AttentionCost]:
    """Read units of one page of FAILED operations from a copy of `state_table` at each size."""
    client = boto3.session.Session(region_name=REGION).client("dynamodb")
    results = []
    for size in sizes:
        name = _copy_schema(client, state_table, f"{state_table}-attention-{size}")
        fill(name, size)
        store = OperationStore("unused-jobs-table", name, client)
        before = meter.snapshot()
        page = store.listings.list_attention(OperationState.FAILED, limit=PAGE)
        used = meter.since(before)
        results.append(AttentionCost(size, IN_ATTENTION, len(page.operations), used.application.read_units))
        client.delete_table(TableName=name)
    return results
