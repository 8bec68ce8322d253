"""The benchmark jobs' message models and runners: a no-op under each policy, steps, a wait (for a time or a
signal), a batch's callback.

Named by the bindings of `converge_bench.jobs`, so a function imports this module with the first record of a
benchmark job, as a team's catalogue declared by name is loaded (docs/lean-lambdas.md).
"""

from __future__ import annotations

import time
from typing import Any

from converge.flow.runner import Confirmation, JobContext
from converge.screening.identifiers import Identifier
from converge.screening.message import JobMessage
from converge.screening.summary import BatchSummary

WAIT_SECONDS = 300
"""A wait within SQS's 900 s message delay (a longer one adds one CreateSchedule and one firing, as run_at does)."""


SIGNAL = "go"
SIGNAL_TIMEOUT_SECONDS = 86_400
"""A day: a signal is what resumes the job (the benchmark sends it once every job waits); the timeout, beyond SQS's
900 s message delay, is a one-time schedule, deleted when the signal wakes the job."""


class NoopJob(JobMessage):
    item_id: Identifier


class VersionedJob(NoopJob):
    """A no-op request that says how new it is (a debounced job's `newest_by`)."""

    version: int = 0


class BatchDone(BatchSummary):
    """The batch's summary, nothing more."""


class RunnerClock:
    """Seconds spent inside the runners (load and run), to subtract from the framework's time."""

    seconds = 0.0
    runs = 0


class NoopRunner:
    """Loads a constant and applies no effect."""

    def load(self, message: NoopJob, ctx: JobContext) -> Any:
        started = time.perf_counter()
        RunnerClock.seconds += time.perf_counter() - started
        return True

    def run(self, message: NoopJob, loaded: Any, ctx: JobContext) -> None:
        started = time.perf_counter()
        RunnerClock.runs += 1
        RunnerClock.seconds += time.perf_counter() - started

    def confirm(self, message: NoopJob, ctx: JobContext) -> Confirmation:
        return Confirmation.NOT_APPLIED


class ThreeStepsRunner(NoopRunner):
    """Three steps with no effect, each effect_then_claim: one marker write each."""

    def run(self, message: NoopJob, loaded: Any, ctx: JobContext) -> None:
        for name in ("first", "second", "third"):
            ctx.step(name, lambda key: None)


class WaitingRunner(NoopRunner):
    """A step, a wait of WAIT_SECONDS, a step."""

    def run(self, message: NoopJob, loaded: Any, ctx: JobContext) -> None:
        ctx.step("before", lambda key: None)
        ctx.wait("pause", seconds=WAIT_SECONDS)
        ctx.step("after", lambda key: None)


class SignalWaitingRunner(NoopRunner):
    """A step, a wait for the signal SIGNAL (a day at most), a step."""

    def run(self, message: NoopJob, loaded: Any, ctx: JobContext) -> None:
        ctx.step("before", lambda key: None)
        ctx.wait_for(SIGNAL, timeout=SIGNAL_TIMEOUT_SECONDS)
        ctx.step("after", lambda key: None)


def next_item(message: NoopJob) -> dict[str, Any]:
    """The continuation's payload: the same item."""
    return {"item_id": message.item_id}
