"""What flow control costs: a job under a rate limit it never meets, and one under a concurrency cap it never meets,
beside the same no-op job without either.

All run the same way (`ConvergeBench.run`), one after the other, on one deployment: the differences are the rate
limit's reservation in the markers table before the lease, and the cap's slot taken before it and given back after
(docs/flow-control.md). The limiter's key is one (a limiter without a key field), so after the first job the key
is busy and each reservation is one ADD; a job whose guess of the key's state is wrong pays one refused write more.
The cap's key is one too, and made by one job before the sample (its first use, reported apart: a refused take,
then the item holding the slot, one write more once a day per key): the sample is the steady state of a key in use.

A debounced job is measured twice: "debounced", each request an item of its own (a burst of one, which runs: what
the debounce adds to a job that runs), and "debounced_burst", every request of one item, newer and newer, met by
the relay in one stream (one run for the burst: what a request costs when most end NOOP).

The hottest item: a limiter's key is one item, written by every reservation. Its write units per reservation are
measured from the samples (the meter's units per item), and scaled to 1,000 jobs a second of one key, against
DynamoDB's 1,000 write units a second that one partition (so one item) takes; then the same key spread over four
items (`Limiter(shards=4)`), whose hottest item takes its share. A cap's key is measured the same way.
"""

from __future__ import annotations

from typing import Any

from converge_bench import jobs as bench_jobs

HOT_KEY_JOBS_PER_SECOND = 1000
"""The hottest key the figure is for: 1,000 jobs a second of one limiter key (as many as one key paces: its free
time counts whole milliseconds)."""
PER_ITEM_LIMIT = 1000.0
"""DynamoDB serves about 1,000 write units a second to one partition, so to one item."""


def measure(bench: Any, jobs: int) -> dict[str, Any]:
    """Write and read units per job (index writes included) for a plain job and a rate-limited one."""
    figures: dict[str, Any] = {}
    items: dict[str, Any] = {}
    first_use = bench.run(1, job_type=bench_jobs.CAPPED, prefix="limit-first-cap")
    for name, job_type in (
        ("plain", bench_jobs.NOOP),
        ("rate_limited", bench_jobs.LIMITED),
        ("sharded", bench_jobs.SHARDED),
        ("capped", bench_jobs.CAPPED),
    ):
        sample = bench.run(jobs, job_type=job_type, prefix=f"limit-{name}")
        items[name] = (sample.usage.application.item_write_units, sample.jobs)
        figures[name] = _row(job_type, sample)
    figures["debounced"] = _row(
        bench_jobs.DEBOUNCED,
        bench.run(jobs, job_type=bench_jobs.DEBOUNCED, prefix="limit-debounced", payload_of=_item_of_its_own),
    )
    figures["debounced_burst"] = _row(
        bench_jobs.DEBOUNCED,
        bench.run(jobs, job_type=bench_jobs.DEBOUNCED, prefix="limit-burst", payload_of=_one_item),
    )
    plain, limited = figures["plain"], figures["rate_limited"]

    figures["extra_write_units_per_job"] = round(limited["write_units_per_job"] - plain["write_units_per_job"], 4)
    figures["extra_read_units_per_job"] = round(limited["read_units_per_job"] - plain["read_units_per_job"], 4)
    capped = figures["capped"]
    figures["capped_extra_write_units_per_job"] = round(capped["write_units_per_job"] - plain["write_units_per_job"], 4)
    figures["capped_extra_read_units_per_job"] = round(capped["read_units_per_job"] - plain["read_units_per_job"], 4)
    figures["capped_first_use_extra_write_units"] = round(
        first_use.usage.application.write_units - plain["write_units_per_job"], 4
    )
    debounced = figures["debounced"]
    figures["debounced_extra_write_units_per_job"] = round(
        debounced["write_units_per_job"] - plain["write_units_per_job"], 4
    )
    figures["debounced_extra_read_units_per_job"] = round(
        debounced["read_units_per_job"] - plain["read_units_per_job"], 4
    )
    figures["hot_limiter_key"] = _hot_key(*items["rate_limited"], '"limit#')
    # The same key over four items: its hottest item takes about a quarter of the key's writes
    figures["hot_sharded_limiter_key"] = {
        **_hot_key(*items["sharded"], '"limit#'),
        "shards": bench_jobs.BENCH_SHARDED.shards,
    }
    figures["hot_cap_key"] = _hot_key(*items["capped"], '"running#')
    return figures


def _row(job_type: str, sample: Any) -> dict[str, Any]:
    usage = sample.usage.application
    return {
        "job_type": job_type,
        "write_units_per_job": round(usage.write_units / sample.jobs, 4),
        "index_write_units_per_job": round(usage.index_write_units / sample.jobs, 4),
        "read_units_per_job": round(usage.read_units / sample.jobs, 4),
        "completed": f"{sample.completed}/{sample.jobs}",
    }


def _item_of_its_own(index: int) -> dict[str, Any]:
    return {"item_id": f"item-{index}", "version": 1}


def _one_item(index: int) -> dict[str, Any]:
    return {"item_id": "item-burst", "version": index}


def _hot_key(item_write_units: Any, jobs: int, marker: str) -> dict[str, Any]:
    """The sample's most written item whose key holds `marker`: its write units per job, and a second's at
    HOT_KEY_JOBS_PER_SECOND jobs of its key."""
    found = [(units, item) for item, units in item_write_units.items() if marker in item]
    units, item = max(found, default=(0.0, None))
    per_job = units / jobs if jobs else 0.0
    rate = per_job * HOT_KEY_JOBS_PER_SECOND
    return {
        "item": item,
        "write_units_per_job": round(per_job, 4),
        "jobs_per_second": HOT_KEY_JOBS_PER_SECOND,
        "write_units_per_second": round(rate, 1),
        "limit": PER_ITEM_LIMIT,
        "pass": rate <= PER_ITEM_LIMIT,
    }


def targets(figures: dict[str, Any] | None) -> list[dict[str, Any]]:
    """A rate-limited job: at most one write unit more than a plain job, and no read on its happy path; a capped
    job: at most two more."""
    if figures is None:
        return []
    extra, reads = figures["extra_write_units_per_job"], figures["rate_limited"]["read_units_per_job"]
    hot = figures.get("hot_limiter_key")
    found = [
        {"name": "rate-limited job: write units over a plain job", "value": extra, "limit": 1.0, "pass": extra <= 1.0},
        {"name": "rate-limited job: read units, happy path", "value": reads, "limit": 0.0, "pass": reads <= 0.0},
        {
            "name": "capped job: write units over a plain job",
            "value": figures["capped_extra_write_units_per_job"],
            "limit": 2.0,
            "pass": figures["capped_extra_write_units_per_job"] <= 2.0,
        },
    ]
    if hot is not None:  # (a report from before the item was measured apart has none)
        found.append(
            {
                "name": f"limiter key at {HOT_KEY_JOBS_PER_SECOND:,} jobs a second: write units a second on its item",
                "value": hot["write_units_per_second"],
                "limit": PER_ITEM_LIMIT,
                "pass": hot["pass"],
                "note": "one write unit a reservation: at the per-item limit with no headroom; a hotter key spreads "
                "over items (Limiter shards=N: the hottest takes about 1/N, flow_control.hot_sharded_limiter_key)",
            }
        )
    return found
