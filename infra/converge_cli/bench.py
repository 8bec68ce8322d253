"""`converge bench`: what a job costs, converge beside a Powertools-only baseline, on the local cloud."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from converge_cli.errors import ExitCode, UsageError, fails_cleanly
from converge_cli.options import Json, print_json
from converge_cli.output import literal, say, stdout, styled

ROWS = (
    ("write_units_per_job", "DynamoDB write units / job", "{:.2f}"),
    ("index_write_units_per_job", "  … of them on indexes", "{:.2f}"),
    ("read_units_per_job", "DynamoDB read units / job", "{:.2f}"),
    ("sqs_requests_per_job", "SQS requests / job", "{:.2f}"),
    ("usd_per_million_jobs", "US$ / million jobs", "{:.3f}"),
    ("usd_per_million_jobs_with_logs", "  … with CloudWatch Logs", "{:.3f}"),
    ("overhead_us_per_message", "overhead / message (µs, replayed)", "{:.0f}"),
    ("overhead_us_per_message_live", "  … live, emulator time removed", "{:.0f}"),
    ("jobs_per_second", "jobs / s (emulator time removed)", "{:.0f}"),
    ("wall_jobs_per_second", "jobs / s (wall, on moto)", "{:.1f}"),
    ("cold_start_ms", "cold start (ms)", "{:.0f}"),
)


@fails_cleanly
def bench(
    jobs: Annotated[int, typer.Option("--jobs", min=10, help="Jobs per design, end to end.")] = 500,
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
    cold_starts: Annotated[
        int, typer.Option("--cold-starts", min=0, help="Fresh interpreters per design for the cold start (median).")
    ] = 3,
    as_json: Json = False,
) -> None:
    """Run N jobs through converge and through a Powertools-only baseline on the in-process local cloud.

    Reports DynamoDB units (from item sizes), SQS requests, Lambda invocations, dollars per million jobs,
    per-message overhead, throughput and cold start, as converge / baseline ratios, and the targets.
    Exits 1 when a target fails (the report is printed all the same).
    """
    from converge_bench import report  # moto and both designs: loaded only for this command

    if scale_check and jobs > 20_000:
        raise UsageError("--scale-check measures 1,000 and 20,000 jobs; use --jobs 20000 or fewer with it")
    options = report.Options(
        jobs=jobs,
        scale_small=1_000 if scale_check else None,
        scale_large=20_000 if scale_check else None,
        attention_sizes=(1_000, attention_items),
        coldstart_repeats=cold_starts,
        progress=(lambda message: None) if as_json else (lambda message: say(stdout(), styled(f"… {message}", "dim"))),
    )
    # The handlers log at the templates' level (INFO): their log volume is part of what a job costs.
    result = report.run(options)
    if as_json:
        print_json(result)
    else:
        _render(result, stdout())
    if not all(target["pass"] for target in result["targets"]):
        raise typer.Exit(ExitCode.FAILED)


def _cell(value: Any, spec: str) -> str:
    return "-" if value is None else spec.format(value)


def _render(result: dict[str, Any], console: Console) -> None:
    converge, baseline, ratios = result["converge"], result["baseline"], result["ratios"]
    table = Table(title=f"What a job costs: {result['jobs']} jobs per design, end to end on the local cloud")
    table.add_column("per job")
    table.add_column("converge", justify="right")
    table.add_column("baseline (Powertools only)", justify="right")
    table.add_column("converge / baseline", justify="right")
    for key, label, spec in ROWS:
        table.add_row(
            label, _cell(converge.get(key), spec), _cell(baseline.get(key), spec), _cell(ratios.get(key), "{:.2f}")
        )
    console.print(table)

    costs = Table(title="US$ per million jobs, by line item (on-demand, us-east-1)")
    costs.add_column("item")
    costs.add_column("converge", justify="right")
    costs.add_column("baseline", justify="right")
    for item, value in converge["usd_per_million_by_item"].items():
        costs.add_row(item, f"{value:.4f}", f"{baseline['usd_per_million_by_item'][item]:.4f}")
    console.print(costs)

    calls = Table(title="API calls per job (handlers and producer; pollers apart)")
    calls.add_column("service:operation")
    calls.add_column("converge", justify="right")
    calls.add_column("baseline", justify="right")
    names = sorted(set(converge["api_calls_per_job"]) | set(baseline["api_calls_per_job"]))
    for name in names:
        calls.add_row(
            name,
            _cell(converge["api_calls_per_job"].get(name), "{:.2f}"),
            _cell(baseline["api_calls_per_job"].get(name), "{:.2f}"),
        )
    invocations = {
        "converge": converge["lambda_invocations_per_job"],
        "baseline": baseline["lambda_invocations_per_job"],
    }
    calls.add_row("lambda invocations", f"{invocations['converge']:.2f}", f"{invocations['baseline']:.2f}")
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

    targets = Table(title="Targets")
    targets.add_column("target")
    targets.add_column("value", justify="right")
    targets.add_column("limit", justify="right")
    targets.add_column("")
    for target in result["targets"]:
        verdict = styled("PASS", "bold green") if target["pass"] else styled("FAIL", "bold red")
        targets.add_row(literal(target["name"]), _cell(target["value"], "{:g}"), f"{target['limit']:g}", verdict)
    console.print(targets)
    say(console, styled(f"prices: {result['prices']['as_of']}, {result['prices']['region']}", "dim"))
    for assumption in result["assumptions"]:
        say(console, styled(f"- {assumption}", "dim"))
