"""What a job's runner looks like, and the context each execution gets."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol, TypeVar

from converge.model.clock import Clock
from converge.model.errors import OutOfTime
from converge.screening.message import JobMessage

M = TypeVar("M", bound=JobMessage, contravariant=True)


@dataclass(frozen=True)
class JobContext:
    """One execution of one operation: identity, attempt, and the time left in the Lambda."""

    operation_id: str
    job_type: str
    correlation_id: str | None
    attempt: int
    max_attempts: int
    clock: Clock
    remaining_ms: Callable[[], int]
    time_margin_ms: int = 5_000

    @property
    def final_attempt(self) -> bool:
        return self.attempt >= self.max_attempts

    def check_time(self) -> None:
        """Raise OutOfTime when the Lambda is too close to its timeout to start more work."""
        if self.remaining_ms() < self.time_margin_ms:
            raise OutOfTime(f"{self.remaining_ms()} ms left, under the {self.time_margin_ms} ms margin")


def remaining_time(context: Any) -> Callable[[], int]:
    """The milliseconds an invocation has left, from its Lambda context; without one (a test, a CLI), no limit."""
    if context is None:
        return lambda: 2**31
    return context.get_remaining_time_in_millis


class Confirmation(StrEnum):
    """What the provider says about an effect whose outcome was ambiguous."""

    APPLIED = "applied"
    NOT_APPLIED = "not_applied"
    UNKNOWABLE = "unknowable"


class JobRunner(Protocol[M]):
    """The work of one job type, over injected ports.

    `load` fetches what the job needs; None means "already done or no longer needed" and ends the
    operation as a successful no-op. `run` performs the effect.
    """

    def load(self, message: M, ctx: JobContext) -> Any | None: ...

    def run(self, message: M, loaded: Any, ctx: JobContext) -> None: ...


class ConfirmingRunner(JobRunner[M], Protocol[M]):
    """A claim-then-effect runner: it can ask the provider, by the operation id, what happened."""

    def confirm(self, message: M, ctx: JobContext) -> Confirmation: ...


@dataclass(frozen=True)
class TickContext:
    """One tick of a recurring job: its type, the clock and the time left in the Lambda."""

    job_type: str
    clock: Clock
    remaining_ms: Callable[[], int]
    time_margin_ms: int = 5_000

    def out_of_time(self) -> bool:
        """Whether the Lambda is too close to its timeout to start another page: stop and report."""
        return self.remaining_ms() < self.time_margin_ms


class RecurringRunner(Protocol):
    """A scheduled job: each tick does a bounded amount of idempotent work and reports it."""

    def tick(self, ctx: TickContext) -> dict[str, Any]: ...
