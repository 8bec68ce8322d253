"""`converge bench`: what a job costs, converge beside two Powertools-only baselines, on the local cloud."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from converge_cli.support.errors import ExitCode, UsageError, fails_cleanly
from converge_cli.support.options import Json, print_json
from converge_cli.support.output import literal, say, stdout, styled

ROWS = (
    ("write_units_per_job", "DynamoDB write units / job", "{:.2f}"),
    ("index_write_units_per_job", "  … of them on indexes", "{:.2f}"),
    ("read_units_per_job", "DynamoDB read units / job", "{:.2f}"),
    ("sqs_requests_per_job", "SQS requests / job", "{:.2f}"),
    ("usd_per_million_jobs", "US$ / million jobs", "{:.3f}"),
    ("usd_per_million_jobs_with_logs", "  … with CloudWatch Logs", "{:.3f}"),
    ("overhead_us_per_message", "overhead / message (µs, replayed, all rounds)", "{:.0f}"),
    ("overhead_us_per_message_live", "  … live, emulator time removed", "{:.0f}"),
    ("jobs_per_second", "jobs / s (emulator time removed)", "{:.0f}"),
    ("wall_jobs_per_second", "jobs / s (wall, on moto)", "{:.1f}"),
    ("cold_start_ms", "worker cold start (ms, median)", "{:.0f}"),
    ("enqueue_api_cold_start_ms", "enqueue API cold start (ms, median)", "{:.0f}"),
)
ROUND_ROWS = (
    ("overhead_us_per_message", "overhead / message, converge / bare baseline"),
    ("overhead_us_per_message_same_job", "overhead / message, converge / same-job baseline"),
    ("cold_start_bare", "worker cold start, converge / bare baseline"),
    ("cold_start_same_job", "worker cold start, converge / same-job baseline"),
    ("cold_start_enqueue_api_same_job", "enqueue API cold start, converge / same-job baseline"),
)


@fails_cleanly
def bench(
    jobs: Annotated[int, typer.Option("--jobs", min=10, help="Jobs per design, end to end, over all rounds.")] = 400,
    scale_check: Annotated[
        bool,
        typer.Option(
            "--scale-check",
            help="Measure converge's cost per job at 1,000 and 20,000 jobs (slow: about 15 minutes). "
            "Without it the drift is measured from --jobs/20 to --jobs.",
        ),
    ] = False,
    attention_items: Annotated[
        int, typer.Option("--attention-items", min=1_000, help="Size of the large table for the attention check.")
    ] = 100_000,
    rounds: Annotated[
        int,
        typer.Option(
            "--rounds",
            min=1,
            help="Interleaved rounds: each runs --jobs/rounds jobs and one fresh interpreter per function through "
            "every design in turn; every ratio is the median of the rounds (5 or more for figures that hold still).",
        ),
    ] = 5,
    cold_starts: Annotated[
        bool, typer.Option("--cold-starts/--no-cold-starts", help="Measure cold starts (fresh interpreters).")
    ] = True,
    batch_children: Annotated[
        int,
        typer.Option(
            "--batch-children",
            min=0,
            help="Children of the batch row (admitted, run and completed on the local cloud; about two minutes for "
            "1,000); 0: no batch row.",
        ),
    ] = 1_000,
    batch_large: Annotated[
        bool,
        typer.Option(
            "--batch-large",
            help="Add the row of a batch of 10,000 children (the local cloud's time and memory grow faster than the "
            "batch: 2,000 children take 6 minutes and 4 GB; 10,000 need some 25 GB, and about an hour).",
        ),
    ] = False,
    write_docs: Annotated[
        bool,
        typer.Option(
            "--write-docs",
            help="Write docs/benchmarks.md from this run's report, and the report beside it "
            "(benchmarks/latest-report.json): the date, the machine's load before and after, every median, spread "
            "and target. From a checkout of converge (the page and the report are its files).",
        ),
    ] = False,
    as_json: Json = False,
) -> None:
    """Run N jobs through converge and through two Powertools-only baselines on the in-process local cloud.

    The baselines: the bare one (batch and idempotency only) and the same-job one (also a parser for the
    message and a fail-closed kill switch; and an enqueue API). Reports DynamoDB units (from item sizes), SQS
    requests, Lambda invocations, dollars per million jobs, per-message overhead, throughput and cold start
    as Lambda pays it, for all three, with ratios (the median of interleaved rounds and their spread) and the
    targets. Exits 1 when a target fails (the report is printed all the same).
    """
    from converge_bench import page, report  # moto and both designs: loaded only for this command

    if scale_check and jobs > 20_000:
        raise UsageError("--scale-check measures 1,000 and 20,000 jobs; use --jobs 20000 or fewer with it")
    if write_docs and not (page.PAGE.is_file() and page.REPORT.parent.is_dir()):
        raise UsageError(f"--write-docs writes {page.PAGE} in a checkout of converge; it is not there")
    options = report.Options(
        jobs=jobs,
        scale_small=1_000 if scale_check else None,
        scale_large=20_000 if scale_check else None,
        attention_sizes=(1_000, attention_items),
        rounds=rounds,
        cold_starts=cold_starts,
        batch_sizes=tuple(size for size in (batch_children, 10_000 if batch_large else 0) if size),
        progress=(lambda message: None) if as_json else (lambda message: say(stdout(), styled(f"… {message}", "dim"))),
        command=_command(
            jobs, rounds, scale_check, cold_starts, batch_children, batch_large, attention_items, write_docs
        ),
    )
    # The handlers log at the templates' level (INFO): their log volume is part of what a job costs.
    result = report.run(options)
    if write_docs:
        page.write(result)
    if as_json:
        print_json(result)
    else:
        _render(result, stdout())
        if write_docs:
            say(stdout(), f"wrote {page.PAGE} and {page.REPORT}")
    if not all(target["pass"] for target in result["targets"]):
        raise typer.Exit(ExitCode.FAILED)


def _command(
    jobs: int,
    rounds: int,
    scale_check: bool,
    cold_starts: bool,
    batch_children: int,
    batch_large: bool,
    attention_items: int,
    write_docs: bool,
) -> str:
    """The command line of this run, its defaults left out (as the page written from it names it)."""
    words = ["converge bench"]
    for flag, value, default in (
        ("--jobs", jobs, 400),
        ("--rounds", rounds, 5),
        ("--batch-children", batch_children, 1_000),
        ("--attention-items", attention_items, 100_000),
    ):
        if value != default:
            words.append(f"{flag} {value}")
    words += [flag for flag, on in (("--scale-check", scale_check), ("--batch-large", batch_large)) if on]
    words += ["--no-cold-starts"] if not cold_starts else []
    words += ["--write-docs"] if write_docs else []
    return " ".join(words)


def _cell(value: Any, spec: str) -> str:
    return "-" if value is None else spec.format(value)


DESIGN_TITLES = {"converge": "converge", "baseline": "bare baseline", "same_job": "same-job baseline"}


def _render(result: dict[str, Any], console: Console) -> None:
    converge, baseline, same_job = result["converge"], result["baseline"], result["same_job"]
    ratios, ratios_same_job = result["ratios"], result["ratios_same_job"]
    table = Table(
        title=f"What a job costs: {result['jobs']} jobs per design in {result['rounds']} interleaved rounds, "
        "end to end on the local cloud"
    )
    table.add_column("per job")
    for title in DESIGN_TITLES.values():
        table.add_column(title, justify="right")
    table.add_column("converge / bare", justify="right")
    table.add_column("converge / same-job", justify="right")
    for key, label, spec in ROWS:
        table.add_row(
            label,
            _cell(converge.get(key), spec),
            _cell(baseline.get(key), spec),
            _cell(same_job.get(key), spec),
            _cell(ratios.get(key), "{:.2f}"),
            _cell(ratios_same_job.get(key), "{:.2f}"),
        )
    console.print(table)

    rounds = Table(title=f"Ratios over {result['rounds']} interleaved rounds (median, spread min-max, each round)")
    rounds.add_column("ratio")
    rounds.add_column("median", justify="right")
    rounds.add_column("spread", justify="right")
    rounds.add_column("rounds", justify="left")
    for key, label in ROUND_ROWS:
        values = result["round_ratios"].get(key)
        if values is None:
            continue
        spread = result["spread"].get(key)
        rounds.add_row(
            label,
            _cell(ratios.get(key), "{:.2f}"),
            f"{spread[0]:.2f}-{spread[1]:.2f}" if spread else "-",
            " ".join(_cell(value, "{:.2f}") for value in values),
        )
    console.print(rounds)

    if result.get("cold_start"):
        cold = Table(
            title="Cold start as Lambda pays it: what each is made of (ms; under -X importtime, the median of runs)"
        )
        cold.add_column("part")
        subjects = result["cold_start"]
        for key in subjects:
            cold.add_column(key.replace("_", " ").replace("/", " / "), justify="right")
        parts = list(next(iter(subjects.values()))["made_of_ms"])
        for part in parts:
            cold.add_row(part, *(_cell(subject["made_of_ms"].get(part), "{:.0f}") for subject in subjects.values()))
        cold.add_row("median CPU time (the ratios' basis)", *(_cell(s["cpu_ms"], "{:.0f}") for s in subjects.values()))
        cold.add_row("median wall time", *(_cell(s["total_ms"], "{:.0f}") for s in subjects.values()))
        cold.add_row(
            "after a SnapStart restore (wall, local estimate)",
            *(_cell(s.get("after_restore_ms"), "{:.0f}") for s in subjects.values()),
        )
        console.print(cold)

    if result.get("snapstart"):
        snap = Table(title="SnapStart for converge's functions (512 MB; modelled from the CPU times above)")
        snap.add_column("per function")
        for key in result["snapstart"]:
            snap.add_column(key.split("/")[0].replace("_", " "), justify="right")
        for row, label, spec in (
            ("start_ms_at_memory", "cold start at 512 MB (ms)", "{:.0f}"),
            ("start_ms_after_restore_at_memory", "after a restore at 512 MB (ms, + the restore itself)", "{:.0f}"),
            ("cache_usd_per_month", "snapshot cache, US$ / month per version", "{:.2f}"),
            ("restore_usd_per_million_starts", "restores, US$ / million starts", "{:.2f}"),
            ("start_duration_usd_per_million_starts", "init duration without it, US$ / million starts", "{:.2f}"),
        ):
            snap.add_row(label, *(_cell(costs[row], spec) for costs in result["snapstart"].values()))
        console.print(snap)

    designs = [result[design] for design in DESIGN_TITLES]
    costs = Table(title="US$ per million jobs, by line item (on-demand, us-east-1)")
    costs.add_column("item")
    for title in DESIGN_TITLES.values():
        costs.add_column(title, justify="right")
    for item in converge["usd_per_million_by_item"]:
        costs.add_row(item, *(f"{figures['usd_per_million_by_item'][item]:.4f}" for figures in designs))
    console.print(costs)

    calls = Table(title="API calls per job (handlers and producer; pollers apart)")
    calls.add_column("service:operation")
    for title in DESIGN_TITLES.values():
        calls.add_column(title, justify="right")
    names = sorted({name for figures in designs for name in figures["api_calls_per_job"]})
    for name in names:
        calls.add_row(name, *(_cell(figures["api_calls_per_job"].get(name), "{:.2f}") for figures in designs))
    calls.add_row("lambda invocations", *(f"{figures['lambda_invocations_per_job']:.2f}" for figures in designs))
    console.print(calls)

    if result.get("per_policy"):
        policies = Table(title="converge happy path per policy")
        policies.add_column("policy")
        policies.add_column("job type")
        policies.add_column("WRU / job", justify="right")
        policies.add_column("RRU / job", justify="right")
        policies.add_column("succeeded", justify="right")
        for policy, row in result["per_policy"].items():
            policies.add_row(
                policy,
                row["job_type"],
                f"{row['write_units_per_job']:.2f}",
                f"{row['read_units_per_job']:.2f}",
                row["completed"],
            )
        console.print(policies)

    if result.get("delayed"):
        delayed = Table(title="a delayed job's cost over an immediate one")
        delayed.add_column("job")
        for column in ("WRU / job", "over immediate", "scheduler requests / job", "firings / job", "succeeded"):
            delayed.add_column(column, justify="right")
        for name, row in result["delayed"].items():
            delayed.add_row(
                name.replace("_", " "),
                f"{row['write_units_per_job']:.2f}",
                _cell(row.get("extra_write_units_per_job"), "{:+.2f}"),
                f"{row['scheduler_requests_per_job']:.2f}",
                f"{row['schedule_firings_per_job']:.2f}",
                row["completed"],
            )
        console.print(delayed)

    if result.get("shapes"):
        shapes = Table(title="jobs with several effects, and the same work on durable functions and Step Functions")
        shapes.add_column("shape")
        columns = ("WRU / job", "RRU / job", "$ / M jobs", "durable fn $ / M", "ratio", "Step Functions $ / M", "ratio")
        for column in (*columns, "succeeded"):
            shapes.add_column(column, justify="right")
        for name, row in result["shapes"].items():
            shapes.add_row(
                name.replace("_", " "),
                f"{row['write_units_per_job']:.2f}",
                f"{row['read_units_per_job']:.2f}",
                f"{row['usd_per_million_jobs']:.2f}",
                f"{row['durable_functions_usd_per_million']:.2f}",
                _cell(row.get("ratio_to_durable_functions"), "{:g}"),
                f"{row['step_functions_usd_per_million']:.2f}",
                _cell(row.get("ratio_to_step_functions"), "{:g}"),
                row["succeeded"],
            )
        console.print(shapes)

    if result.get("signals"):
        _render_signals(result["signals"], console)

    if result.get("batches"):
        _render_batches(result["batches"], console)

    targets = Table(title="Targets")
    targets.add_column("target")
    targets.add_column("value", justify="right")
    targets.add_column("limit", justify="right")
    targets.add_column("spread", justify="right")
    targets.add_column("")
    for target in result["targets"]:
        verdict = styled("PASS", "bold green") if target["pass"] else styled("FAIL", "bold red")
        spread = target.get("spread")
        targets.add_row(
            literal(target["name"]),
            _cell(target["value"], "{:g}"),
            f"{target['limit']:g}",
            f"{spread[0]:g}-{spread[1]:g}" if spread else "",
            verdict,
        )
    console.print(targets)
    for target in result["targets"]:
        if target.get("note") and not target["pass"]:
            say(console, styled(f"{target['name']}: {target['note']}", "dim"))
    say(console, styled(f"prices: {result['prices']['as_of']}, {result['prices']['region']}", "dim"))
    for assumption in result["assumptions"]:
        say(console, styled(f"- {assumption}", "dim"))


def _render_signals(figures: dict[str, Any], console: Console) -> None:
    table = Table(
        title="a job that waits for a signal, beside a plain job and a time wait; the same wait is "
        f"US$ {figures['step_functions_task_token_usd_per_million']:.2f} / M on Step Functions (task token), "
        f"{figures['durable_functions_callback_usd_per_million']:.2f} on durable functions (callback)"
    )
    table.add_column("job")
    columns = ("WRU / job", "over plain", "RRU / job", "over plain", "scheduler requests / job", "$ / M jobs")
    for column in (*columns, "completed"):
        table.add_column(column, justify="right")
    for name in ("plain", "time_wait", "signal_wait"):
        row = figures[name]
        table.add_row(
            name.replace("_", " "),
            f"{row['write_units_per_job']:.2f}",
            _cell(row.get("extra_write_units_per_job"), "{:+.2f}"),
            f"{row['read_units_per_job']:.2f}",
            _cell(row.get("extra_read_units_per_job"), "{:+.2f}"),
            f"{row['scheduler_requests_per_job']:.2f}",
            f"{row['usd_per_million_jobs']:.2f}",
            row["completed"],
        )
    console.print(table)


def _render_batches(figures: dict[str, Any], console: Console) -> None:
    table = Table(
        title="a batch: admitted, its children run, its callback once (no-op children; a plain job: "
        f"{figures['plain_write_units_per_job']:g} WRU)"
    )
    table.add_column("children", justify="right")
    for column in (
        "admission (s)",
        "WRU / child",
        "over a plain job",
        "RRU / child",
        "callback after the last child (s)",
        "counting shards",
        "hottest item at 5,000 children/s (WRU/s)",
        "run (s)",
    ):
        table.add_column(column, justify="right")
    for row in figures["rows"]:
        over = Text.assemble(f"{row['extra_write_units_per_child']:+.2f} ", _verdict(row["extra_write_units_pass"]))
        hottest = Text.assemble(f"{row['peak_item_write_units_per_second']:.0f} ", _verdict(row["peak_item_pass"]))
        table.add_row(
            f"{row['children']:,}",
            f"{row['admission_seconds']:.2f}",
            f"{row['write_units_per_child']:.3f}",
            over,
            f"{row['read_units_per_child']:.3f}",
            _cell(row["callback_latency_seconds"], "{:.3f}"),
            str(row["counting_shards"]),
            hottest,
            f"{row['seconds']:.0f}",
        )
    console.print(table)


def _verdict(passed: bool) -> Text:
    return styled("PASS", "bold green") if passed else styled("FAIL", "bold red")
