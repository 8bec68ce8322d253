"""The enqueue API through the local cloud: template.yaml deployed once per module, workers replaced by recorders.

The relay runs for real, so an admitted operation is dispatched exactly as on AWS; the workers only
record what reached their queue, so "one dispatch" is counted at the queue, free of job retries.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from catalogue.demo import example_payloads
from localcloud import LocalCloud
from localcloud.http_api import HttpResponse

API_FUNCTION = "EnqueueApiFunction"
WORKERS = ("CriticalWorkerFunction", "DefaultWorkerFunction", "BulkWorkerFunction")
RESET = "email.password-reset.v1"


def signed_by(access_key: str) -> dict[str, str]:
    """The Authorization header of a SigV4-signed request; the local API derives the caller from its key id."""
    credential = f"{access_key}/20250101/us-east-1/execute-api/aws4_request"
    return {"Authorization": f"AWS4-HMAC-SHA256 Credential={credential}, SignedHeaders=host, Signature=0"}


class QueueRecorder:
    """Stands in for a worker: records every SQS message it is given and reports none failed."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        self.bodies.extend(json.loads(record["body"]) for record in event["Records"])
        return {"batchItemFailures": []}


@dataclass
class Producer:
    """One calling service: its SigV4 identity and requests to the enqueue API."""

    cloud: LocalCloud
    access_key: str

    def post(
        self,
        job_type: str,
        payload: Any,
        key: str | None,
        *,
        correlation_id: str | None = None,
        raw_body: str | None = None,
    ) -> HttpResponse:
        headers = signed_by(self.access_key)
        if key is not None:
            headers["Idempotency-Key"] = key
        if correlation_id is not None:
            headers["X-Correlation-Id"] = correlation_id
        body = raw_body if raw_body is not None else json.dumps(payload)
        return self.cloud.http("POST", f"/jobs/{job_type}", headers=headers, body=body)

    def status(self, operation_id: str) -> HttpResponse:
        return self.cloud.http("GET", f"/operations/{operation_id}", headers=signed_by(self.access_key))


@dataclass
class ApiCloud:
    cloud: LocalCloud
    workers: dict[str, QueueRecorder]

    def producer(self, access_key: str) -> Producer:
        return Producer(self.cloud, access_key)

    @property
    def jobs_table(self) -> str:
        return self.cloud.outputs["JobsTableName"]

    @property
    def idempotency_table(self) -> str:
        return self.cloud.outputs["IdempotencyTableName"]

    def operation_ids(self) -> list[str]:
        """Every operation in the jobs table (one item each)."""
        items = self.cloud.client("dynamodb").scan(TableName=self.jobs_table, ProjectionExpression="operation_id")
        return [item["operation_id"]["S"] for item in items["Items"]]

    def dispatches(self, operation_id: str) -> int:
        """How many messages for this operation reached a queue (after the pipeline has drained)."""
        self.cloud.drain()
        return sum(body["operation_id"] == operation_id for w in self.workers.values() for body in w.bodies)

    def request_records(self) -> list[dict[str, Any]]:
        return self.cloud.client("dynamodb").scan(TableName=self.idempotency_table)["Items"]

    def expire_request_record(self, operation_id: str, how: str) -> None:
        """End the retention window of the request that created `operation_id`: as DynamoDB's TTL does
        ("deleted"), or as Powertools sees it before TTL gets to it ("lapsed": stored, `expiration` past)."""
        dynamodb = self.cloud.client("dynamodb")
        [record] = [r for r in self.request_records() if operation_id in r.get("data", {}).get("S", "")]
        key = {"id": record["id"]}
        if how == "deleted":
            dynamodb.delete_item(TableName=self.idempotency_table, Key=key)
        else:  # DynamoDB's TTL deletes lazily (up to days later); Powertools compares `expiration` itself
            dynamodb.update_item(
                TableName=self.idempotency_table,
                Key=key,
                UpdateExpression="SET expiration = :past",
                ExpressionAttributeValues={":past": {"N": "1"}},
            )


@pytest.fixture(scope="module")
def api_cloud() -> Iterator[ApiCloud]:
    with LocalCloud.start() as cloud:
        workers = {logical_id: QueueRecorder() for logical_id in WORKERS}
        for logical_id, recorder in workers.items():
            cloud.override_handler(logical_id, recorder)
        yield ApiCloud(cloud, workers)


@pytest.fixture
def payloads() -> dict[str, dict[str, Any]]:
    """The catalogue's example payload per job type (valid messages; enqueue only validates them)."""
    return example_payloads()


_callers = iter(range(1, 1_000_000))


@pytest.fixture
def producer(api_cloud: ApiCloud) -> Producer:
    """A calling service of its own per test, so Idempotency-Keys never collide across tests."""
    return api_cloud.producer(f"AKIDPRODUCER{next(_callers):06d}")
