"""What a batch costs on the local cloud: its admission's time, its write units per child against a plain job, its
callback's latency after the last child, and the counting items' peak write rate at 5,000 children a second.

A batch of N no-op children (`bench.noop.v1`, the plain job's type) and a no-op callback is admitted by a producer
and run to completion, metered whole: admission, every child's delivery, the completion and the callback's own run.
Its write units per child are that total over N; a plain job's, those of the same job enqueued alone (a sample).

The peak per-item rate comes from the meter's log of every item write, in the order they happened: the k-th child
to be written in the state table (its first write: the child begins) is placed at k / 5,000 s, every other write at
the time of the child before it, and each item's write units are summed over every one-second window. That is the
rate each item would take if the children had run at 5,000 a second in the order they did here, the batch counter
gathering them as the local cloud's stream mapping gave them to it (the local cloud runs the children one at a
time; DynamoDB's limit is about 1,000 write units a second per partition, so PASS is below that).
"""

from __future__ import annotations

import time
from bisect import bisect_right
from collections import defaultdict
from typing import Any

import boto3

from converge.flow.batches import Batches
from converge.model.batches import CALLBACK_SUFFIX, BatchCallback, BatchChild, callback_id
from converge.model.submission import batch_submission
from converge.model.timing import parse_instant
from converge.store.batches import BatchesTable
from converge_bench import jobs as bench_jobs
from converge_bench.converge_design import REGION

CHILDREN_PER_SECOND = 5_000
"""The rate the issue asks the counting to bear (children made final per second)."""
PER_ITEM_LIMIT = 1_000.0
"""DynamoDB's write capacity per partition, per second (write units): an item over it throttles."""
EXTRA_WRITE_UNITS_TARGET = 1.0
"""A child may cost at most this many write units more than a plain job."""
PLAIN_SAMPLE = 200
EXTRA_NOTE = (
    "a child settles with one plain write, as a plain job does; the batch counter counts it from the state table's "
    "stream, one 1-unit write per counting shard per stream batch: at most +1 a child, less when children finish "
    "together (docs/batches.md, 'Where it is stored, and what it costs')"
)


def measure(bench: Any, sizes: tuple[int, ...], say: Any = lambda message: None) -> dict[str, Any]:
    """A row per batch size, and the plain job it is compared with."""
    bench.timers.replaying = False  # cost and time, not the per-message overhead (measured by the main rounds)
    try:
        say(f"converge: a plain job's write units ({PLAIN_SAMPLE} jobs), to compare each child with")
        plain = bench.run(PLAIN_SAMPLE, job_type=bench_jobs.NOOP, prefix="batch-plain")
        plain_units = plain.usage.application.write_units / plain.jobs
        rows = []
        for size in sizes:
            say(f"converge: a batch of {size:,} children, admitted, run and completed")
            rows.append(_batch_row(bench, size, plain_units))
    finally:
        bench.timers.replaying = True
    return {"plain_write_units_per_job": round(plain_units, 4), "rows": rows}


def _batch_row(bench: Any, size: int, plain_units: float) -> dict[str, Any]:
    cloud, meter = bench.cloud, bench.meter
    outputs = cloud.outputs
    batch_id = f"bench-{size}"
    producer = boto3.session.Session(region_name=REGION).client("dynamodb")  # a producer's own client, metered
    batches = Batches(
        cloud.registry, BatchesTable(outputs["BatchesTableName"], outputs["JobsTableName"], producer), cloud.clock
    )
    children = [BatchChild(f"c{index}", bench_jobs.NOOP, {"item_id": f"item-{index}"}) for index in range(size)]
    callback = BatchCallback(bench_jobs.BATCH_DONE, {})
    before = meter.snapshot()
    meter.item_writes = []
    started = time.perf_counter()
    try:
        admitted = batches.admit(batch_submission(batch_id, children, callback))
        admission_seconds = time.perf_counter() - started
        admission = meter.since(before)
        stats = cloud.drain(max_rounds=1_000_000)
        run_seconds = time.perf_counter() - started
        writes = meter.item_writes
    finally:
        meter.item_writes = None
    usage = meter.since(before).application
    batch = batches.require(batch_id)
    per_child = usage.write_units / size
    extra = per_child - plain_units
    peak_item, peak = peak_item_rate(writes, f'"{batch_id}::', CHILDREN_PER_SECOND)
    latency = _callback_latency(bench, batch)
    return {
        "children": size,
        "created": admitted.created,
        "state": batch.state.value,
        "counts": dict(batch.counts),
        "drained": stats.quiescent,
        "admission_seconds": round(admission_seconds, 3),
        "admission_write_units_per_child": round(admission.application.write_units / size, 4),
        "write_units_per_child": round(per_child, 4),
        "extra_write_units_per_child": round(extra, 4),
        "extra_write_units_target": EXTRA_WRITE_UNITS_TARGET,
        "extra_write_units_limit": EXTRA_WRITE_UNITS_TARGET,
        "extra_write_units_pass": extra <= EXTRA_WRITE_UNITS_TARGET,
        "extra_write_units_note": EXTRA_NOTE,
        "read_units_per_child": round(usage.read_units / size, 4),
        "callback_latency_seconds": latency,
        "counting_shards": batch.shards,
        "peak_item": peak_item,
        "peak_item_write_units_per_second": round(peak, 1),
        "peak_item_limit": PER_ITEM_LIMIT,
        "peak_item_pass": peak < PER_ITEM_LIMIT,
        "seconds": round(run_seconds, 1),
    }


def peak_item_rate(writes: list[tuple[str, float]], child_prefix: str, rate: float) -> tuple[str | None, float]:
    """The item with the most write units in any one second, and those units, were the children run at `rate` a
    second in the order logged (the first write to an item whose key holds `child_prefix`, not a callback's, is one
    child begun)."""
    times: dict[str, list[float]] = defaultdict(list)
    units: dict[str, list[float]] = defaultdict(list)
    counted = 0
    begun: set[str] = set()
    for item, written in writes:
        if child_prefix in item and CALLBACK_SUFFIX not in item and item not in begun:
            begun.add(item)
            counted += 1
        times[item].append(counted / rate)
        units[item].append(written)
    best: tuple[str | None, float] = (None, 0.0)
    for item, at in times.items():
        total = [0.0]
        for value in units[item]:
            total.append(total[-1] + value)
        for start, moment in enumerate(at):  # the window [moment, moment + 1 s)
            end = bisect_right(at, moment + 1.0 - 1e-9)
            window = total[end] - total[start]
            if window > best[1]:
                best = (item, window)
    return best


def _callback_latency(bench: Any, batch: Any) -> float | None:
    """Seconds on the local cloud's clock from the batch's completion (written by the batch counter, in the
    invocation given the last child's change) to its callback's SUCCEEDED."""
    callback = bench.operations.state.record(callback_id(batch.batch_id))
    done = [entry.at for entry in callback.history if entry.state == "SUCCEEDED"]
    if not done or not batch.completed_at:
        return None
    return round(parse_instant("at", done[0]) - parse_instant("completed_at", batch.completed_at), 3)


def targets(figures: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Each row's two targets: write units per child over a plain job (with why it fails), and the hottest item."""
    found: list[dict[str, Any]] = []
    for row in (figures or {}).get("rows", []):
        size = f"{row['children']:,}"
        found.append(
            {
                "name": f"batch of {size}: write units per child over a plain job",
                "value": row["extra_write_units_per_child"],
                "limit": EXTRA_WRITE_UNITS_TARGET,
                "pass": row["extra_write_units_pass"],
                "note": row["extra_write_units_note"],
            }
        )
        found.append(
            {
                "name": f"batch of {size}: peak write units a second on one item, children final at "
                f"{CHILDREN_PER_SECOND:,} a second",
                "value": row["peak_item_write_units_per_second"],
                "limit": PER_ITEM_LIMIT,
                "pass": row["peak_item_pass"],
            }
        )
    return found
