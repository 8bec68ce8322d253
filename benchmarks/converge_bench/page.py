"""docs/benchmarks.md, written from one run's report: `converge bench --write-docs`.

The page is the bench's own output: every figure on it is the report's (the date, the machine's load before and
after, each ratio's median, spread and rounds, each target's verdict), and the report is written beside it
(`benchmarks/latest-report.json`), so that a test can render the page again from it and find it unchanged. The
prose between the tables says how things are measured, never what a figure was.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from converge_bench import coldstart, jobs
from converge_bench.report import DELAYS

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "benchmarks.md"
REPORT = ROOT / "benchmarks" / "latest-report.json"
DESIGNS = {"converge": "converge", "baseline": "bare baseline", "same_job": "same-job baseline"}
PER_JOB = (
    ("write_units_per_job", "DynamoDB write units", "{:.2f}"),
    ("index_write_units_per_job", "… of them on indexes", "{:.2f}"),
    ("read_units_per_job", "DynamoDB read units", "{:.2f}"),
    ("sqs_requests_per_job", "SQS requests", "{:.2f}"),
    ("usd_per_million_jobs", "US$ per million jobs (DynamoDB + SQS + Lambda)", "{:.2f}"),
    ("usd_per_million_jobs_with_logs", "… with CloudWatch Logs ingestion", "{:.2f}"),
    ("overhead_us_per_message", "framework overhead per message (µs, CPU, replayed, all rounds)", "{:,.0f}"),
    ("overhead_us_per_message_live", "… live, emulator time removed", "{:,.0f}"),
    ("jobs_per_second", "jobs per second (emulator time removed)", "{:.0f}"),
)
ROUNDS = (
    ("overhead_us_per_message", "per-message overhead, converge / bare baseline"),
    ("overhead_us_per_message_same_job", "per-message overhead, converge / same-job baseline"),
    ("cold_start_bare", "worker cold start, converge / bare baseline"),
    ("cold_start_same_job", "worker cold start, converge / same-job baseline"),
    ("cold_start_enqueue_api_same_job", "enqueue API cold start, converge / same-job baseline"),
)
SUBJECTS = {
    "worker/converge": "worker, converge",
    "worker/baseline": "worker, bare",
    "worker/same_job": "worker, same-job",
    "enqueue_api/converge": "API, converge",
    "enqueue_api/same_job": "API, same-job",
}
COMMAND = "converge bench --write-docs"
DASH = "\N{EN DASH}"
"""Between a spread's ends, and for a figure the report does not have."""


PARTS = ("interpreter", *coldstart.PARTS, "standard library and other", "handler module's own code", "first event")
"""The cold start's parts, in the order the page shows them."""


def write(result: dict[str, Any], page: Path = PAGE, report: Path = REPORT) -> None:
    """Write the report (JSON) and the page rendered from it, as a test renders it again from the file."""
    text = json.dumps(result, indent=1) + "\n"
    report.write_text(text)
    page.write_text(render(json.loads(text)))


def _ordered(mapping: Mapping[str, Any], order: Iterable[str]) -> list[str]:
    """The keys of `mapping`, those in `order` first and in that order, then the others sorted: the page reads the
    same whatever order the report's JSON keeps."""
    known = [key for key in order if key in mapping]
    return known + sorted(key for key in mapping if key not in known)


def render(result: dict[str, Any]) -> str:
    """The page, from one run's report."""
    parts = [
        _intro(result),
        _latest(result),
        _cold_start(result),
        _snapstart(result),
        _batches(result),
        _shapes(result),
        _signals(result),
        _flow_control(result),
        _measured(result),
    ]
    return "\n".join(part.rstrip("\n") + "\n" for part in parts if part)


def _number(value: Any, spec: str = "{:g}") -> str:
    return DASH if value is None else spec.format(value)


def _table(header: list[str], rows: list[list[str]], right: int = 1) -> str:
    """A Markdown table; every column from `right` on is right-aligned."""
    aligns = ["---" if index < right else "---:" for index in range(len(header))]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(aligns) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def _intro(result: dict[str, Any]) -> str:
    return f"""# Benchmarks

What a job costs and how fast a function starts, converge beside two designs built with Powertools
alone, on the in-process local cloud (moto), with the same jobs (a no-op effect, so that whatever a job
costs is the design's):

- **converge**: `template.yaml` as deployed; `enqueue()` (one conditional PutItem) → stream → relay
  (SendMessageBatch) → worker: the message validated (pydantic, the PII and secret heuristics), the
  kill switch read (SSM, fail-closed), the lease, the no-op effect, the terminal write. Its enqueue API:
  admission behind Powertools idempotency (see [The enqueue API](http-api.md)). The benchmark job types
  (`bench.noop.v1` and one per policy) are declared by name in `benchmarks/converge_bench/jobs.py`.
- **bare baseline** (`benchmarks/baseline/`): its own SAM template; the producer writes the entity and
  an outbox item in one TransactWriteItems; a stream relay with SendMessageBatch; a worker with
  Powertools `BatchProcessor` and `@idempotent_function` keyed on the operation id
  (DynamoDBPersistenceLayer), then a status update on the entity. It validates nothing and reads no
  kill switch, and it has no enqueue API: it is not what a team would build to get what converge gives.
- **same-job baseline** (`benchmarks/baseline_same_job/`): the bare baseline's outbox, relay and
  producer; its worker also parses each message with Powertools' parser (a pydantic model,
  `extra="forbid"`) and reads the job's kill switch with Powertools' `parameters.get_parameter(...,
  max_age=30)` before running it, failing closed. Its enqueue API (`POST /jobs/{{job_type}}`,
  `GET /operations/{{id}}`): Powertools' event handler, idempotency keyed on the caller and the
  `Idempotency-Key`, the payload parsed against the job's model, and the entity and outbox item written in
  one transaction. What it does not do that converge does: screen payloads for PII and secrets, keep a
  state record (receipt, history, attention listing), lease an operation rather than a message, or record
  `UNKNOWN` outcomes.

```
make bench                      # = converge bench: 400 jobs per design in 5 rounds, cold starts included
make bench-docs                 # = {COMMAND}: the same run, and this page written from its report
converge bench --json           # every figure below, for all three designs
converge bench --rounds 7 --jobs 700
converge bench --scale-check    # adds cost per job at 1,000 and 20,000 jobs (about 15 minutes more)
converge bench --batch-large    # adds a batch of 10,000 children (about an hour more, and some 25 GB: see Batches)
converge bench --batch-children 300   # the batch row at another size (0: none)
```

The three designs are deployed side by side on one moto. Each round runs the same number of jobs
through each design in turn and then, for the cold start, starts one fresh interpreter per function
and design in turn, so that a change in the machine's load falls on all of them alike. Every ratio
is computed per round and reported as the **median of the rounds with its spread** (min to max); the
JSON report carries them as `ratios.<key>` and `spread.<key>`, and every round's value in `round_ratios`.
"""


def _latest(result: dict[str, Any]) -> str:
    run = result.get("run") or {}
    load_before, load_after = run.get("load_before") or [], run.get("load_after") or []
    cpus = run.get("cpus")
    minutes, seconds = divmod(round(run.get("seconds") or 0), 60)
    quiet = cpus is not None and max([*load_before[:1], *load_after[:1], 0.0]) <= cpus / 2
    rounds = _count(result["rounds"], "interleaved round")
    lines = [
        "## The latest run",
        "",
        f"This page is the bench's own output: `{run.get('command', COMMAND)}` wrote it on {run.get('date', DASH)} "
        f"from the report beside it (`benchmarks/latest-report.json`): {rounds}, "
        f"{result['jobs'] // max(result['rounds'], 1)} jobs per design a round, on a machine of {_number(cpus)} "
        f"cores (Python {run.get('python', DASH)}). Load average (1, 5, 15 minutes) "
        f"{_loads(load_before)} when it started and {_loads(load_after)} when it ended; the run took "
        f"{minutes} min {seconds} s ({_number(run.get('cpu_seconds'), '{:.0f}')} s of CPU).",
    ]
    if not quiet:
        lines += [
            "",
            "The machine was not quiet (a load average above half its cores at the start or the end): other work "
            "shared its cores, so the spreads are wider than on a quiet machine and a ratio's worst round more so. "
            "The medians are what to read.",
        ]
    lines += ["", f"Run it again with `{COMMAND}` (or `make bench-docs`): it writes this page and the report.", ""]
    lines += ["### Targets", "", _targets(result)]
    lines += ["### Ratios over rounds", "", _rounds(result)]
    lines += ["### Per job", "", _per_job(result)]
    return "\n".join(lines)


def _count(number: int, thing: str) -> str:
    return f"{number} {thing}" + ("" if number == 1 else "s")


def _verdict(passed: bool) -> str:
    return "**PASS**" if passed else "**FAIL**"


def _loads(values: list[float]) -> str:
    return ", ".join(f"{value:.2f}" for value in values) if values else DASH


def _targets(result: dict[str, Any]) -> str:
    rows = []
    for target in result["targets"]:
        spread = target.get("spread")
        rows.append(
            [
                target["name"],
                _number(target["value"]),
                _number(target["limit"]),
                f"{spread[0]:g}{DASH}{spread[1]:g}" if spread else "",
                _verdict(target["pass"]),
            ]
        )
    text = _table(["target", "value", "limit", "spread", ""], rows, right=1)
    notes = [f"- {target['name']}: {target['note']}" for target in result["targets"] if target.get("note")]
    return text + ("\n" + "\n".join(notes) + "\n" if notes else "")


def _rounds(result: dict[str, Any]) -> str:
    rows = []
    for key, label in ROUNDS:
        values = result["round_ratios"].get(key)
        if values is None:
            continue
        spread = result["spread"].get(key)
        rows.append(
            [
                label,
                f"**{_number(result['ratios'].get(key), '{:.2f}')}**",
                f"{spread[0]:.2f}{DASH}{spread[1]:.2f}" if spread else DASH,
                " ".join(_number(value, "{:.2f}") for value in values),
            ]
        )
    return _table(["ratio", "median", "spread", "each round"], rows, right=1)


def _per_job(result: dict[str, Any]) -> str:
    rows = []
    for key, label, spec in PER_JOB:
        rows.append(
            [
                label,
                *(_number(result[design].get(key), spec) for design in DESIGNS),
                _number(result["ratios"].get(key), "{:.2f}"),
                _number(result["ratios_same_job"].get(key), "{:.2f}"),
            ]
        )
    return _table(["per job", *DESIGNS.values(), "converge / bare", "converge / same-job"], rows)


def _cold_start(result: dict[str, Any]) -> str:
    subjects = result.get("cold_start")
    if not subjects:
        return ""
    keys = [key for key in SUBJECTS if key in subjects]
    parts = _ordered(subjects[keys[0]]["made_of_ms"], PARTS)
    rows = [
        ["**CPU time, median of the rounds**", *(f"**{_number(subjects[k]['cpu_ms'], '{:.0f}')}**" for k in keys)],
        ["wall time, median", *(_number(subjects[k]["total_ms"], "{:.0f}") for k in keys)],
        *([part, *(_number(subjects[k]["made_of_ms"].get(part), "{:.0f}") for k in keys)] for part in parts),
        [
            "after a SnapStart restore (wall; CPU)",
            *(
                f"{_number(subjects[k].get('after_restore_ms'), '{:.0f}')}; "
                f"{_number(subjects[k].get('after_restore_cpu_ms'), '{:.0f}')}"
                for k in keys
            ),
        ],
    ]
    return f"""## Cold start as Lambda pays it

Each function of each design is started the way Lambda starts it: a fresh interpreter
(`python -S`) whose path holds the function's code directory, its layers and the packages its
deployment carries (converge's requirements and theirs, as installed; not the dev tools, which bring
awscrt and pyOpenSSL, which botocore would import and no Lambda pays), in Lambda's environment
(`AWS_LAMBDA_RUNTIME_API` and `LAMBDA_TASK_ROOT` set, tracing off), timed from its start to its first answer:
every import (boto3 included), client creation, and the first record (a worker) or `POST /jobs` (an enqueue
API). The AWS answers were recorded once on moto, in another interpreter, and are replayed from a file
through botocore's `before-send` hook, installed when the function's own imports load botocore, so moto is
never loaded where the clock runs and botocore's whole client side (serializing, signing, parsing) is. The
figure is the interpreter's CPU time: on a dedicated CPU with the files cached, as a sandbox has, that is its
wall time, and unlike wall time it does not grow when a neighbour takes the core (the wall times are beside
it). Lambda gives a 512 MB function 512/1,769 of a vCPU, so there a start takes about 3.5 times as long, the
same factor for every design. The parts are from `-X importtime` (each module's own time, the median of a few
runs; importtime's bookkeeping inflates them a little, and "handler module's own code" is the import's time
beyond the modules it logs, 0 where that bookkeeping exceeds it), in ms:

{_table(["ms", *(SUBJECTS[k] for k in keys)], rows)}"""


def _snapstart(result: dict[str, Any]) -> str:
    costs = result.get("snapstart")
    if not costs:
        return ""
    keys = [key for key in SUBJECTS if key in costs]
    rows = [
        [label, *(_number(costs[k][field], spec) for k in keys)]
        for field, label, spec in (
            ("start_ms_at_memory", "cold start at 512 MB (ms)", "{:,.0f}"),
            ("start_ms_after_restore_at_memory", "after a restore at 512 MB (ms, and the restore itself)", "{:,.0f}"),
            ("cache_usd_per_month", "snapshot cache, US$ a month per version", "{:.2f}"),
            ("restore_usd_per_million_starts", "restores, US$ per million starts", "{:.2f}"),
            ("start_duration_usd_per_million_starts", "init time it saves, US$ per million starts", "{:.2f}"),
        )
    ]
    workers = sum(costs[k]["cache_usd_per_month"] for k in keys if k.startswith("worker/")) * 3
    api = sum(costs[k]["cache_usd_per_month"] for k in keys if k.startswith("enqueue_api/"))
    prices = result.get("prices", {})
    return f"""## SnapStart: what it costs and when it pays off

Measured locally (an estimate, not AWS's restore latency, which adds the restore of the snapshot itself): from
a restore (a fork of an initialised interpreter whose before-snapshot hooks ran) to the first answer,
after-restore hooks included, beside a cold start, both at 512 MB (512/1,769 of a vCPU), and what each costs
({prices.get("snapstart_as_of", "the dated prices")}, `benchmarks/converge_bench/prices.py`):

{_table(["per function", *(SUBJECTS[k] for k in keys)], rows)}
The cache costs the same whether the function starts or not: {workers + api:.2f} US$ a month for the three workers
and the API together. A restore costs more than the init time it
saves, so SnapStart never pays in money; it pays in latency, where someone waits on a cold start. That is why
converge's `SnapStart` parameter is `auto` by default: on where `Stage` is `prod`, off in the other stages,
which are usually idle and would each pay the cache for nothing ([Deploying](deploying.md#snapstart)).
"""


def _batches(result: dict[str, Any]) -> str:
    figures = result.get("batches")
    if not figures or not figures.get("rows"):
        return ""
    rows = []
    for row in figures["rows"]:
        rows.append(
            [
                f"{row['children']:,}",
                f"{row['admission_seconds']:.1f} s",
                f"{row['write_units_per_child']:.3f}",
                f"{row['extra_write_units_per_child']:+.2f} {_verdict(row['extra_write_units_pass'])}"
                f" (target +{row['extra_write_units_limit']:g})",
                f"{row['read_units_per_child']:.2f}",
                _number(row["callback_latency_seconds"], "{:.2f} s"),
                str(row["counting_shards"]),
                f"{row['peak_item_write_units_per_second']:,.0f} WRU/s {_verdict(row['peak_item_pass'])}",
                f"{row['seconds']:.0f} s",
            ]
        )
    header = [
        "children",
        "admission",
        "WRU / child",
        "over a plain job",
        "RRU / child",
        "callback after the last child",
        "counting shards",
        "hottest item at 5,000 children/s",
        "run",
    ]
    return f"""## Batches

A [batch](batches.md) of no-op children (`bench.noop.v1`) and a no-op callback (`bench.batch-done.v1`): a
producer admits it, the local cloud runs every child and the callback, and the whole of it is metered
(`benchmarks/converge_bench/batches.py`; `--batch-children N` for another size, `--batch-large` for one more
of 10,000). Each row (`batches.rows[]` in `--json`): the producer's admission (wall time, moto answering
included); every write unit the batch cost (admission, each child's delivery, the batch counter's writes, the
completion, the callback's own run) over its children, beside a plain job's
({figures["plain_write_units_per_job"]:g} WRU, a sample of the same job run alone); the callback's latency from
the batch's completion to its `SUCCEEDED`, on the local cloud's clock; and the hottest item's write units in any
one second, were the children run at 5,000 a second (each child's first write placed at its rank / 5,000 s, every
other write at the time of the child before it; DynamoDB takes 1,000 a second on one partition).

{_table(header, rows)}"""


def _shapes(result: dict[str, Any]) -> str:
    lines = []
    if result.get("per_policy"):
        policies = result["per_policy"]
        rows = [
            [policy, f"`{row['job_type']}`", f"{row['write_units_per_job']:.2f}", f"{row['read_units_per_job']:.2f}"]
            for policy, row in ((key, policies[key]) for key in _ordered(policies, jobs.POLICY_OF.values()))
        ]
        lines += ["## Per policy, delays and jobs with several effects", "", "converge's happy path per policy:", ""]
        lines += [_table(["policy", "job type", "WRU / job", "RRU / job"], rows, right=2)]
    if result.get("delayed"):
        rows = [
            [
                name.replace("_", " "),
                f"{row['write_units_per_job']:.2f}",
                _number(row.get("extra_write_units_per_job"), "{:+.2f}"),
                f"{row['scheduler_requests_per_job']:.2f}",
                f"{row['schedule_firings_per_job']:.2f}",
            ]
            for name, row in ((key, result["delayed"][key]) for key in _ordered(result["delayed"], DELAYS))
        ]
        lines += ["A delayed job's cost beside an immediate one:", ""]
        lines += [_table(["job", "WRU / job", "over immediate", "scheduler requests / job", "firings / job"], rows)]
    if result.get("shapes"):
        rows = [
            [
                name.replace("_", " "),
                f"{row['write_units_per_job']:.2f}",
                f"{row['usd_per_million_jobs']:.2f}",
                f"{row['durable_functions_usd_per_million']:.2f}",
                f"{row['step_functions_usd_per_million']:.2f}",
            ]
            for name, row in ((key, result["shapes"][key]) for key in _ordered(result["shapes"], jobs.SHAPES))
        ]
        lines += ["Jobs with several effects, priced beside the same work on Lambda durable functions and Step", ""]
        lines[-2] += " Functions (US$ per million jobs; the effects' own compute left out on every side):"
        lines += [_table(["shape", "WRU / job", "converge", "durable functions", "Step Functions"], rows)]
    return "\n".join(lines)


def _signals(result: dict[str, Any]) -> str:
    prices = result.get("prices", {})
    intro = f"""## What a signal costs

A job that waits for a [signal](signals.md) (`bench.wait-for-signal.v1`: a step, `ctx.wait_for` a day at most, a
step), beside a plain job (`bench.noop.v1`) and the same two steps around a 300 s `ctx.wait` (`bench.wait.v1`),
run as the happy path is (`benchmarks/converge_bench/signals.py`; `signals` in `--json`). Once every signalled job
waits, a producer sends each its signal with `Converge.signal` on its own clients, so the sender's read, its signal
item and its wake are metered with the job; the timeout of a day is a one-time schedule, created when the job waits
and deleted when the signal wakes it (the scheduler requests column). Dollars count DynamoDB, SQS and Lambda
requests, as the shapes above do.

The same wait elsewhere, at the prices of the pages below as of {prices.get("orchestration_as_of", DASH)}:

- Step Functions, standard workflow, with a `.waitForTaskToken` Task between two Lambda Tasks: three state
  transitions at US$ {1e6 * prices.get("step_functions_transition", 0):.2f} per million
  (<https://aws.amazon.com/step-functions/pricing/>, US East (N. Virginia)) and two Lambda requests; completing the
  token (`SendTaskSuccess`) is not billed apart.
- Lambda durable functions, a callback between two steps: four durable operations (two steps, the callback, the
  execution) at US$ {1e6 * prices.get("durable_operation", 0):.2f} per million
  (<https://aws.amazon.com/lambda/pricing/>, US East (N. Virginia)) and two requests (the first invocation, and the
  one the callback's completion resumes); `SendDurableExecutionCallbackSuccess` is not billed apart.
- Lambda requests at US$ {1e6 * prices.get("lambda_request", 0):.2f} per million on every side
  (<https://aws.amazon.com/lambda/pricing/>); the effects' own compute is left out everywhere.
"""
    figures = result.get("signals")
    if not figures:
        return intro + "\nThe run on this page predates these rows: `converge bench --json` reports them.\n"
    rows = [
        [
            name.replace("_", " "),
            f"`{figures[name]['job_type']}`",
            f"{figures[name]['write_units_per_job']:.2f}",
            f"{figures[name]['read_units_per_job']:.2f}",
            f"{figures[name]['scheduler_requests_per_job']:.2f}",
            f"{figures[name]['usd_per_million_jobs']:.2f}",
        ]
        for name in ("plain", "time_wait", "signal_wait")
    ]
    table = _table(["job", "job type", "WRU / job", "RRU / job", "scheduler requests / job", "US$ / M jobs"], rows, 2)
    elsewhere = (
        f"The same wait: Step Functions (task token) US$ "
        f"{figures['step_functions_task_token_usd_per_million']:.2f}, durable functions (callback) US$ "
        f"{figures['durable_functions_callback_usd_per_million']:.2f} per million jobs."
    )
    return f"{intro}\n{table}\n{elsewhere}\n"


FLOW_CONTROL = {
    "plain": "a plain job",
    "rate_limited": "a rate-limited job (within its limit)",
    "sharded": "a rate-limited job, its key over four items",
    "capped": "a capped job (its key not full)",
    "debounced": "a debounced job (a burst of one: it runs)",
    "debounced_burst": "a debounced burst (one key: one run, the rest NOOP)",
}
"""The flow control rows of the report (`converge_bench.limits`), in the page's order, with their names."""


def _flow_control(result: dict[str, Any]) -> str:
    rows_by_name = result.get("flow_control") or {}
    plain = rows_by_name.get("plain")
    if not plain:
        return ""
    rows = [
        [
            label,
            f"`{row['job_type']}`",
            f"{row['write_units_per_job']:.2f}",
            f"{row['write_units_per_job'] - plain['write_units_per_job']:+.2f}" if name != "plain" else DASH,
            f"{row['read_units_per_job']:.2f}",
            row["completed"],
        ]
        for name, label in FLOW_CONTROL.items()
        if (row := rows_by_name.get(name))
    ]
    lines = [
        "## Flow control",
        "",
        "What a job costs under a rate limit, a concurrency cap and a debounce, per request",
    ]
    lines[-1] += " ([flow control](flow-control.md)):"
    lines += ["", _table(["job", "job type", "WRU / job", "over plain", "RRU / job", "succeeded"], rows, right=2)]
    lines += _hottest_item(result.get("flow_control") or {})
    return "\n".join(lines)


def _hottest_item(figures: dict[str, Any]) -> list[str]:
    """The hottest limiter item at 1,000 jobs a second of one key (and over four items), and a cap key's."""
    hot = figures.get("hot_limiter_key")
    if hot is None:
        if "extra_write_units_per_job" not in figures:
            return []
        # A report from before the item was measured apart: each reservation is the rate-limited job's extra write
        per_job = figures["extra_write_units_per_job"]
        return [
            f"The hottest limiter item: a reservation is the rate-limited job's extra {per_job:g} write unit on its"
            f" key's one item, so 1,000 jobs a second of one key are {per_job * 1000:,.0f} write units a second on"
            " one item, against the 1,000 a second one partition takes.",
            "",
        ]
    line = (
        f"The hottest limiter item at {hot['jobs_per_second']:,} jobs a second of one key:"
        f" {hot['write_units_per_job']:g} write unit a reservation, {hot['write_units_per_second']:,.0f} write"
        f" units a second on one item, against the {hot['limit']:,.0f} one partition takes"
    )
    sharded = figures.get("hot_sharded_limiter_key")
    if sharded:
        line += f"; the key over {sharded['shards']} items: {sharded['write_units_per_second']:,.0f} on the hottest"
    line += "."
    cap = figures.get("hot_cap_key")
    if cap:
        line += (
            f" A cap's key takes {cap['write_units_per_job']:g} a job (its slot taken and given back):"
            f" {cap['write_units_per_second']:,.0f} a second at {cap['jobs_per_second']:,} starts a second."
        )
    return [line, ""]


def _measured(result: dict[str, Any]) -> str:
    assumptions = "\n".join(f"- {line}" for line in result.get("assumptions", []))
    return f"""## How it is measured

- **Capacity units** are computed, not taken from moto: every botocore call in the process is
  intercepted, and item sizes are read from moto's state before and after each write with AWS's
  sizing rules (1 WRU per started KB of the larger image, conditional failures included,
  transactions twice; 1 RRU per started 4 KB strongly consistent, half eventually consistent; Query sums
  the items read). A write also pays for each global secondary index it touches, counted into the write
  units and shown apart.
- **Overhead per message** is the worker's CPU time per record, less the no-op runner's (the median over a
  round's invocations), measured by running each worker invocation three more times against the AWS answers
  the emulator gave the first time and keeping the least: botocore's whole client side runs, the emulator does
  not. The process signs with awscrt where it is installed (the dev tools bring it); a Lambda's botocore signs
  in Python. Its target holds in every round, not only in the median.
- **Cold start**: see above; `tests/bench` checks the report's keys and targets, and that this page is what
  the report it was written from renders; it times nothing itself.

The report's own statement of its assumptions:

{assumptions}
"""
