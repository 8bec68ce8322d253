"""converge on the local cloud: template.yaml as deployed, the benchmark's no-op jobs, `enqueue()` as producer."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import boto3
from moto.dynamodb.models import dynamodb_backends

from converge.flow.admission import admit
from converge.model.clock import iso
from converge.model.submission import Submission
from converge.store.operations import OperationStore
from converge_bench import jobs as bench_jobs
from converge_bench import noop_jobs
from converge_bench.harness import DesignRun, TimedHandlers, run_jobs
from converge_bench.meter import ACCOUNT_ID, Meter
from localcloud import LocalCloud

REGION = "us-east-1"
WORKER = "DefaultWorkerFunction"  # the benchmark jobs run on the default queue
RELAY = "OutboxRelayFunction"
WARM_UP_JOBS = 20


@dataclass
class ConvergeBench:
    cloud: Any
    meter: Meter
    timers: TimedHandlers
    operations: OperationStore

    def run(
        self,
        jobs: int,
        job_type: str = bench_jobs.NOOP,
        prefix: str = "op",
        delay_seconds: float | None = None,
        follow: Callable[[str], None] | None = None,
        payload_of: Callable[[int], dict[str, Any]] | None = None,
    ) -> DesignRun:
        """N jobs end to end; `delay_seconds` times each that far ahead (`run_at`), on the cloud's clock; `payload_of`
        the i-th job's payload (by default an item of its own); `follow` is called with each operation id once the
        cloud is quiet (a signal sent to it), then the cloud drains."""

        def produce(index: int) -> None:
            now = self.cloud.clock.now()
            run_at = iso(now + delay_seconds) if delay_seconds else None
            payload = payload_of(index) if payload_of is not None else {"item_id": f"item-{index}"}
            submission = Submission(job_type, f"{prefix}-{index:07d}", payload, run_at=run_at)
            admit(self.cloud.registry, self.operations, submission, now)

        then = (lambda index: follow(f"{prefix}-{index:07d}")) if follow is not None else None
        run = run_jobs(
            "converge",
            self.cloud,
            self.meter,
            self.timers,
            produce,
            jobs,
            lambda: noop_jobs.RunnerClock.seconds,
            follow=then,
        )
        run.completed = succeeded(self.cloud.outputs["StateTableName"], prefix)
        return run


@contextlib.contextmanager
def deployed(meter: Meter) -> Iterator[ConvergeBench]:
    """template.yaml in a fresh moto, its functions loading the bench's catalogue (converge_bench.jobs)."""
    with LocalCloud.start(catalogue=bench_jobs.__name__) as cloud:
        # The local cloud's own pollers, and its emulation of Scheduler firing a one-time schedule.
        services = ("sqs", "dynamodbstreams", "dynamodb", "ssm", "scheduler")
        meter.mark_platform(*(cloud.client(service) for service in services))
        producer = boto3.session.Session(region_name=REGION).client("dynamodb")
        operations = OperationStore(cloud.outputs["JobsTableName"], cloud.outputs["StateTableName"], producer)
        timers = TimedHandlers(
            cloud, meter, [RELAY, WORKER], replay=[WORKER], runner_clock=lambda: noop_jobs.RunnerClock.seconds
        )
        bench = ConvergeBench(cloud, meter, timers, operations)
        bench.run(WARM_UP_JOBS, prefix="warm")  # cold starts, first client and toggle reads: not per job
        yield bench


def succeeded(table_name: str, prefix: str) -> int:
    """SUCCEEDED operations whose id starts with `prefix`, read from moto's state table (no API call)."""
    table = dynamodb_backends[ACCOUNT_ID][REGION].get_table(table_name)
    return sum(
        1
        for item in table.all_items()
        if item.attrs["operation_id"].value.startswith(f"{prefix}-") and _state(item) == "SUCCEEDED"
    )


def _state(item: Any) -> str | None:
    state = item.attrs.get("state")
    return state.value if state is not None else None
