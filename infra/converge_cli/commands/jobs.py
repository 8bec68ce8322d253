"""`converge jobs list`: the job types the project's catalogue registers."""

from __future__ import annotations

from typing import Annotated

import typer

from converge.flow.registry import load_catalogue
from converge_cli.commands.jobs_caps import queue_caps
from converge_cli.support.errors import UsageError, fails_cleanly
from converge_cli.support.options import Json, print_json
from converge_cli.support.output import Column, literal, records, stdout, styled
from localcloud.project import NoTemplate, current, current_catalogue

jobs_app = typer.Typer(help="The registered job types.", no_args_is_help=True)


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


def has_template() -> bool:
    try:
        current()
    except NoTemplate:
        return False
    return True
