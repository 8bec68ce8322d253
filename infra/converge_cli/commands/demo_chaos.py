"""`converge demo --chaos`: thousands of jobs through the local cloud under injected faults, then the invariants.

Jobs go in waves (so queues stay short), every wave drained to quiescence, each followed by a few
delayed, cancelled and expiring jobs (one-time schedules firing twice now and then); one wave in five runs
with the catalogue's own providers misbehaving (its local hooks' `provider_faults`; the reference ledger
can then neither deduplicate nor be queried), so ambiguous outcomes become UNKNOWN and must show up
in `converge ops list --state UNKNOWN`. Beside the per-job faults, messages and schedule firings are
now and then delivered twice or (firings) dropped; in one wave of four the relay fails for the batches
holding one job until Lambda gives them up to its on-failure destination, and in another the delayed
jobs' schedule group is missing while that wave's timed jobs are relayed. Each wave also admits a batch of
the catalogue's (localcloud.batch_workload: its producer dies halfway now and then, and one batch is left
halfway for good), checked for its counts, its callback and its listing. The report states
each invariant and whether it held, the operations by state, the effects counted from the emulated
services, the faults injected by kind, and the throughput. The catalogue's flow control runs under the same
faults (the reference one's rate-limited partner API and its one statement at a time per partner): the report says
how many jobs it held, and its check fails if any of them reached a DLQ or was lost. So does the catalogue's debounce
(the reference one's CV re-render after a burst of edits): in the first wave of each two, each key gets a burst of
requests (localcloud.debounce_workload), checked for one run per burst with the newest payload, no request in a DLQ,
and the run's start within `max_wait`.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import time
from collections.abc import Iterator
from typing import Any

from rich.console import Console
from rich.table import Table

from converge_cli.support.output import literal, records, say, styled
from converge_cli.support.quiet import quiet_logs
from localcloud.project import current

WAVE = 500
SHOWN = 5
"""Violations printed under a broken invariant (the report's JSON holds the first few more)."""
TIMED_PER_WAVE = 1 / 25
"""Delayed, cancelled and expiring jobs added per wave, as a share of the wave."""
DUPLICATE_FIRINGS = 0.3
"""Chance that a one-time schedule's firing is delivered twice."""
NONE_MODE_EVERY = 5
FAULT_RATES: dict[str, tuple[float, dict[str, Any]]] = {
    # kind: (probability per opportunity, options); about 5% of jobs see a fault
    "crash_after_effect": (0.008, {}),
    "concurrent_delivery": (0.006, {}),
    "lease_expiry": (0.004, {}),
    "lost_response": (0.008, {}),
    "dispatch_replay": (0.005, {}),
    "send_batch_partial_failure": (0.005, {}),
    "dynamodb_throttle": (0.002, {}),
    "lambda_timeout": (0.003, {}),
    "ssm_unavailable": (0.03, {"seconds": 30}),
    # a producer's own writes: its PutItem retried with the same content, or with other content, before or
    # after the job ran; or an item carrying attributes converge owns, with wrong types and values
    "producer_retry_same": (0.01, {}),
    "producer_retry_other": (0.005, {}),
    "producer_owned_attributes": (0.005, {}),
}
DELAYED_PATH_FAULT_RATES: dict[str, tuple[float, dict[str, Any]]] = {
    # the relay's and the scheduler's at-least-once and failing deliveries (the per-wave faults are below)
    "duplicate_delivery": (0.005, {}),  # a worker's message (or a schedule's firing) delivered twice
    "schedule_firing_dropped": (0.02, {}),  # a one-time schedule fires, its target delivery fails
}
RELAY_FAILURE_EVERY = 4
"""Every so many waves (the second of each run of four), the relay fails for the batches holding one of the
wave's jobs until Lambda gives them up (its on-failure destination; the reconciler replays them)."""
RELAY_FAILURE_ATTEMPTS = 50
MISSING_GROUP_EVERY = 4
FLOW_BURST = 20
"""Jobs of the catalogue's rate-limited job type (the reference one: ad images, paced to the image partner's 50 a
minute with a burst of 10) added at once to a wave: more than its burst, so flow control holds some."""
FLOW_BURST_EVERY = 4
"""Every so many waves (the first of each run of four), the burst of rate-limited jobs is added."""
"""Every so many waves (the third of each run of four), the delayed jobs' schedule group is deleted while the
wave's timed jobs are relayed, then created again (an operator's mistake, or a stack update)."""
LOCAL_ENVIRONMENT = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_REGION": "us-east-1",
    "AWS_DEFAULT_REGION": "us-east-1",
}


def run_chaos(seed: int, jobs: int, console: Console, as_json: bool, cli: Any) -> tuple[dict[str, Any], bool]:
    """Run `jobs` jobs under random faults (reproducible by `seed`); return the report and whether it held."""
    from localcloud import LocalCloud, invariants
    from localcloud.batch_workload import ChaosBatches
    from localcloud.collector import collect_less_often
    from localcloud.debounce_workload import ChaosBursts
    from localcloud.faults import FaultInjector, FaultKind
    from localcloud.flow_invariants import flow_control_kept
    from localcloud.speedups import fast_moto
    from localcloud.timed_workload import Timed, run_timed
    from localcloud.workload import Workload

    collect_less_often()  # a local cloud and thousands of jobs in one process (localcloud/collector.py)
    started = time.perf_counter()
    project = current()
    with (
        local_credentials(),
        quiet_logs(),
        fast_moto(),
        LocalCloud.start(project.template, catalogue=project.catalogue, history_limit=100) as cloud,
    ):
        deployed = time.perf_counter()
        workload = Workload(cloud, random.Random(seed))
        workload.prepare()
        batches = ChaosBatches.of(cloud, workload.converge)
        bursts = ChaosBursts.of(workload)
        debounced: list[str] = []
        faults = FaultInjector(cloud, seed=seed)
        for kind, (probability, options) in {**FAULT_RATES, **DELAYED_PATH_FAULT_RATES}.items():
            faults.rate(FaultKind(kind), probability, **options)
        enqueued = None
        flow_burst: list[str] = []
        timed = Timed()
        cloud.one_time_schedules.duplicate_rate = DUPLICATE_FIRINGS
        cloud.one_time_schedules.rng.seed(seed)
        with faults.installed():
            waves = max(1, -(-jobs // WAVE))
            for wave in range(waves):
                size = min(WAVE, jobs - wave * WAVE)
                none_mode = wave % NONE_MODE_EVERY == NONE_MODE_EVERY - 1
                workload.provider_faults(none_mode)
                first = len(enqueued.operation_ids) if enqueued else 0
                enqueued = workload.enqueue_mix(size, f"chaos-{seed}", enqueued, faults)
                if wave % FLOW_BURST_EVERY == 0:
                    flow_burst += burst_of_limited_jobs(workload, f"chaos-{seed}-w{wave}-limited")
                if batches:
                    batches.admit(wave, size, f"chaos-{seed}-batch")
                if wave % RELAY_FAILURE_EVERY == 1:
                    poison = enqueued.operation_ids[first]
                    faults.plan(FaultKind.RELAY_BATCH_FAILURE, poison, times=RELAY_FAILURE_ATTEMPTS)
                workload.drain()
                if workload.rewrite_after(enqueued):
                    workload.drain()
                if bursts and (sent := bursts.send(wave, f"chaos-{seed}-w{wave}-burst")):
                    debounced += sent
                    workload.drain()  # past the bursts' quiet period: each runs
                group_missing = wave % MISSING_GROUP_EVERY == 2
                if group_missing:
                    faults.delete_schedule_group()
                try:
                    count = max(2, int(size * TIMED_PER_WAVE))
                    run_timed(workload, count, f"chaos-{seed}-w{wave}", workload.rng, timed)
                finally:
                    if group_missing:
                        faults.restore_schedule_group()
                if not as_json:
                    console.print(
                        f"wave {wave + 1}/{waves}: {len(enqueued.operation_ids)} jobs, "
                        f"{faults.total} faults injected, {time.perf_counter() - deployed:.0f} s"
                        + (" (the catalogue's providers misbehave)" if none_mode else "")
                    )
            workload.provider_faults(False)
            if batches:
                batches.leave_one_stopped(f"chaos-{seed}-batch")
                workload.drain()
                batches.outlive_stopped(cloud)
            workload.settle()
        processed = time.perf_counter()
        expected = [
            *(enqueued.operation_ids if enqueued else []),
            *flow_burst,
            *debounced,
            *timed.delayed,
            *timed.cancelled,
            *timed.expiring,
        ]
        operations = invariants.operations_in(cloud)
        report = invariants.check(
            cloud, faults, expected, list_attention=cli_attention_lister(cli), operations=operations
        )
        if batches:
            report.checks.append(batches.check(operations))
        # The reference application's rate-limited partner API (its ad images) and its statement singleton ran
        # under the same faults: none of the jobs they held may reach a DLQ or be lost
        report.checks.append(flow_control_kept(cloud, cloud.registry, operations, report.lister))
        # Its CV re-render after a burst of edits: one run per burst, the newest, in time, none dead-lettered
        if bursts:
            report.checks.extend(bursts.checks(operations, faults))
        checked = time.perf_counter()
    result = {
        **report.to_json(),
        "faults": dict(sorted(faults.counts.items())),
        "faults_total": faults.total,
        "timed": {
            "delayed": len(timed.delayed),
            "cancelled": len(timed.cancelled),
            "expiring": len(timed.expiring),
            "schedule_firings": len(cloud.one_time_schedules.firings),
        },
        "ssm_calls_failed": faults.ssm_calls_failed,
        "jobs": jobs,
        "seed": seed,
        "job_types": dict(sorted(enqueued.by_job_type.items())) if enqueued else {},
        "debounced": bursts.summary() if bursts else None,
        "jobs_per_second": round(jobs / max(processed - deployed, 1e-9), 1),
        "seconds": {
            "deploy": round(deployed - started, 1),
            "run": round(processed - deployed, 1),
            "check": round(checked - processed, 1),
            "total": round(checked - started, 1),
        },
    }
    if as_json:
        print(json.dumps(result, indent=2, sort_keys=True))
    else:
        render(result, console)
    return result, report.holds


def burst_of_limited_jobs(workload: Any, prefix: str) -> list[str]:
    """FLOW_BURST jobs at once of the catalogue's first rate-limited job type in its mix (none when it has none)."""
    limited = {b.job_type for b in workload.cloud.registry if b.uses}
    mix = [(job_type, payload) for job_type, payload, _ in workload.mix if job_type in limited]
    if not mix:
        return []
    chosen = [mix[n % len(mix)] for n in range(FLOW_BURST)]
    return [workload.enqueue(job_type, f"{prefix}-{n:03d}", payload) for n, (job_type, payload) in enumerate(chosen)]


@contextlib.contextmanager
def local_credentials() -> Iterator[None]:
    """Dummy credentials for the in-process cloud, so no real profile or endpoint is ever used."""
    saved = {name: os.environ.get(name) for name in [*LOCAL_ENVIRONMENT, "AWS_ENDPOINT_URL", "AWS_PROFILE"]}
    os.environ.update(LOCAL_ENVIRONMENT)
    os.environ.pop("AWS_ENDPOINT_URL", None)
    os.environ.pop("AWS_PROFILE", None)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def cli_attention_lister(app: Any) -> Any:
    """Operation ids exactly as `converge ops list --state <STATE> --json` prints them, every page (`app` is the
    converge command, handed in by the command that runs chaos: this module never imports it)."""
    from typer.testing import CliRunner

    runner = CliRunner()

    def listed(state: str) -> set[str]:
        found: set[str] = set()
        token: str | None = None
        while True:
            args = ["ops", "list", "--state", str(state), "--limit", "1000", "--json"]
            result = runner.invoke(app, [*args, "--next", token] if token else args)
            if result.exit_code != 0:
                raise RuntimeError(f"`converge {' '.join(args)}` failed: {result.output}")
            page = json.loads(result.stdout)
            found |= {str(row["operation_id"]) for row in page["operations"]}
            token = page.get("next")
            if not token:
                return found

    return listed


def render(result: dict[str, Any], console: Console) -> None:
    verdict = styled("held", "bold green") if result["invariants_hold"] else styled("VIOLATED", "bold red")
    say(console)
    say(
        console,
        styled(str(result["jobs"]), "bold"),
        f" jobs, seed {result['seed']}: {result['faults_total']} faults injected, "
        f"{result['jobs_per_second']} jobs/s ({result['seconds']['run']} s; deploy {result['seconds']['deploy']} s, "
        f"checks {result['seconds']['check']} s). Invariants ",
        verdict,
        ".",
    )
    rows: list[list[Any]] = []
    for check in result["checks"]:
        held = "yes" if check["holds"] else styled(f"NO ({check['violation_count']})", "red")
        rows.append([check["name"], held, check["detail"]])
    records(console, ["invariant", "held", "what it says"], rows, title="invariants")
    for check in result["checks"]:  # each broken invariant's first violations, under its name (never a blank row)
        shown = check["violations"][:SHOWN]
        if not shown:
            continue
        more = f", the first {len(shown)}" if check["violation_count"] > len(shown) else ""
        say(console, styled(f"{check['name']}: {check['violation_count']} violation(s){more}", "bold red"))
        for violation in shown:
            say(console, "  ", styled(str(violation), "red"))
    side = Table.grid(padding=(0, 4))
    side.add_row(
        _counts("faults injected", result["faults"]),
        _counts("operations", result["operations"]),
        _counts("effects", result["effects"]),
    )
    console.print(side)
    rejected = result.get("rejected") or {}
    if rejected:
        from localcloud.workload import UNKNOWN_JOB_TYPE  # the run's own hostile input

        say(
            console,
            f"{sum(rejected.values())} operations REJECTED, each with the reason on its receipt; the run writes "
            f"hostile input on purpose (raw items of an unknown job type, {UNKNOWN_JOB_TYPE}), which must end so:",
        )
        for reason, count in rejected.items():
            on_purpose = reason.startswith(f"{UNKNOWN_JOB_TYPE}:")
            say(console, f"  {count:>5}  {reason}", "" if on_purpose else styled("  (not written on purpose)", "red"))
    say(
        console,
        f"{result['window_faults']} faults landed between an effect and its claim; "
        f"{result['dead_lettered_open']} operations were dead-lettered by SQS before FAILED could be recorded "
        "(each listed under STUCK by the reconciler).",
    )


def _counts(title: str, counts: dict[str, int]) -> Table:
    table = Table("", "count", title=literal(title))
    for name, count in counts.items():
        table.add_row(literal(name), str(count))
    return table
