"""The benchmark's own job types: a no-op runner under each idempotency policy.

The effect costs nothing, so whatever a job costs is the framework's. The module is a catalogue
(CONVERGE_CATALOGUE=converge_bench.jobs): converge's functions, in the local cloud or a fresh process,
load its BINDINGS.
"""

from __future__ import annotations

import time
from typing import Any

from converge.flow.registry import JobBinding, Policy, Queue
from converge.flow.runner import Confirmation, JobContext
from converge.screening.identifiers import Identifier
from converge.screening.message import JobMessage

NOOP = "bench.noop.v1"
NOOP_CLAIM_FIRST = "bench.noop-claim-first.v1"
NOOP_KEYED = "bench.noop-keyed.v1"


class NoopJob(JobMessage):
    item_id: Identifier


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


def _binding(job_type: str, policy: Policy) -> JobBinding:
    return JobBinding(
        job_type=job_type,
        message=NoopJob,
        runner=NoopRunner,
        queue=Queue.DEFAULT,
        policy=policy,
        description=f"benchmark: no effect ({policy.value})",
        example_payload={"item_id": "item-1"},
    )


BINDINGS = (
    _binding(NOOP, Policy.EFFECT_THEN_CLAIM),
    _binding(NOOP_CLAIM_FIRST, Policy.CLAIM_THEN_EFFECT),
    _binding(NOOP_KEYED, Policy.KEYED_EFFECT),
)
POLICY_OF = {binding.job_type: binding.policy.value for binding in BINDINGS}
