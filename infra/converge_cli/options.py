"""Options every command shares, so they are spelled and documented the same everywhere."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.console import Console

from converge_cli.target import Target

Endpoint = Annotated[
    str | None,
    typer.Option(
        "--endpoint-url",
        envvar="AWS_ENDPOINT_URL",
        help="A local endpoint (e.g. `converge local up`'s); default: AWS through the default credential chain.",
    ),
]
Stack = Annotated[
    str, typer.Option("--stack", envvar="CONVERGE_STACK", help="CloudFormation stack to read names from.")
]
Region = Annotated[str | None, typer.Option("--region", envvar="AWS_REGION", help="AWS region.")]
Json = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON instead of tables.")]

console = Console(highlight=False, soft_wrap=True)


def target(endpoint_url: str | None, stack: str, region: str | None) -> Target:
    return Target(stack=stack, endpoint_url=endpoint_url, region=region)


def print_json(value: Any) -> None:
    typer.echo(json.dumps(value, indent=2, sort_keys=True, default=str))
