"""The `converge` command: enqueue, inspect and operate converge deployments, or run them locally."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from converge.flow.registry import load_catalogue
from converge_bench.command import bench
from converge_cli.commands.batches import batches_app
from converge_cli.commands.console import console
from converge_cli.commands.dlq import dlq_app
from converge_cli.commands.init import init
from converge_cli.commands.jobs_caps import queue_caps
from converge_cli.commands.link import link_command
from converge_cli.commands.local import local_app
from converge_cli.commands.ops import ops_app
from converge_cli.commands.status import STATUS, STATUS_HELP
from converge_cli.commands.toggles import toggles_app
from converge_cli.support.app import new_app
from converge_cli.support.errors import UsageError, fails_cleanly
from converge_cli.support.lookup import require_job_type
from converge_cli.support.options import Endpoint, Json, Profile, Region, Stack, print_json, target
from converge_cli.support.output import Column, literal, records, say, stdout, styled
from localcloud.project import NoTemplate, current, current_catalogue

app = new_app()
jobs_app = typer.Typer(help="The registered job types.", no_args_is_help=True)
app.add_typer(jobs_app, name="jobs")
app.add_typer(ops_app, name="ops")
app.add_typer(batches_app, name="batches")
app.add_typer(toggles_app, name="toggles")
app.add_typer(dlq_app, name="dlq")
app.add_typer(local_app, name="local")
app.command("status", help=STATUS_HELP)(STATUS)
app.command("bench")(bench)
app.command("console")(console)
app.command("init")(init)
app.command("link")(link_command)


@app.command()
@fails_cleanly
def enqueue(
    job_type: Annotated[str, typer.Argument(help="Versioned job type, e.g. billing.invoice-email.v1.")],
    operation_id: Annotated[str, typer.Option("--id", help="The business-operation id (reused on every retry).")],
    payload: Annotated[str, typer.Option("--payload", help="The job's payload as a JSON object.")],
    correlation_id: Annotated[str | None, typer.Option("--correlation-id", help="Ties logs together.")] = None,
    run_at: Annotated[
        str | None, typer.Option("--at", help="Not before this time (ISO-8601 UTC, at most a year ahead).")
    ] = None,
    expires_at: Annotated[
        str | None, typer.Option("--expires-at", help="Not started by this time (ISO-8601 UTC), it ends EXPIRED.")
    ] = None,
    endpoint_url: Endpoint = None,
    stack: Stack = "converge",
    region: Region = None,
    profile: Profile = None,
    as_json: Json = False,
) -> None:
    """Admit a job. The same id with the same payload is the same operation; other content is refused."""
    try:
        data = json.loads(payload)
    except ValueError as exc:
        raise UsageError(f"--payload is not valid JSON: {exc}") from None
    deployment = target(endpoint_url, stack, region, profile)
    require_job_type(deployment.registry, job_type)
    converge = deployment.converge
    admission = converge.enqueue(job_type, operation_id, data, correlation_id, run_at=run_at, expires_at=expires_at)
    result = {"operation_id": operation_id, "created": admission.created, "state": admission.operation.state.value}
    if run_at:
        result["run_at"] = admission.operation.request.run_at if admission.operation.request else run_at
    if as_json:
        print_json(result)
    elif admission.created:
        due = f", due at {result['run_at']}" if run_at else ""
        say(stdout(), "accepted ", styled(operation_id, "bold"), f" ({job_type}{due})")
    else:
        say(
            stdout(),
            styled(operation_id, "bold"),
            f" already exists with the same content: {result['state']}, not re-sent",
        )


@jobs_app.command("list")
@fails_cleanly
def jobs_list(
    stage: Annotated[str, typer.Option("--stage", envvar="CONVERGE_STAGE", help="Stage for toggle names.")] = "dev",
    as_json: Json = False,
) -> None:
    """Every registered job type, its queue (and the queue's concurrency cap), policy, toggle and an example payload."""
    try:
        registry = load_catalogue(current_catalogue())
    except ImportError as exc:
        raise UsageError(f"cannot import the job catalogue: {exc}") from None
    caps = queue_caps() if has_template() else {}  # a catalogue named outside any project: no template to read
    rows = [
        {
            "job_type": binding.job_type,
            "queue": binding.queue.value if binding.queue else None,
            "max_concurrency": caps.get(binding.queue.value) if binding.queue else None,
            "default_enabled": binding.default_enabled,
            "policy": binding.policy.value,
            "toggle_parameter": f"/converge/{stage}/toggles/{binding.toggle_key}",
            "example_payload": binding.example_payload,
            "description": binding.description,
            "allowed_fields": {
                name: [{"kind": allow.kind, "reason": allow.reason} for allow in allows]
                for name, allows in binding.message_class().allowances().items()
            },
        }
        for binding in registry
    ]
    if as_json:
        print_json(rows)
        return
    records(
        stdout(),
        ["job type", "queue", "cap", "policy", "default", Column("toggle parameter"), Column("allowed fields")],
        [
            [
                row["job_type"],
                row["queue"] or "(schedule)",
                str(row["max_concurrency"]) if row["max_concurrency"] is not None else "-",
                row["policy"],
                "on" if row["default_enabled"] else styled("off (fail-closed)", "red"),
                literal(row["toggle_parameter"]),
                literal(
                    "; ".join(
                        f"{name} ({allow['kind']}): {allow['reason']}"
                        for name, allows in row["allowed_fields"].items()
                        for allow in allows
                    )
                ),
            ]
            for row in rows
        ],
    )


@app.command()
@fails_cleanly
def demo(
    chaos: Annotated[bool, typer.Option("--chaos", help="Inject faults and check the invariants under load.")] = False,
    seed: Annotated[int, typer.Option("--seed", help="Random seed for --chaos.")] = 7,
    jobs: Annotated[int, typer.Option("--jobs", min=1, help="How many jobs --chaos runs.")] = 500,
    as_json: Json = False,
) -> None:
    """The main job: the whole pipeline on the in-process local cloud, with a report that checks itself."""
    # Each prints its own report (tables, or JSON with --json).
    if chaos:
        from converge_cli.commands.demo_chaos import run_chaos

        _, ok = run_chaos(seed=seed, jobs=jobs, console=stdout(), as_json=as_json, cli=app)
    else:
        from converge_cli.commands.demo_run import run_demo

        _, ok = run_demo(stdout(), as_json)
    raise typer.Exit(0 if ok else 1)


def has_template() -> bool:
    try:
        current()
    except NoTemplate:
        return False
    return True


def main() -> None:
    app()
