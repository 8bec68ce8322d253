"""The benchmark's own job types: a no-op runner under each idempotency policy.

The effect costs nothing, so whatever a job costs is the framework's. The module is a catalogue
(CONVERGE_CATALOGUE=converge_bench.jobs): converge's functions, in the local cloud or a fresh process,
load its BINDINGS.
"""

from __future__ import annotations

import time
from typing import Any

from converge.flow.registry import JobBinding, Policy, Queue, Then
from converge.flow.runner import Confirmation, JobContext
from converge.screening.identifiers import Identifier
from converge.screening.message import JobMessage
from converge.screening.summary import BatchSummary

NOOP = "bench.noop.v1"
NOOP_CLAIM_FIRST = "bench.noop-claim-first.v1"
NOOP_KEYED = "bench.noop-keyed.v1"
STEPS = "bench.three-steps.v1"
CHAINED = "bench.chained.v1"
WAITING = "bench.wait.v1"
BATCH_DONE = "bench.batch-done.v1"
"""A batch's callback (its children are NOOP jobs): a no-op given the batch's summary."""
WAIT_SECONDS = 300
"""A wait within SQS's 900 s message delay (a longer one adds one CreateSchedule and one firing, as run_at does)."""


class NoopJob(JobMessage):
    item_id: Identifier


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


def _binding(job_type: str, policy: Policy, runner: Any = NoopRunner, **extra: Any) -> JobBinding:
    return JobBinding(
        job_type=job_type,
        message=NoopJob,
        runner=runner,
        queue=Queue.DEFAULT,
        policy=policy,
        description=f"benchmark: no effect ({policy.value})",
        example_payload={"item_id": "item-1"},
        **extra,
    )


POLICY_BINDINGS = (
    _binding(NOOP, Policy.EFFECT_THEN_CLAIM),
    _binding(NOOP_CLAIM_FIRST, Policy.CLAIM_THEN_EFFECT),
    _binding(NOOP_KEYED, Policy.KEYED_EFFECT),
)
SHAPE_BINDINGS = (
    _binding(STEPS, Policy.EFFECT_THEN_CLAIM, ThreeStepsRunner),
    _binding(CHAINED, Policy.EFFECT_THEN_CLAIM, on_success=Then(NOOP, lambda message: {"item_id": message.item_id})),
    _binding(WAITING, Policy.EFFECT_THEN_CLAIM, WaitingRunner),
)
BATCH_BINDINGS = (
    JobBinding(
        job_type=BATCH_DONE,
        message=BatchDone,
        runner=NoopRunner,
        queue=Queue.DEFAULT,
        policy=Policy.EFFECT_THEN_CLAIM,
        description="benchmark: a batch's callback, no effect",
        example_payload={"batch_id": "batch-1", "batch_total": 1, "batch_succeeded": 1},
    ),
)
BINDINGS = (*POLICY_BINDINGS, *SHAPE_BINDINGS, *BATCH_BINDINGS)
POLICY_OF = {binding.job_type: binding.policy.value for binding in POLICY_BINDINGS}
SHAPES = {
    # name: (job type, the same work on the other two: durable operations, Step Functions transitions, invocations)
    "three_steps": (STEPS, {"steps": 3, "waits": 0}),
    "one_continuation": (CHAINED, {"steps": 2, "waits": 0}),
    "one_wait": (WAITING, {"steps": 2, "waits": 1}),
}
"""The multi-effect shapes `converge bench` prices, each with what the same work is elsewhere: a step each
effect (the continuation's parent and child: two), and each wait."""
