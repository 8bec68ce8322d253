"""Keep the framework's logs (Powertools JSON lines, meant for CloudWatch) out of command output.

The framework's logger writes to whatever sys.stdout is at the time, which in a Lambda is the log
stream and in the local cloud is the invoked function's log capture. A command's own stdout is
its output (a table, or the JSON document under --json), so while a command runs the logger writes
to stderr whenever sys.stdout is still that output, and to the capture when a function runs.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO

from converge.observability import logger


class _AwayFrom:
    """A stream that is sys.stdout, except when sys.stdout is the command's output: then sys.stderr."""

    def __init__(self, output: TextIO) -> None:
        self._output = output

    def _stream(self) -> Any:
        return sys.stderr if sys.stdout is self._output else sys.stdout

    def write(self, text: str) -> int:
        return int(self._stream().write(text))

    def flush(self) -> None:
        self._stream().flush()


@contextmanager
def logs_off_stdout() -> Iterator[None]:
    """For a command's whole run: framework log lines never land in its stdout."""
    handler = logger.registered_handler
    if not isinstance(handler, logging.StreamHandler):
        yield
        return
    previous = handler.stream
    handler.setStream(_AwayFrom(sys.stdout))  # type: ignore[arg-type]
    try:
        yield
    finally:
        handler.setStream(previous)


@contextmanager
def quiet_logs() -> Iterator[None]:
    """Only warnings and errors from converge while the block runs (then the previous level again)."""
    previous = logger.log_level
    logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        logger.setLevel(previous)
