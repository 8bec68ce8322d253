"""The staged runner: one small template for jobs that load a row, work on it, and mark it.

load (None means nothing to do) -> work -> on the final attempt, mark the row failed *before*
the message goes to the DLQ, then rethrow. Running out of time mid-work is a requeue, never a
failure, so it marks nothing.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Generic, TypeVar

from converge.flow.runner import JobContext
from converge.model.errors import OutOfTime, PermanentError
from converge.screening.message import JobMessage

M = TypeVar("M", bound=JobMessage)
R = TypeVar("R")


class StagedRunner(ABC, Generic[M, R]):
    """A job that loads a row, works on it in stages and marks it: implement `load`, `work` and
    `mark_failed` (called on the final attempt, or on a `PermanentError`, before the message goes to the DLQ).
    Running out of time mid-work is a requeue, never a failure, so it marks nothing."""

    @abstractmethod
    def load(self, message: M, ctx: JobContext) -> R | None:
        """The row the job works on, or None when it is gone or already processed."""

    @abstractmethod
    def work(self, message: M, row: R, ctx: JobContext) -> None:
        """Do the work; call `ctx.check_time()` between stages so a shutdown becomes a requeue."""

    @abstractmethod
    def mark_failed(self, message: M, row: R, ctx: JobContext, error: str) -> None:
        """Record on the row that it will not be processed (the last attempt failed)."""

    def run(self, message: M, loaded: Any, ctx: JobContext) -> None:
        try:
            self.work(message, loaded, ctx)
        except OutOfTime:
            raise
        except Exception as exc:
            if ctx.final_attempt or isinstance(exc, PermanentError):
                self.mark_failed(message, loaded, ctx, f"{exc.__class__.__name__}: {exc}")
            raise
