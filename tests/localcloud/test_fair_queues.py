"""Tenant fairness: the relay puts a binding's tenant into the message group, and the local cloud's SQS source
serves a quiet group before a flooded group's backlog (approximately, as SQS fair queues do)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from catalogue import examples
from localcloud import LocalCloud
from localcloud.workload import Workload

WORKER = "DefaultWorkerFunction"
DOCS = "partner-docs.upload.v1"  # tenant_field="partner_id"


class BatchRecorder:
    """Stands in for the worker: records each batch's operation ids and message groups, fails none."""

    def __init__(self) -> None:
        self.batches: list[list[tuple[str, str | None]]] = []

    def __call__(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        self.batches.append(
            [
                (json.loads(record["body"])["operation_id"], record["attributes"].get("MessageGroupId"))
                for record in event["Records"]
            ]
        )
        return {"batchItemFailures": []}

    def batch_of(self, operation_id: str) -> int:
        return next(i for i, batch in enumerate(self.batches, 1) if operation_id in {op for op, _ in batch})


@pytest.fixture(scope="module")
def cloud() -> Iterator[LocalCloud]:
    with LocalCloud.start() as started:
        yield started


@pytest.fixture
def recorder(cloud: LocalCloud) -> Iterator[BatchRecorder]:
    recorder = BatchRecorder()
    cloud.override_handler(WORKER, recorder)
    yield recorder
    cloud.override_handler(WORKER, None)


def flood(cloud: LocalCloud, tenant: str, count: int, prefix: str) -> None:
    """`count` messages of one tenant sent to the queue the way the relay sends them (its message group set)."""
    sqs, url = cloud.client("sqs"), cloud.outputs["DefaultQueueUrl"]
    for start in range(0, count, 10):
        entries = [
            {
                "Id": str(index),
                "MessageBody": json.dumps(
                    {"v": 1, "operation_id": f"{prefix}-{index}", "job_type": DOCS, "payload": {"partner_id": tenant}}
                ),
                "MessageGroupId": tenant,
            }
            for index in range(start, min(start + 10, count))
        ]
        sqs.send_message_batch(QueueUrl=url, Entries=entries)


def test_the_relay_sends_the_tenant_as_the_message_group(cloud: LocalCloud, recorder: BatchRecorder) -> None:
    # Given a job whose binding names partner_id as its tenant field
    Workload(cloud).converge.enqueue(DOCS, "tenant-doc-1", {"partner_id": examples.PARTNER, "upload_id": "up-9"})
    # When the relay dispatches it / Then its message carries the partner as its message group
    cloud.drain()
    assert [entry for batch in recorder.batches for entry in batch] == [("tenant-doc-1", examples.PARTNER)]


def test_one_tenants_flood_delays_another_tenants_few_by_at_most_one_batch(
    cloud: LocalCloud, recorder: BatchRecorder
) -> None:
    # Given no flood: tenant B's 5 messages alone / Then they are done in the first batch
    flood(cloud, "p-tenant-b", 5, "quiet")
    cloud.drain()
    alone = max(recorder.batch_of(f"quiet-{index}") for index in range(5))
    assert alone == 1
    recorder.batches.clear()
    # Given tenant A's 500 messages already queued, then tenant B's 5
    flood(cloud, "p-tenant-a", 500, "noisy")
    flood(cloud, "p-tenant-b", 5, "few")
    # When the worker's event source serves the queue
    cloud.drain()
    # Then B's 5 are done within one batch of when they would be with no flood (not after A's 50 batches)
    flooded = max(recorder.batch_of(f"few-{index}") for index in range(5))
    assert flooded <= alone + 1, flooded
    assert len(recorder.batches) == 51 and sum(len(batch) for batch in recorder.batches) == 505
    # And A's own messages keep their order among themselves
    noisy = [int(op.split("-")[1]) for batch in recorder.batches for op, _ in batch if op.startswith("noisy")]
    assert noisy == sorted(noisy)
