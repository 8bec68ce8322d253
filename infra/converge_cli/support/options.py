"""Options every command shares, so they are spelled and documented the same everywhere."""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable
from typing import Annotated, Any

import typer

from converge_cli.support.errors import UsageError
from converge_cli.support.output import print_json
from converge_cli.support.target import Target

__all__ = ["Endpoint", "Json", "Profile", "Region", "Stack", "on_deployment", "print_json", "target"]

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


_NAMING = tuple(
    inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=option)
    for name, option, default in (
        ("endpoint_url", Endpoint, None),
        ("stack", Stack, "converge"),
        ("region", Region, None),
        ("profile", Profile, None),
    )
)
"""The options that name a deployment, as every command that acts on one takes them."""


def on_deployment(command: Callable[..., Any]) -> Callable[..., Any]:
    """A command that acts on a deployment: written with a `deployment: Target` parameter, it takes instead the
    options that name one (--endpoint-url, --stack, --region, --profile), in that parameter's place, and is given
    the `Target` they name. Typer (and `--help`) read the options from the signature this gives."""
    own = inspect.signature(command, eval_str=True)
    if "deployment" not in own.parameters:
        raise TypeError(f"{command.__name__} takes no `deployment` parameter to give the target in")
    parameters: list[inspect.Parameter] = []
    for parameter in own.parameters.values():
        named = parameter.replace(kind=inspect.Parameter.KEYWORD_ONLY)
        parameters.extend(_NAMING if parameter.name == "deployment" else [named])

    @functools.wraps(command)
    def call(
        *args: Any,
        endpoint_url: str | None = None,
        stack: str = "converge",
        region: str | None = None,
        profile: str | None = None,
        **kwargs: Any,
    ) -> Any:
        return command(*args, deployment=target(endpoint_url, stack, region, profile), **kwargs)

    call.__signature__ = own.replace(parameters=parameters)  # type: ignore[attr-defined]
    call.__annotations__ = {p.name: p.annotation for p in parameters} | {"return": own.return_annotation}
    return call


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
