"""Options every command shares, so they are spelled and documented the same everywhere."""

from __future__ import annotations

import re
from typing import Annotated

import typer

from converge_cli.support.errors import UsageError
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


_DURATION = re.compile(r"^\s*(\d+)\s*([smhd]?)\s*$")
_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str | None, option: str) -> int | None:
    """'90', '90s', '10m', '1h', '2d' as seconds."""
    if text is None:
        return None
    match = _DURATION.match(text.lower())
    if not match:
        raise UsageError(f"{option} {text!r} is not a duration like 90s, 10m, 1h or 2d")
    return int(match.group(1)) * _UNITS[match.group(2)]
