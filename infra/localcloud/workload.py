"""A mixed workload for the local cloud: enqueue the catalogue's jobs in waves, drain, settle, reset.

Used by `converge demo --chaos` (10,000 jobs) and by the fault tests (a few operations per example,
a few hundred for the small load). The mix is the catalogue's (its local hooks' `workload()`, valid
against the demo data its `seed` writes) plus raw items a producer got wrong.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from moto.dynamodb.models import dynamodb_backends
from moto.s3.models import s3_backends
from moto.ses.models import ses_backends
from moto.sqs.models import sqs_backends

from converge.flow.registry import toggle_key
from converge.model.request import JobRequest
from converge.model.states import OperationState
from converge.runtime import Converge
from converge.runtime.clients import Clients
from converge.runtime.settings import Settings
from converge.store.codecs import request_from_image, request_item

from . import effects
from .clients import ACCOUNT_ID
from .cloud import DrainStats

RECONCILER = "ReconcilerFunction"
RESUMER_SWEEP_SECONDS = 300
"""The template's resumer schedule (rate(5 minutes)): how far to move the clock to let it fire."""

RAW_BAD_WEIGHT = 1
"""Weight of raw producer items with an unknown job type (REJECTED at the relay, with the reason)."""
UNKNOWN_JOB_TYPE = "unknown.no-such-job.v1"

OWNED_ATTRIBUTES: tuple[tuple[str, dict[str, Any]], ...] = (
    # Attributes converge owns, as a producer might write them: wrong types, and values converge never wrote.
    ("state", {"S": "SUCCEEDED"}),
    ("state", {"S": "BOGUS"}),
    ("state", {"N": "3"}),
    ("attempts", {"S": "many"}),
    ("attempts", {"N": "99"}),
    ("history", {"S": "not a list"}),
    ("history", {"L": [{"S": "x"}, {"N": "1"}]}),
    ("fingerprint", {"S": "0" * 32}),
    ("lease_owner", {"S": "someone-else"}),
    ("lease_until", {"N": "99999999999"}),
    ("attention", {"S": "FAILED"}),
    ("last_error", {"BOOL": True}),
    ("redrives", {"L": []}),
)


@dataclass
class Enqueued:
    operation_ids: list[str] = field(default_factory=list)
    by_job_type: Counter[str] = field(default_factory=Counter)
    rewrites_after: list[dict[str, Any]] = field(default_factory=list)
    """Items a faulty producer writes again once the wave has run (see `rewrite_after`)."""


class Workload:
    """Enqueue jobs into one LocalCloud (outside any invocation, so injected faults never hit admission)."""

    def __init__(self, cloud: Any, rng: random.Random | None = None) -> None:
        self.cloud = cloud
        self.rng = rng or random.Random(0)
        self.unquiet: list[DrainStats] = []
        """Each drain that stopped at `max_rounds` with work still coming (a reader may clear it)."""
        outputs = cloud.outputs
        settings = Settings(
            JOBS_TABLE=outputs["JobsTableName"],
            MARKERS_TABLE=outputs["MarkersTableName"],
            BATCHES_TABLE=outputs.get("BatchesTableName"),
            STATE_TABLE=outputs["StateTableName"],
            TOGGLE_PREFIX=outputs["TogglePrefix"],
            ATTENTION_INDEX=outputs.get("AttentionIndexName", "attention-index"),
            CRITICAL_QUEUE_URL=outputs["CriticalQueueUrl"],
            DEFAULT_QUEUE_URL=outputs["DefaultQueueUrl"],
            BULK_QUEUE_URL=outputs["BulkQueueUrl"],
            SCHEDULE_GROUP=outputs.get("ScheduleGroupName"),
        )
        clients = Clients(
            dynamodb=cloud.client("dynamodb"),
            sqs=cloud.client("sqs"),
            ssm=cloud.client("ssm"),
            scheduler=cloud.client("scheduler"),
        )
        self.converge = Converge(settings, registry=cloud.registry, clients=clients, clock=cloud.clock)
        self.mix = list(cloud.hooks.workload())
        if not self.mix:
            raise ValueError(f"the catalogue {cloud.catalogue!r} offers no workload (no job with an example payload)")
        self._weights = [weight for *_, weight in self.mix] + [RAW_BAD_WEIGHT]

    # -- set-up ---------------------------------------------------------------------------------------------

    def prepare(self) -> None:
        """Seed the catalogue's demo data, count effects, and let its hooks ready the run (e.g. a toggle on)."""
        self.cloud.hooks.seed(self.cloud.clients, self.cloud.outputs, now=self.cloud.clock.now())
        effects.instrument(self.cloud)
        self.cloud.hooks.prepare_workload(self.cloud)

    def set_toggle(self, job_type: str, value: str) -> None:
        self.cloud.client("ssm").put_parameter(
            Name=f"{self.cloud.outputs['TogglePrefix']}/{toggle_key(job_type)}",
            Value=value,
            Type="String",
            Overwrite=True,
        )

    def provider_faults(self, on: bool) -> None:
        """The catalogue's own providers misbehave (or stop misbehaving), as its hooks define it."""
        self.cloud.hooks.provider_faults(self.cloud, on)

    # -- enqueueing -----------------------------------------------------------------------------------------

    def enqueue(self, job_type: str, operation_id: str, payload: dict[str, Any]) -> str:
        self.converge.enqueue(job_type, operation_id, payload, correlation_id=f"corr-{operation_id}")
        return operation_id

    def enqueue_raw(self, item: dict[str, Any]) -> str:
        """A producer's own PutItem, unchecked (as `aws dynamodb put-item` would write it)."""
        self.cloud.client("dynamodb").put_item(TableName=self.cloud.outputs["JobsTableName"], Item=item)
        return str(item["operation_id"]["S"])

    def enqueue_mix(self, count: int, prefix: str, into: Enqueued | None = None, faults: Any = None) -> Enqueued:
        """`count` jobs drawn from the catalogue's mix (and a few raw items of an unknown job type).

        With a fault injector, some are written as a faulty producer would (its producer faults):
        with attributes converge owns, written again with the same content, or with other content,
        before the job runs or after it (`rewrite_after`).
        """
        done = into or Enqueued()
        for _ in range(count):
            operation_id = f"{prefix}-{len(done.operation_ids):06d}"
            choice = self.rng.choices(range(len(self._weights)), self._weights)[0]
            done.operation_ids.append(operation_id)
            if choice == len(self.mix):
                self.enqueue_raw(
                    {
                        "operation_id": {"S": operation_id},
                        "job_type": {"S": UNKNOWN_JOB_TYPE},
                        "payload": {"M": {"id": {"S": "x-1"}}},
                    }
                )
                done.by_job_type["(unknown job type)"] += 1
                continue
            job_type, payload, _ = self.mix[choice]
            done.by_job_type[job_type] += 1
            if faults is None:
                self.enqueue(job_type, operation_id, payload)
                continue
            self._enqueue_as_faulty_producer(faults, done, operation_id, job_type, payload)
        return done

    def _enqueue_as_faulty_producer(
        self, faults: Any, done: Enqueued, operation_id: str, job_type: str, payload: dict[str, Any]
    ) -> None:
        from .faults import FaultKind

        item = request_item(JobRequest(operation_id, job_type, payload, f"corr-{operation_id}"))
        log = faults.operations[operation_id]
        if faults.producer_fault(FaultKind.PRODUCER_OWNED_ATTRIBUTES, operation_id):
            owned = dict(self.rng.sample(OWNED_ATTRIBUTES, self.rng.randint(1, 3)))
            item = {**item, **owned}
            log.owned_attributes = sorted(owned)
            log.original = (job_type, payload)
            self.enqueue_raw(item)
        else:
            self.enqueue(job_type, operation_id, payload)
        if faults.producer_fault(FaultKind.PRODUCER_RETRY_SAME, operation_id):
            self._rewrite(done, log, item, when=self.rng.choice(("before", "after")))
        if faults.producer_fault(FaultKind.PRODUCER_RETRY_OTHER, operation_id):
            other_type, other_payload, _ = self.rng.choice(
                [entry for entry in self.mix if (entry[0], entry[1]) != (job_type, payload)]
            )
            other = request_item(JobRequest(operation_id, other_type, other_payload, f"corr-{operation_id}"))
            log.original = (job_type, payload)
            self._rewrite(done, log, other, when=self.rng.choice(("before", "after")))

    def _rewrite(self, done: Enqueued, log: Any, item: dict[str, Any], when: str) -> None:
        request = request_from_image(item)
        log.rewrites.append((when, request.job_type, request.payload))
        if when == "before":
            self.enqueue_raw(item)  # a retry right after a timeout: before the job runs
        else:
            done.rewrites_after.append(item)

    def rewrite_after(self, done: Enqueued) -> int:
        """The faulty producer's late writes (after the jobs ran); returns how many were written."""
        items, done.rewrites_after = done.rewrites_after, []
        for item in items:
            self.enqueue_raw(item)
        return len(items)

    # -- running --------------------------------------------------------------------------------------------

    max_rounds = 100_000
    """The rounds a drain may take (a chaos run of thousands of jobs takes thousands); past them it stops unquiet."""

    def drain(self) -> DrainStats:
        """Every source until quiet (`LocalCloud.drain`); a drain that stops unquiet is noted in `unquiet`."""
        stats = self.cloud.drain(max_rounds=self.max_rounds)
        if not stats.quiescent:
            self.unquiet.append(stats)
        return stats

    def settle(self, rounds: int = 3) -> None:
        """Drain, let the resumer's schedule fire until no PAUSED operation of an enabled job is left,
        then run the reconciler once (it lists what nothing will move on, and dispatches what is safe)."""
        self.drain()
        for _ in range(rounds):
            if not self._paused():
                break
            self.cloud.advance(RESUMER_SWEEP_SECONDS)
            self.cloud.tick_schedules()
            self.drain()
        self.reconcile()

    def reconcile(self) -> Any:
        """One run of the template's reconciler (as its schedule would), then drain what it dispatched."""
        summary = self.cloud.invoke(RECONCILER, {})
        self.drain()
        return summary

    def _paused(self) -> bool:
        page = self.converge.operations.listings.list_attention(OperationState.PAUSED, limit=1)
        return bool(page.operations)


def reset(cloud: Any, workload: Workload | None = None) -> None:
    """Empty what a run leaves behind (operations, markers, ledger, outputs, mail, queues) and reseed.

    Straight in moto's backends, so that no stream records or receive counts are left for the next
    run; the deployed resources, the emulator's state and the loaded functions stay as they are.
    """
    region = cloud.clients.region
    outputs = cloud.outputs
    tables = dynamodb_backends[ACCOUNT_ID][region].tables
    sources = cloud.hooks.effects
    catalogue_tables = (*sources.app_table_outputs, *([sources.ledger_output] if sources.ledger_output else []))
    for name in ("JobsTableName", "StateTableName", "MarkersTableName", "BatchesTableName", *catalogue_tables):
        if name in outputs:
            tables[outputs[name]].items.clear()
    bucket = outputs.get(sources.bucket_output) if sources.bucket_output else None
    if bucket and sources.object_prefixes:
        store = s3_backends[ACCOUNT_ID]["aws"].buckets[bucket].keys
        for key in [key for key in list(store.keys()) if key.startswith(sources.object_prefixes)]:
            store.pop(key)
    ses_backends[ACCOUNT_ID][region].sent_messages.clear()
    for queue in sqs_backends[ACCOUNT_ID][region].queues.values():
        with queue._messages_lock:
            queue._messages.clear()
    for source in cloud.stream_sources:  # what the emptied tables' streams still held is not delivered
        source.skip_to_latest()
    cloud.one_time_schedules.reset()  # failing deliveries and their pending retries
    group = outputs.get("ScheduleGroupName")
    if group:  # delayed operations' one-time schedules
        scheduler = cloud.client("scheduler")
        for schedule in scheduler.list_schedules(GroupName=group).get("Schedules", []):
            scheduler.delete_schedule(Name=schedule["Name"], GroupName=group)
    (workload or Workload(cloud)).prepare()


def timed(action: Callable[[], Any]) -> tuple[Any, float]:
    started = time.perf_counter()
    result = action()
    return result, time.perf_counter() - started
