"""Every command fails the same way: one line on stderr (a JSON object under --json), a documented exit code.

Exit codes (docs/operating.md lists them too):

    0  done
    1  the command ran and something it checks failed (demo invariants, bench targets), or an unexpected error
    2  the request was refused: bad usage or input, an unknown name, a state that does not allow it
    3  no AWS credentials or region
    4  the deployment cannot be reached or found: endpoint down, unknown stack, port already in use
    5  AWS refused the call (the message is AWS's)
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, TypeVar

import typer
from botocore.exceptions import (
    ClientError,
    NoCredentialsError,
    NoRegionError,
    PartialCredentialsError,
    ProfileNotFound,
)
from botocore.exceptions import (
    ConnectionError as BotocoreConnectionError,
)

from converge.model.errors import ConvergeError, OperationNotFound
from converge_cli.support.output import say, stderr, styled
from converge_cli.support.target import InvalidEndpoint, TargetError
from localcloud.project import NoCatalogue, ProjectError

F = TypeVar("F", bound=Callable[..., Any])


class ExitCode(IntEnum):
    OK = 0
    FAILED = 1
    REFUSED = 2
    CREDENTIALS = 3
    UNREACHABLE = 4
    AWS = 5


class UsageError(Exception):
    """The command was asked for something that cannot be done (the message says why)."""


class Unavailable(Exception):
    """Something the command needs on this machine is not available (a port in use); the message says what."""


@dataclass(frozen=True)
class Failure:
    """What went wrong, for a person (message) and for a script (error, exit_code)."""

    error: str
    message: str
    exit_code: ExitCode


LOCAL_MODULES = frozenset({"moto", "samtranslator", "werkzeug", "flask_cors"})
"""What the local cloud imports from the `local` extra: a command that runs it without them says what to install."""


def explain(exc: BaseException, local: bool = False) -> Failure:
    """The failure an exception means; `local` says the target was an --endpoint-url, not AWS proper."""
    if isinstance(exc, (NoCredentialsError, PartialCredentialsError)):
        return Failure(
            "no_credentials",
            "no AWS credentials found: configure a profile or environment credentials, "
            "or point at a local cloud with --endpoint-url",
            ExitCode.CREDENTIALS,
        )
    if isinstance(exc, ProfileNotFound):
        return Failure("no_credentials", f"{exc} (see `aws configure list-profiles`)", ExitCode.CREDENTIALS)
    if isinstance(exc, NoRegionError):
        return Failure("no_region", "no AWS region configured: pass --region or set AWS_REGION", ExitCode.CREDENTIALS)
    if isinstance(exc, BotocoreConnectionError):  # botocore's: endpoint, proxy or connect timeout
        where = exc.kwargs.get("endpoint_url") or exc.kwargs.get("proxy_url") or "the endpoint"
        if local:
            hint = "is the local cloud running? (`converge local up`)"
        else:
            hint = "check the network, the region and any proxy settings"
        return Failure("unreachable", f"cannot reach {where}: {hint}", ExitCode.UNREACHABLE)
    if isinstance(exc, InvalidEndpoint):
        return Failure("invalid_endpoint", str(exc), ExitCode.REFUSED)
    if isinstance(exc, TargetError):
        return Failure("not_found", str(exc), ExitCode.UNREACHABLE)
    if isinstance(exc, Unavailable):
        return Failure("unavailable", str(exc), ExitCode.UNREACHABLE)
    if isinstance(exc, NoCatalogue):
        return Failure("no_catalogue", str(exc), ExitCode.REFUSED)
    if isinstance(exc, ProjectError):
        return Failure("no_project", str(exc), ExitCode.REFUSED)
    if isinstance(exc, OperationNotFound):
        return Failure("not_found", str(exc), ExitCode.REFUSED)
    if isinstance(exc, (ConvergeError, UsageError)):
        return Failure(_snake(type(exc).__name__), str(exc), ExitCode.REFUSED)
    if isinstance(exc, ModuleNotFoundError) and (exc.name or "").split(".")[0] in LOCAL_MODULES:
        message = f"this command runs the local cloud, which needs the `local` extra ({exc.name} is missing): "
        return Failure("missing_extra", message + "pip install 'converge-jobs[cli,local]'", ExitCode.REFUSED)
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        message = f"AWS said {error.get('Code', 'error')}: {error.get('Message', '')}".strip()
        return Failure("aws_error", message, ExitCode.AWS)
    if isinstance(exc, OSError) and "connect" in str(exc).lower():
        return Failure("unreachable", f"cannot connect: {exc}", ExitCode.UNREACHABLE)
    return Failure("internal", f"{exc.__class__.__name__}: {exc}", ExitCode.FAILED)


def report(failure: Failure, as_json: bool) -> None:
    """Print a failure on stderr: `error: <message>`, or {"error", "message"} as JSON."""
    if as_json:
        typer.echo(json.dumps({"error": failure.error, "message": failure.message}), err=True)
    else:
        say(stderr(), styled("error:", "bold red"), " ", failure.message)


def fails_cleanly(function: F) -> F:
    """Turn any exception of a command into its Failure: reported on stderr, exit code, no traceback."""

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return function(*args, **kwargs)
        except (typer.Exit, typer.Abort, KeyboardInterrupt):
            raise
        except Exception as exc:
            failure = explain(exc, local=bool(kwargs.get("endpoint_url")))
            report(failure, bool(kwargs.get("as_json")))
            raise typer.Exit(failure.exit_code) from None

    return wrapper  # type: ignore[return-value]


def _snake(name: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() and i else c.lower() for i, c in enumerate(name))
