"""The `converge` command: enqueue, inspect and operate converge deployments, or run them locally."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.table import Table

from converge.registry import load_catalogue
from converge_cli.bench import bench
from converge_cli.dlq import dlq_app
from converge_cli.errors import UsageError, fails_cleanly
from converge_cli.local import local_app
from converge_cli.ops import ops_app
from converge_cli.options import Endpoint, Json, Region, Stack, console, print_json, target
from converge_cli.toggles_cmd import toggles_app

app = typer.Typer(
    name="converge",
    help="Background jobs on AWS serverless that stay correct when every handler runs twice.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
jobs_app = typer.Typer(help="The registered job types.", no_args_is_help=True)
app.add_typer(jobs_app, name="jobs")
app.add_typer(ops_app, name="ops")
app.add_typer(toggles_app, name="toggles")
app.add_typer(dlq_app, name="dlq")
app.add_typer(local_app, name="local")
app.command("bench")(bench)


@app.command()
@fails_cleanly
def enqueue(
    job_type: Annotated[str, typer.Argument(help="Versioned job type, e.g. email.password-reset.v1.")],
    operation_id: Annotated[str, typer.Option("--id", help="The business-operation id (reused on every retry).")],
    payload: Annotated[str, typer.Option("--payload", help="The job's payload as a JSON object.")],
    correlation_id: Annotated[str | None, typer.Option("--correlation-id", help="Ties logs together.")] = None,
    endpoint_url: Endpoint = None,
    stack: Stack = "converge",
    region: Region = None,
    as_json: Json = False,
) -> None:
    """Admit a job. The same id with the same payload is the same operation; other content is refused."""
    try:
        data = json.loads(payload)
    except ValueError as exc:
        raise UsageError(f"--payload is not valid JSON: {exc}") from None
    admission = target(endpoint_url, stack, region).converge.enqueue(job_type, operation_id, data, correlation_id)
    result = {"operation_id": operation_id, "created": admission.created, "state": admission.operation.state.value}
    if as_json:
        print_json(result)
    elif admission.created:
        console.print(f"accepted [bold]{operation_id}[/] ({job_type})")
    else:
        console.print(f"[bold]{operation_id}[/] already exists with the same content: {result['state']}, not re-sent")


@jobs_app.command("list")
@fails_cleanly
def jobs_list(
    stage: Annotated[str, typer.Option("--stage", envvar="CONVERGE_STAGE", help="Stage for toggle names.")] = "dev",
    as_json: Json = False,
) -> None:
    """Every registered job type, its queue, policy, toggle and an example payload."""
    registry = load_catalogue("catalogue")
    rows = [
        {
            "job_type": binding.job_type,
            "queue": binding.queue.value if binding.queue else None,
            "default_enabled": binding.default_enabled,
            "policy": binding.policy.value,
            "toggle_parameter": f"/converge/{stage}/toggles/{binding.toggle_key}",
            "example_payload": binding.example_payload,
            "description": binding.description,
            "allowed_fields": {
                name: [{"kind": allow.kind, "reason": allow.reason} for allow in allows]
                for name, allows in binding.message.allowances().items()
            },
        }
        for binding in registry
    ]
    if as_json:
        print_json(rows)
        return
    table = Table("job type", "queue", "policy", "default", "toggle parameter", "allowed fields")
    for row in rows:
        table.add_row(
            row["job_type"],
            row["queue"] or "(schedule)",
            row["policy"],
            "on" if row["default_enabled"] else "[red]off (fail-closed)[/]",
            row["toggle_parameter"],
            "\n".join(
                f"{name} ({allow['kind']}): {allow['reason']}"
                for name, allows in row["allowed_fields"].items()
                for allow in allows
            ),
        )
    console.print(table)


@app.command()
@fails_cleanly
def demo(
    chaos: Annotated[bool, typer.Option("--chaos", help="Inject faults and check the invariants under load.")] = False,
    seed: Annotated[int, typer.Option("--seed", help="Random seed for --chaos.")] = 7,
    jobs: Annotated[int, typer.Option("--jobs", min=1, help="How many jobs --chaos runs.")] = 500,
    as_json: Json = False,
) -> None:
    """The main job: the whole pipeline on the in-process local cloud, with a report that checks itself."""
    from converge_cli.quiet import quiet_logs

    # Each prints its own report (tables, or JSON with --json).
    with quiet_logs():
        if chaos:
            from converge_cli.chaos import run_chaos

            _, ok = run_chaos(seed=seed, jobs=jobs, console=console, as_json=as_json)
        else:
            from converge_cli.demo import run_demo

            _, ok = run_demo(console, as_json)
    raise typer.Exit(0 if ok else 1)


def main() -> None:
    app()
