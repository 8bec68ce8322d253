"""Run the three designs in one process, in interleaved rounds, and turn the measurements into figures,
ratios (converge / each baseline, the median of the rounds with their spread) and targets.

The designs: converge (template.yaml), the bare Powertools baseline (benchmarks/baseline: batch and
idempotency, no validation, no kill switch) and the same-job baseline (benchmarks/baseline_same_job:
the same plus Powertools' parser for the message and a fail-closed kill switch read with Powertools'
parameters). All three are deployed side by side on one moto; each round runs the same number of jobs
through each in turn, so a change in the machine's load falls on all three alike.
"""

from __future__ import annotations

import os
import platform
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from converge_bench import attention, baseline_design, batches, coldstart, converge_design, limits, signals
from converge_bench import jobs as bench_jobs
from converge_bench.baseline_design import BARE, SAME_JOB
from converge_bench.harness import DesignRun, merged
from converge_bench.meter import Meter
from converge_bench.prices import PRICES, Usage, snapstart_costs
from localcloud.collector import collect_less_often, freeze_survivors

DESIGNS = ("converge", "baseline", "same_job")
"""converge, the bare Powertools baseline, the same-job Powertools baseline (the report's keys for them)."""
KEYS = (
    "write_units_per_job",
    "read_units_per_job",
    "sqs_requests_per_job",
    "usd_per_million_jobs",
    "overhead_us_per_message_live",
    "jobs_per_second",
)
EXTRA_RATIOS = ("usd_per_million_jobs_with_logs", "wall_jobs_per_second")
ROUND_RATIOS = (
    "cold_start_same_job",
    "cold_start_bare",
    "cold_start_enqueue_api_same_job",
    "overhead_us_per_message",
    "overhead_us_per_message_same_job",
)
"""Ratios taken per round (converge / a baseline): the report gives their median and spread (min-max)."""
MIN_ROUNDS = 5
SNAPSTART_MEMORY_MB = 512
"""The workers' and the enqueue API's MemorySize in template.yaml."""
LOG_SAMPLE_JOBS = 50
POLICY_SAMPLE_JOBS = 50
ASSUMPTIONS = [
    "capacity units are computed from item sizes in moto's state with AWS's sizing rules, not moto's ConsumedCapacity;"
    " write units include those a write costs the table's global secondary indexes (index_write_units_per_job)",
    "SQS requests per job: the relay's SendMessageBatch plus the event source's ReceiveMessage calls that "
    "returned messages and its DeleteMessageBatch; empty polls are the poller's idle cost and are left out",
    "Lambda billed duration per invocation = measured in-Lambda time (handler CPU time minus the emulator's) "
    "+ an assumed round trip per AWS call (DynamoDB 5 ms, SQS and SSM 10 ms); memory from the template",
    "overhead per message = the median worker invocation's in-Lambda CPU time per record, less the runner's own time "
    "(a no-op effect), measured by running each invocation again, three times, against the AWS answers recorded the "
    "first time, and keeping the least: "
    "botocore's whole client side runs, the emulator does not (live, the emulator's own work between calls evicts "
    "the caches of the code measured after it, more so the more it parses; the live figure, handler CPU minus "
    "moto's and the meter's, is shown too as overhead_us_per_message_live); CPU time resists a busy neighbour "
    "better than wall time, but not entirely (caches and the core are shared): hence the rounds and their spread",
    "jobs per second = jobs / (wall time of enqueue + drain minus the emulator's answer time): moto's own cost "
    "(e.g. it deep-copies a table for each TransactWriteItems) is not the design's",
    "cold start = a fresh interpreter (`python -S`, the function's code, layers and the packages its deployment "
    "carries on the path) from its start to its first answer: every import (boto3 included), client creation and "
    "the first record (a worker) or POST /jobs (an enqueue API), with the AWS answers recorded once on moto and "
    "replayed through botocore's before-send hook (moto is never loaded there); tracing off for every design; "
    "taken as the interpreter's CPU time (what a Lambda sandbox's dedicated CPU takes, bytecode and files cached), "
    "which a busy neighbour does not inflate; the wall times are in cold_start.*.total_ms and cold_start_wall_ratios",
    "ratios over rounds: each round takes every design in turn; a ratio is computed per round and reported as the "
    "median of the rounds with its spread (min-max); the first cold-start round is a warm-up and is not counted",
    "usd_per_million_jobs counts DynamoDB, SQS and Lambda; CloudWatch Logs ingestion of what the handlers print "
    "(Powertools JSON logs and EMF metrics, measured on a sample of jobs) is shown apart, in *_with_logs",
    "DynamoDB Streams reads by Lambda triggers and SSM GetParameter (standard) are free",
]


@dataclass
class Measured:
    run: DesignRun
    log_bytes_per_job: float
    cold_start_ms: float | None = None
    enqueue_api_cold_start_ms: float | None = None

    @property
    def jobs(self) -> int:
        return self.run.jobs

    def usage(self) -> Usage:
        run, n = self.run, self.run.jobs
        gb_seconds = sum(
            timing.billed_ms / 1000 * run.memory_mb[function] / 1024 for function, timing in run.handlers.items()
        )
        return Usage(
            write_units=run.usage.application.write_units / n,
            read_units=run.usage.application.read_units / n,
            sqs_requests=(run.usage.application.sqs_requests + run.usage.platform.sqs_requests) / n,
            lambda_invocations=sum(run.invocations.values()) / n,
            lambda_gb_seconds=gb_seconds / n,
            log_bytes=self.log_bytes_per_job,
        )

    def figures(self, worker: str) -> dict[str, Any]:
        run, usage = self.run, self.usage()
        timing = run.handlers.get(worker)
        overhead = live = None
        if timing and timing.per_record:
            # The median invocation's time per record: GC pauses and a busy neighbour skew the mean.
            live = (statistics.median(timing.per_record) - run.runner_seconds / timing.records) * 1e6
        if timing and timing.replayed_per_record:
            overhead = statistics.median(timing.replayed_per_record) * 1e6
        cost = usage.usd_per_million(PRICES)
        return {
            "write_units_per_job": round(usage.write_units, 4),
            "index_write_units_per_job": round(run.usage.application.index_write_units / run.jobs, 4),
            "read_units_per_job": round(usage.read_units, 4),
            "sqs_requests_per_job": round(usage.sqs_requests, 4),
            "usd_per_million_jobs": round(cost["total"], 4),
            "usd_per_million_jobs_with_logs": round(cost["total_with_logs"], 4),
            "overhead_us_per_message": round(overhead, 1) if overhead is not None else None,
            "overhead_us_per_message_live": round(live, 1) if live is not None else None,
            "replayed_invocations": len(timing.replayed_per_record) if timing else 0,
            "replay_mismatches": timing.replay_mismatches if timing else 0,
            "jobs_per_second": round(run.jobs / max(run.seconds - run.service_seconds, 1e-9), 1),
            "cold_start_ms": round(self.cold_start_ms, 1) if self.cold_start_ms is not None else None,
            "enqueue_api_cold_start_ms": (
                round(self.enqueue_api_cold_start_ms, 1) if self.enqueue_api_cold_start_ms is not None else None
            ),
            "jobs": run.jobs,
            "completed": run.completed,
            "wall_jobs_per_second": round(run.jobs / run.seconds, 1),
            "lambda_invocations_per_job": round(usage.lambda_invocations, 4),
            "lambda_gb_seconds_per_job": round(usage.lambda_gb_seconds, 6),
            "log_bytes_per_job": round(usage.log_bytes, 1),
            "usd_per_million_by_item": {name: round(value, 4) for name, value in cost.items()},
            "invocations": dict(run.invocations),
            "api_calls_per_job": {
                name: round(count / run.jobs, 4) for name, count in sorted(run.usage.application.calls.items())
            },
            "platform_calls_per_job": {
                name: round(count / run.jobs, 4) for name, count in sorted(run.usage.platform.calls.items())
            },
            "idle_receives": run.usage.idle_receives,
            "notes": run.notes,
        }


@dataclass
class Options:
    jobs: int = 1000
    scale_small: int | None = None
    scale_large: int | None = None
    attention_sizes: tuple[int, ...] = (1_000, 100_000)
    rounds: int = MIN_ROUNDS
    cold_starts: bool = True
    policies: bool = True
    batch_sizes: tuple[int, ...] = (1_000,)
    """A row per size: a batch of that many children admitted, run and completed (none: no batch rows)."""
    progress: Callable[[str], None] = field(default=lambda message: None)
    command: str = "converge bench"
    """How the run was started, as the report (and the page written from it) names it."""


def _log_bytes_per_job(bench: Any, logical_ids: list[str], jobs: int, prefix: str) -> float:
    logs = bench.cloud.runtime.logs
    for logical_id in logical_ids:
        logs[logical_id].clear()
    bench.timers.replaying = False  # what a job logs, once
    try:
        bench.run(jobs, prefix=prefix)
    finally:
        bench.timers.replaying = True
    lines = [line for logical_id in logical_ids for line in logs[logical_id]]
    return sum(len(line.encode("utf-8")) + 1 for line in lines) / jobs


def _cost_per_job(run: DesignRun) -> float:
    return Measured(run, 0.0).usage().usd_per_million(PRICES)["total"]


def _ratio(a: Any, b: Any) -> float | None:
    if not isinstance(a, (int, float)) or not isinstance(b, (int, float)) or b == 0:
        return None
    return round(a / b, 3)


def _round_overhead(run: DesignRun, worker: str) -> float | None:
    timing = run.handlers.get(worker)
    if not timing or not timing.replayed_per_record:
        return None
    return statistics.median(timing.replayed_per_record) * 1e6


def median_and_spread(values: list[float | None]) -> tuple[float | None, list[float] | None]:
    """The median of the rounds' values and their (min, max); None when a round has no value."""
    if not values or any(value is None for value in values):
        return None, None
    present = [float(value) for value in values if value is not None]
    return round(statistics.median(present), 3), [round(min(present), 3), round(max(present), 3)]


def run(options: Options) -> dict[str, Any]:
    """Everything `converge bench` reports, as one JSON-able dict (`run`: when, where, and the machine's load)."""
    began, cpu_began = time.monotonic(), time.process_time()
    machine = {
        "command": options.command,
        "date": datetime.now(tz=UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "load_before": [round(value, 2) for value in os.getloadavg()],
    }

    def say(message: str) -> None:
        options.progress(f"[{time.monotonic() - began:4.0f} s] {message}")

    # This process holds moto and three deployed designs, far more than a function's runtime on Lambda: with
    # Python's defaults, a full collection over all of it would land in whichever invocation is being timed.
    collect_less_often()
    meter = Meter()
    rounds = max(1, options.rounds)
    per_round = max(options.jobs // rounds, 10)
    small = options.scale_small or max(options.jobs // 20, 10)
    large = options.scale_large
    result: dict[str, Any] = {"jobs": per_round * rounds, "rounds": rounds}
    workers = {"converge": converge_design.WORKER, "baseline": BARE.worker, "same_job": SAME_JOB.worker}
    relays = {"converge": converge_design.RELAY, "baseline": BARE.relay, "same_job": SAME_JOB.relay}
    with meter.active():
        say(
            "deploying the three designs side by side: template.yaml, benchmarks/baseline, benchmarks/baseline_same_job"
        )
        with (
            converge_design.deployed(meter) as converge_bench,
            baseline_design.deployed(meter, BARE) as bare_bench,
            baseline_design.deployed(meter, SAME_JOB) as same_job_bench,
        ):
            benches: dict[str, Any] = {"converge": converge_bench, "baseline": bare_bench, "same_job": same_job_bench}
            freeze_survivors()  # the designs stay deployed for the whole run
            runs: dict[str, list[DesignRun]] = {design: [] for design in DESIGNS}
            for index in range(rounds):
                say(f"round {index + 1}/{rounds}: {per_round} jobs through each design in turn")
                for design in DESIGNS:
                    runs[design].append(benches[design].run(per_round, prefix=f"main{index}"))
            measured: dict[str, Measured] = {}
            for design in DESIGNS:
                sample = min(LOG_SAMPLE_JOBS, options.jobs)
                logs = _log_bytes_per_job(benches[design], [relays[design], workers[design]], sample, "logs")
                measured[design] = Measured(merged(runs[design]), logs)
            bench = converge_bench
            main = measured["converge"].run
            say(f"converge: scale check at {small} jobs" + (f" and {large} jobs" if large else ""))
            small_run = bench.run(small, prefix="small")
            large_run = bench.run(large, prefix="large") if large else main
            per_policy = {}
            if options.policies:
                say("converge: happy path per policy")
                for job_type, policy in bench_jobs.POLICY_OF.items():
                    sample_run = bench.run(min(POLICY_SAMPLE_JOBS, options.jobs), job_type=job_type, prefix=policy)
                    per_policy[policy] = {
                        "job_type": job_type,
                        "write_units_per_job": round(sample_run.usage.application.write_units / sample_run.jobs, 4),
                        "index_write_units_per_job": round(
                            sample_run.usage.application.index_write_units / sample_run.jobs, 4
                        ),
                        "read_units_per_job": round(sample_run.usage.application.read_units / sample_run.jobs, 4),
                        "completed": f"{sample_run.completed}/{sample_run.jobs}",
                    }
            say("converge: a delayed job's cost over an immediate one")
            delayed = _delayed_cost(bench, min(POLICY_SAMPLE_JOBS, options.jobs))
            say("converge: three steps, a continuation, a wait; priced beside durable functions and Step Functions")
            shapes = _shapes_cost(bench, min(POLICY_SAMPLE_JOBS, options.jobs))
            say("converge: a rate-limited, a capped and a debounced job's cost over a plain one")
            flow_control = limits.measure(bench, min(POLICY_SAMPLE_JOBS, options.jobs))
            say("converge: a job that waits for a signal, beside a plain job and a time wait")
            signal_figures = signals.measure(bench, min(POLICY_SAMPLE_JOBS, options.jobs))
            batch_figures = batches.measure(bench, options.batch_sizes, say) if options.batch_sizes else None
            say(f"converge: attention listing on tables of {', '.join(map(str, options.attention_sizes))} operations")
            listing = attention.measure(meter, bench.cloud.outputs["StateTableName"], options.attention_sizes)

    overheads = {design: [_round_overhead(r, workers[design]) for r in runs[design]] for design in DESIGNS}
    round_values: dict[str, list[float | None]] = {
        "overhead_us_per_message": [
            _ratio(c, b) for c, b in zip(overheads["converge"], overheads["baseline"], strict=True)
        ],
        "overhead_us_per_message_same_job": [
            _ratio(c, s) for c, s in zip(overheads["converge"], overheads["same_job"], strict=True)
        ],
    }
    cold: dict[str, Any] | None = None
    if options.cold_starts:
        cold = coldstart.measure(rounds, progress=say)
        for design in DESIGNS:
            measured[design].cold_start_ms = cold["subjects"][f"worker/{design}"]["cpu_ms"]
            api = cold["subjects"].get(f"enqueue_api/{design}")
            measured[design].enqueue_api_cold_start_ms = api["cpu_ms"] if api else None
        for name, ratio in cold["ratios"].items():
            round_values[name] = ratio["rounds"]

    figures = {design: measured[design].figures(workers[design]) for design in DESIGNS}
    for design in DESIGNS:
        figures[design]["overhead_us_per_message_rounds"] = [
            round(value, 1) if value is not None else None for value in overheads[design]
        ]
    result.update(figures)
    result["designs"] = DESIGN_NOTES
    ratios: dict[str, Any] = {
        key: _ratio(figures["converge"][key], figures["baseline"][key]) for key in (*KEYS, *EXTRA_RATIOS)
    }
    spread: dict[str, Any] = {}
    for name in ROUND_RATIOS:
        ratios[name], spread[name] = median_and_spread(round_values.get(name, []))
    result["ratios"] = ratios
    result["ratios_same_job"] = {
        key: _ratio(figures["converge"][key], figures["same_job"][key]) for key in (*KEYS, *EXTRA_RATIOS)
    }
    result["spread"] = spread
    result["round_ratios"] = {name: values for name, values in round_values.items()}
    if cold is not None:
        result["cold_start"] = cold["subjects"]
        result["snapstart"] = {
            key: snapstart_costs(SNAPSTART_MEMORY_MB, subject["cpu_ms"], subject["after_restore_cpu_ms"] or 0.0)
            for key, subject in cold["subjects"].items()
            if key.endswith("/converge")
        }
        result["cold_start_wall_ratios"] = {
            name: {"median": ratio["wall_median"], "rounds": ratio["wall_rounds"]}
            for name, ratio in cold["ratios"].items()
        }
    small_cost, large_cost = _cost_per_job(small_run), _cost_per_job(large_run)
    result["scale"] = {
        "small_jobs": small_run.jobs,
        "large_jobs": large_run.jobs,
        "usd_per_million_small": round(small_cost, 4),
        "usd_per_million_large": round(large_cost, 4),
        "write_units_per_job_small": round(small_run.usage.application.write_units / small_run.jobs, 4),
        "write_units_per_job_large": round(large_run.usage.application.write_units / large_run.jobs, 4),
    }
    result["per_policy"] = per_policy
    result["delayed"] = delayed
    result["shapes"] = shapes
    result["flow_control"] = flow_control
    result["signals"] = signal_figures
    result["batches"] = batch_figures
    result["attention"] = [vars(cost) for cost in listing]
    result["targets"] = (
        targets(result, small_cost, large_cost, listing) + batches.targets(batch_figures) + limits.targets(flow_control)
    )
    result["prices"] = PRICES.to_json()
    result["assumptions"] = ASSUMPTIONS
    result["run"] = {
        **machine,
        "load_after": [round(value, 2) for value in os.getloadavg()],
        "seconds": round(time.monotonic() - began, 1),
        "cpu_seconds": round(time.process_time() - cpu_began, 1),
    }
    return result


DESIGN_NOTES = {
    "converge": "template.yaml: enqueue() -> stream -> relay -> worker (message validated, kill switch read, "
    "lease, no-op effect, terminal write); enqueue API: admission behind Powertools idempotency",
    "baseline": "benchmarks/baseline: transactional outbox -> stream relay -> worker with BatchProcessor and "
    "@idempotent_function; validates nothing, reads no kill switch; no enqueue API",
    "same_job": "benchmarks/baseline_same_job: the bare baseline's outbox and relay; its worker also parses the "
    "message (Powertools parser, pydantic, extra=forbid) and reads a fail-closed kill switch (Powertools "
    "parameters, max_age=30); an enqueue API with Powertools event handler, idempotency and parser",
}


DELAYS = {"immediate": None, "message_delay": 300.0, "one_time_schedule": 7200.0}
"""What each delayed sample waits: within SQS's 900 s message delay, and beyond it (a one-time schedule)."""


def _delayed_cost(bench: Any, jobs: int) -> dict[str, Any]:
    """Per job, for jobs run now, due in 5 minutes (a message delay) and due in 2 hours (a one-time schedule):
    write units (index writes included), scheduler requests, and schedule firings (each a billed invocation)."""
    figures: dict[str, Any] = {}
    for name, delay in DELAYS.items():
        fired_before = len(bench.cloud.one_time_schedules.firings)
        sample = bench.run(jobs, prefix=f"delay-{name}", delay_seconds=delay)
        usage = sample.usage.application
        figures[name] = {
            "write_units_per_job": round(usage.write_units / sample.jobs, 4),
            "index_write_units_per_job": round(usage.index_write_units / sample.jobs, 4),
            "scheduler_requests_per_job": round(
                sum(count for call, count in usage.calls.items() if call.startswith("scheduler:")) / sample.jobs, 4
            ),
            "schedule_firings_per_job": round(
                (len(bench.cloud.one_time_schedules.firings) - fired_before) / sample.jobs, 4
            ),
            "completed": f"{sample.completed}/{sample.jobs}",
        }
    immediate = figures["immediate"]["write_units_per_job"]
    for name in ("message_delay", "one_time_schedule"):
        figures[name]["extra_write_units_per_job"] = round(figures[name]["write_units_per_job"] - immediate, 4)
    return figures


def _shapes_cost(bench: Any, jobs: int) -> dict[str, Any]:
    """Per job of each multi-effect shape (the continuation's child included): DynamoDB units, SQS requests and
    Lambda requests as measured, priced; beside it the same work on Lambda durable functions (one durable
    operation per step, per wait and for the execution, plus one request per invocation: one, and one more
    after each wait) and on a Step Functions standard workflow (one transition per state: a Task per step, a
    Wait per wait, plus one request for each Lambda a Task invokes). Lambda compute is left out on every side:
    the effects' own work costs the same wherever it runs."""
    figures: dict[str, Any] = {}
    for name, (job_type, shape) in bench_jobs.SHAPES.items():
        sample = bench.run(jobs, job_type=job_type, prefix=f"shape-{name}")
        usage = sample.usage.application
        invocations = sum(sample.invocations.values()) / sample.jobs
        per_job = {
            "write_units": usage.write_units / sample.jobs,
            "read_units": usage.read_units / sample.jobs,
            "sqs_requests": usage.sqs_requests / sample.jobs,
        }
        converge_usd = 1e6 * (
            per_job["write_units"] * PRICES.dynamodb_write_unit
            + per_job["read_units"] * PRICES.dynamodb_read_unit
            + per_job["sqs_requests"] * PRICES.sqs_request
            + invocations * PRICES.lambda_request
        )
        steps, waits = shape["steps"], shape["waits"]
        durable_usd = 1e6 * ((steps + waits + 1) * PRICES.durable_operation + (1 + waits) * PRICES.lambda_request)
        step_functions_usd = 1e6 * ((steps + waits) * PRICES.step_functions_transition + steps * PRICES.lambda_request)
        figures[name] = {
            "job_type": job_type,
            "write_units_per_job": round(per_job["write_units"], 4),
            "index_write_units_per_job": round(usage.index_write_units / sample.jobs, 4),
            "read_units_per_job": round(per_job["read_units"], 4),
            "sqs_requests_per_job": round(per_job["sqs_requests"], 4),
            "lambda_requests_per_job": round(invocations, 4),
            "usd_per_million_jobs": round(converge_usd, 4),
            "durable_functions_usd_per_million": round(durable_usd, 4),
            "step_functions_usd_per_million": round(step_functions_usd, 4),
            "ratio_to_durable_functions": _ratio(converge_usd, durable_usd),
            "ratio_to_step_functions": _ratio(converge_usd, step_functions_usd),
            "succeeded": f"{sample.completed}/{sample.jobs}",  # a continuation's parents and children both
        }
    return figures


def _target(name: str, value: float | None, limit: float) -> dict[str, Any]:
    return {"name": name, "value": value, "limit": limit, "pass": value is not None and value <= limit}


TARGETS = {
    "cold_start_same_job": ("worker cold start, converge / same-job baseline", 0.6),
    "cold_start_bare": ("worker cold start, converge / bare baseline", 1.0),
    "cold_start_enqueue_api_same_job": ("enqueue API cold start, converge / same-job baseline", 0.8),
}
OVERHEAD_LIMIT = 0.7


def targets(
    result: dict[str, Any], small_cost: float, large_cost: float, listing: list[attention.AttentionCost]
) -> list[dict[str, Any]]:
    """Every target, each with its value, limit and verdict (a ratio target also carries its spread)."""
    converge, ratios, scale = result["converge"], result["ratios"], result["scale"]
    spread = result.get("spread", {})
    drift = abs(large_cost / small_cost - 1) if small_cost else None
    first, last = listing[0], listing[-1]
    listing_ratio = round(last.read_units / first.read_units, 3) if first.read_units else None
    overhead_rounds = [value for value in result.get("round_ratios", {}).get("overhead_us_per_message", [])]
    worst = max(overhead_rounds) if overhead_rounds and None not in overhead_rounds else None
    found = [
        _target("write units per job, happy path", converge["write_units_per_job"], 3.0),
        _target("read units per job, happy path", converge["read_units_per_job"], 0.0),
        _target("cost per million jobs, converge / bare baseline", ratios["usd_per_million_jobs"], 0.5),
        {
            **_target(
                f"overhead per message, converge / bare baseline, in every one of {len(overhead_rounds)} rounds "
                "(the worst round)",
                round(worst, 3) if worst is not None else None,
                OVERHEAD_LIMIT,
            ),
            "median": ratios.get("overhead_us_per_message"),
            "spread": spread.get("overhead_us_per_message"),
        },
        _target(
            f"cost per job drift, {scale['small_jobs']} -> {scale['large_jobs']} jobs",
            round(drift, 4) if drift is not None else None,
            0.05,
        ),
        _target(f"attention page read units, {last.table_items} / {first.table_items} operations", listing_ratio, 1.0),
    ]
    if "cold_start" in result:
        for key, (name, limit) in TARGETS.items():
            found.append({**_target(f"{name} (median of rounds)", ratios.get(key), limit), "spread": spread.get(key)})
    return found
