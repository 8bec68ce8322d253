"""The Powertools-only baselines on the local cloud, and their producer.

Two designs share this module: the bare baseline (benchmarks/baseline/template.yaml: a worker that
validates nothing and reads no kill switch) and the same-job baseline (benchmarks/baseline_same_job/:
the same worker also parsing each message with Powertools' parser and reading a fail-closed kill
switch with Powertools' parameters, plus an enqueue API). Both have the same outbox, relay and producer.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
from moto.dynamodb.models import dynamodb_backends

from converge_bench.harness import DesignRun, TimedHandlers, run_jobs
from converge_bench.meter import ACCOUNT_ID, Meter
from localcloud import LocalCloud

BENCHMARKS = Path(__file__).resolve().parents[1]
TEMPLATE = BENCHMARKS / "baseline" / "template.yaml"
REGION = "us-east-1"
WORKER = "WorkerFunction"
RELAY = "RelayFunction"


@dataclass(frozen=True)
class Variant:
    """One Powertools-only design: its template, stack and the logical ids of its relay and worker."""

    name: str
    template: Path
    stack_name: str
    worker: str
    relay: str = RELAY


BARE = Variant("baseline", TEMPLATE, "converge-baseline", WORKER)
SAME_JOB = Variant(
    "same_job", BENCHMARKS / "baseline_same_job" / "template.yaml", "converge-same-job", "SameJobWorkerFunction"
)
JOB_TYPE = "bench.noop.v1"
OUTBOX_RETENTION_SECONDS = 7 * 24 * 3600
WARM_UP_JOBS = 20


@dataclass
class BaselineProducer:
    """The producer's write: the entity and its outbox item in one TransactWriteItems."""

    client: Any
    entity_table: str
    outbox_table: str

    def enqueue(self, operation_id: str, payload: dict[str, Any]) -> None:
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        payload_item = {"M": {key: {"S": str(value)} for key, value in payload.items()}}
        self.client.transact_write_items(
            TransactItems=[
                {
                    "Put": {
                        "TableName": self.entity_table,
                        "Item": {
                            "id": {"S": operation_id},
                            "job_type": {"S": JOB_TYPE},
                            "payload": payload_item,
                            "status": {"S": "PENDING"},
                            "created_at": {"S": now},
                            "updated_at": {"S": now},
                        },
                        "ConditionExpression": "attribute_not_exists(id)",
                    }
                },
                {
                    "Put": {
                        "TableName": self.outbox_table,
                        "Item": {
                            "id": {"S": operation_id},
                            "job_type": {"S": JOB_TYPE},
                            "payload": payload_item,
                            "created_at": {"S": now},
                            "expires_at": {"N": str(int(time.time()) + OUTBOX_RETENTION_SECONDS)},
                        },
                        "ConditionExpression": "attribute_not_exists(id)",
                    }
                },
            ]
        )


@dataclass
class BaselineBench:
    cloud: Any
    meter: Meter
    timers: TimedHandlers
    producer: BaselineProducer
    variant: Variant = BARE

    def run(self, jobs: int, prefix: str = "op") -> DesignRun:
        def produce(index: int) -> None:
            self.producer.enqueue(f"{prefix}-{index:07d}", {"item_id": f"item-{index}"})

        run = run_jobs(self.variant.name, self.cloud, self.meter, self.timers, produce, jobs, lambda: 0.0)
        run.completed = succeeded(self.cloud.outputs["EntityTableName"], prefix)
        return run


@contextlib.contextmanager
def deployed(meter: Meter, variant: Variant = BARE) -> Iterator[BaselineBench]:
    with LocalCloud.start(template_path=variant.template, stack_name=variant.stack_name) as cloud:
        meter.mark_platform(*(cloud.client(service) for service in ("sqs", "dynamodbstreams", "dynamodb", "ssm")))
        producer = BaselineProducer(
            boto3.session.Session(region_name=REGION).client("dynamodb"),
            cloud.outputs["EntityTableName"],
            cloud.outputs["OutboxTableName"],
        )
        timers = TimedHandlers(cloud, meter, [variant.relay, variant.worker], replay=[variant.worker])
        bench = BaselineBench(cloud, meter, timers, producer, variant)
        bench.run(WARM_UP_JOBS, prefix="warm")
        yield bench


def succeeded(table_name: str, prefix: str) -> int:
    table = dynamodb_backends[ACCOUNT_ID][REGION].get_table(table_name)
    return sum(
        1
        for item in table.all_items()
        if item.attrs["id"].value.startswith(f"{prefix}-") and item.attrs["status"].value == "SUCCEEDED"
    )
