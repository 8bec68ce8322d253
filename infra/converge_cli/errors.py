"""Every command fails the same way: one line on stderr, a non-zero status, never a traceback."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import typer
from botocore.exceptions import (
    ClientError,
    EndpointConnectionError,
    NoCredentialsError,
    NoRegionError,
    PartialCredentialsError,
)
from rich.console import Console

from converge.errors import ConvergeError, IdentityConflict, InvalidMessage, UnknownJobType
from converge_cli.target import TargetError

F = TypeVar("F", bound=Callable[..., Any])
stderr = Console(stderr=True, highlight=False, soft_wrap=True)


class UsageError(Exception):
    """The command was asked for something that cannot be done (the message says why)."""


def explain(exc: BaseException) -> tuple[str, int]:
    """A one-line explanation and exit status for an error."""
    if isinstance(exc, (NoCredentialsError, PartialCredentialsError)):
        return (
            "no AWS credentials found: configure a profile or environment credentials, "
            "or point at a local cloud with --endpoint-url",
            3,
        )
    if isinstance(exc, NoRegionError):
        return "no AWS region configured: set AWS_REGION or pass --region", 3
    if isinstance(exc, EndpointConnectionError):
        return f"cannot reach {exc.kwargs.get('endpoint_url', 'the endpoint')}: is the local cloud running?", 4
    if isinstance(exc, TargetError):
        return str(exc), 4
    if isinstance(exc, (IdentityConflict, InvalidMessage, UnknownJobType)):
        return str(exc), 2
    if isinstance(exc, (ConvergeError, UsageError)):
        return str(exc), 2
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        return f"AWS said {error.get('Code', 'error')}: {error.get('Message', '')}".strip(), 5
    if isinstance(exc, OSError) and "connect" in str(exc).lower():
        return f"cannot connect: {exc}", 4
    return f"{exc.__class__.__name__}: {exc}", 1


def fails_cleanly(function: F) -> F:
    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return function(*args, **kwargs)
        except (typer.Exit, typer.Abort, KeyboardInterrupt):
            raise
        except Exception as exc:
            message, code = explain(exc)
            stderr.print(f"[bold red]error:[/] {message}")
            raise typer.Exit(code) from None

    return wrapper  # type: ignore[return-value]
