"""What a job's runner looks like, and the context each execution gets."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum
from typing import Any, Protocol, TypeVar

from converge.model.clock import Clock
from converge.model.errors import ConfigurationError, OutOfTime
from converge.model.records import StepResult
from converge.model.signals import WaitResult
from converge.model.timing import MAX_AHEAD_SECONDS
from converge.screening.message import JobMessage

M = TypeVar("M", bound=JobMessage, contravariant=True)
R = TypeVar("R", bound=StepResult)


class Confirmation(StrEnum):
    """What the provider says about an effect whose outcome was ambiguous."""

    APPLIED = "applied"
    NOT_APPLIED = "not_applied"
    UNKNOWABLE = "unknowable"


class StepRunner(Protocol):
    """What runs a delivery's steps (`converge.flow.steps.Steps`)."""

    def run(
        self,
        name: str,
        effect: Callable[[str], Any],
        policy: str,
        confirm: Callable[[str], Confirmation] | None,
    ) -> Any: ...

    def wait(self, name: str, until: float) -> None: ...

    def limit(self, limiter: str, reserve: Callable[[], float]) -> None: ...

    def wait_for(self, name: str, until: float) -> WaitResult: ...


@dataclass(frozen=True)
class Delivery:
    """One receipt of a message: its attempt number and the Lambda's remaining time."""

    message_id: str
    attempt: int
    max_receive_count: int
    remaining_ms: Callable[[], int]
    accepted_at: str | None = None
    """When the producer's write was accepted (the relay's `accepted_at` message attribute)."""


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
    steps: StepRunner | None = None
    """The delivery's steps (`step`), given once it holds the operation's lease."""
    limits: Callable[[str, str | None, int], float] | None = None
    """When a call of so many units on a limiter's key may be made (`limit`); None: the catalogue has no limiters."""

    @property
    def final_attempt(self) -> bool:
        return self.attempt >= self.max_attempts

    def step(
        self,
        name: str,
        effect: Callable[[str], R],
        policy: str = "effect_then_claim",
        confirm: Callable[[str], Confirmation] | None = None,
    ) -> R:
        """Run one named step of this operation once, with its own policy, and return its recorded result.

        `effect(key)` makes the step's one effect and returns a small result (identifiers, small numbers,
        or a flat mapping of them) that later steps may use; `key` ("<operation id>:<name>") is the
        step's idempotency key for its provider. A step recorded by an earlier delivery (a retry, a
        redelivery, a takeover) is not run again: its recorded result comes back. `policy` is one of
        `effect_then_claim` (the effect, then its marker: duplicates over loss, for this step only),
        `keyed_effect` (an effect idempotent by key; the marker records it) and `claim_then_effect`
        (the marker first, then the effect with the key; `confirm(key)` says what the provider did when
        its answer was ambiguous or an earlier delivery died holding the claim; if it cannot tell, the
        operation becomes UNKNOWN naming the step). Step names are public, like job types: add-only
        while operations are in flight. See docs/steps-and-continuations.md.
        """
        if self.steps is None:
            raise ConfigurationError("steps run only inside a delivery that holds its lease, with MARKERS_TABLE set")
        result: R = self.steps.run(name, effect, policy, confirm)
        return result

    def wait(self, name: str, *, seconds: float | None = None, until: float | None = None) -> None:
        """End this delivery here and resume the operation after `seconds` (or at `until`, epoch seconds), up to
        a year ahead: between two steps, holding nothing meanwhile.

        The wait is recorded (a marker named `name`, public like a step's), so the resumed run passes it
        without waiting again, skipping every step before it. Until then the operation is SCHEDULED (listed,
        with its time and the wait it is at, cancellable), its lease given back; it comes back through the
        same delayed dispatch as `run_at` (a message delay up to 900 s, else a one-time schedule)."""
        if self.steps is None:
            raise ConfigurationError("waits run only inside a delivery that holds its lease, with MARKERS_TABLE set")
        if (seconds is None) == (until is None):
            raise ConfigurationError(f"wait {name!r}: give seconds or until, one of them")
        if seconds is not None and seconds < 0:
            raise ConfigurationError(f"wait {name!r}: seconds must not be negative")
        now = self.clock.now()
        at = now + float(seconds) if seconds is not None else float(until or 0)
        if at > now + MAX_AHEAD_SECONDS:
            raise ConfigurationError(f"wait {name!r}: a wait ends at most a year ahead (as run_at)")
        self.steps.wait(name, at)

    def limit(self, limiter: str, key: str | None = None, *, units: int = 1) -> None:
        """Take a slot of a limiter (the catalogue's `LIMITERS`) before a call to a limited partner: returns at once
        when the slot is now; else this delivery ends here and the operation waits SCHEDULED for its slot, as
        `wait` does (so a job that limits a call binds effect_then_claim or keyed_effect, its effects as steps),
        and the resumed run passes here on that slot. `key` paces each value apart (None: one pace for all)."""
        if self.steps is None or self.limits is None:
            raise ConfigurationError("ctx.limit needs a delivery that holds its lease, MARKERS_TABLE and LIMITERS")
        if isinstance(units, bool) or not isinstance(units, int) or units < 1:
            raise ConfigurationError(f"limit {limiter!r}: units must be a whole number of at least 1")
        reserve = self.limits
        self.steps.limit(limiter, lambda: reserve(limiter, key, units))

    def wait_for(
        self, name: str, *, timeout: float | timedelta | None = None, until: float | None = None
    ) -> WaitResult:
        """Wait for the signal `name` (sent with `converge.signal(operation_id, name, payload)`, the CLI, the HTTP
        API), for at most `timeout` (seconds or a timedelta; or `until`, epoch seconds), up to a year ahead.

        Returns the wait's outcome: the signal's payload (`received`, `payload`, `signal_id`), or, once the timeout
        came first, `timed_out` with no payload: the runner decides what follows (continue, fail, another path).
        Until then the delivery ends here and the operation is SCHEDULED (listed with the wait and its timeout,
        cancellable), holding nothing. A signal sent before the operation gets here is kept and returned at once;
        the outcome is recorded once (a signal item per wait name), so every later run gets the same one back.
        See docs/signals.md."""
        if self.steps is None:
            raise ConfigurationError("waits run only inside a delivery that holds its lease, with MARKERS_TABLE set")
        if (timeout is None) == (until is None):
            raise ConfigurationError(f"wait_for {name!r}: give timeout or until, one of them")
        seconds = timeout.total_seconds() if isinstance(timeout, timedelta) else timeout
        if seconds is not None and seconds < 0:
            raise ConfigurationError(f"wait_for {name!r}: the timeout must not be negative")
        now = self.clock.now()
        at = now + float(seconds) if seconds is not None else float(until or 0)
        if at > now + MAX_AHEAD_SECONDS:
            raise ConfigurationError(f"wait_for {name!r}: a wait ends at most a year ahead (as run_at)")
        return self.steps.wait_for(name, at)

    def check_time(self) -> None:
        """Raise OutOfTime when the Lambda is too close to its timeout to start more work."""
        if self.remaining_ms() < self.time_margin_ms:
            raise OutOfTime(f"{self.remaining_ms()} ms left, under the {self.time_margin_ms} ms margin")


def remaining_time(context: Any) -> Callable[[], int]:
    """The milliseconds an invocation has left, from its Lambda context; without one (a test, a CLI), no limit."""
    if context is None:
        return lambda: 2**31
    return context.get_remaining_time_in_millis


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
