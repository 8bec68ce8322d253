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
"""

from __future__ import annotations

from typing import Any

from converge_bench import jobs as bench_jobs


def measure(bench: Any, jobs: int) -> dict[str, Any]:
    """Write and read units per job (index writes included) for a plain job and a rate-limited one."""
    figures: dict[str, Any] = {}
    first_use = bench.run(1, job_type=bench_jobs.CAPPED, prefix="limit-first-cap")
    for name, job_type in (
        ("plain", bench_jobs.NOOP),
        ("rate_limited", bench_jobs.LIMITED),
        ("capped", bench_jobs.CAPPED),
    ):
        sample = bench.run(jobs, job_type=job_type, prefix=f"limit-{name}")
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


def targets(figures: dict[str, Any] | None) -> list[dict[str, Any]]:
    """A rate-limited job: at most one write unit more than a plain job, and no read on its happy path; a capped
    job: at most two more."""
    if figures is None:
        return []
    extra, reads = figures["extra_write_units_per_job"], figures["rate_limited"]["read_units_per_job"]
    return [
        {"name": "rate-limited job: write units over a plain job", "value": extra, "limit": 1.0, "pass": extra <= 1.0},
        {"name": "rate-limited job: read units, happy path", "value": reads, "limit": 0.0, "pass": reads <= 0.0},
        {
            "name": "capped job: write units over a plain job",
            "value": figures["capped_extra_write_units_per_job"],
            "limit": 2.0,
            "pass": figures["capped_extra_write_units_per_job"] <= 2.0,
        },
    ]
