"""Keep the framework's INFO logs (JSON lines on stdout, meant for CloudWatch) out of command output."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

from converge.observability import logger


@contextmanager
def quiet_logs() -> Iterator[None]:
    """Only warnings and errors from converge while the block runs (then the previous level again)."""
    previous = logger.log_level
    logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        logger.setLevel(previous)
