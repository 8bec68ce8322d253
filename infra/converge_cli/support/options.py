"""Options every command shares, so they are spelled and documented the same everywhere."""

from __future__ import annotations

from typing import Annotated

import typer

from converge_cli.support.output import print_json
from converge_cli.support.target import Target

__all__ = ["Endpoint", "Json", "Profile", "Region", "Stack", "print_json", "target"]

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
Region = Annotated[
    str | None,
    typer.Option("--region", envvar=["AWS_REGION", "AWS_DEFAULT_REGION"], help="AWS region (default: the profile's)."),
]
Profile = Annotated[
    str | None, typer.Option("--profile", envvar="AWS_PROFILE", help="Named profile from the AWS config files.")
]
Json = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON instead of tables.")]


def target(endpoint_url: str | None, stack: str, region: str | None, profile: str | None = None) -> Target:
    return Target(stack=stack, endpoint_url=endpoint_url, region=region, profile=profile)
