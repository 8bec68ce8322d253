"""The benchmark's own job types: a no-op runner under each idempotency policy.

The effect costs nothing, so whatever a job costs is the framework's. The module is a catalogue
(CONVERGE_CATALOGUE=converge_bench.jobs): converge's functions, in the local cloud or a fresh process,
load its BINDINGS. Its bindings name their message models and runners (`converge_bench.noop_jobs`), as the
reference catalogue's do: a function loads them with the first record that needs them.
"""

from __future__ import annotations

from typing import Any

from converge.flow.registry import JobBinding, Policy, Queue, Then
from converge.model.concurrency import Concurrency
from converge.model.debounce import Debounce
from converge.model.limits import Limiter

NOOP = "bench.noop.v1"
NOOP_CLAIM_FIRST = "bench.noop-claim-first.v1"
NOOP_KEYED = "bench.noop-keyed.v1"
STEPS = "bench.three-steps.v1"
CHAINED = "bench.chained.v1"
WAITING = "bench.wait.v1"
SIGNALLED = "bench.wait-for-signal.v1"
"""A step, a wait for a signal a producer sends once the job waits, a step: what a signal costs (beside WAITING)."""
LIMITED = "bench.noop-limited.v1"
"""A no-op under a rate limit it never meets (its happy path): what the limit's slot costs."""
BENCH_PARTNER = Limiter("bench-partner", limit=1000, period=1, burst=100_000)
SHARDED = "bench.noop-limited-sharded.v1"
BENCH_SHARDED = Limiter("bench-partner-sharded", limit=4000, period=1, burst=100_000, shards=4)
"""The same no-op job under a key spread over four items (docs/flow-control.md): the hottest item's share."""
CAPPED = "bench.noop-capped.v1"
"""A no-op under a concurrency cap it never meets (its happy path): what taking and giving back a slot costs."""
BENCH_CAP = Concurrency("bench-cap", limit=100)
DEBOUNCED = "bench.noop-debounced.v1"
"""A no-op debounced per item (1 s quiet): a request alone is a burst of one, which runs; several of one item, one."""
BENCH_DEBOUNCE = Debounce(key="item_id", newest_by="version", period=1, max_wait=5)
BATCH_DONE = "bench.batch-done.v1"
"""A batch's callback (its children are NOOP jobs): a no-op given the batch's summary."""
JOBS = "converge_bench.noop_jobs"
"""Where the models and runners are."""


def _binding(
    job_type: str,
    policy: Policy,
    runner: str = "NoopRunner",
    message: str = "NoopJob",
    example_payload: dict[str, Any] | None = None,
    why: str = "",
    **extra: Any,
) -> JobBinding:
    return JobBinding(
        job_type=job_type,
        message=f"{JOBS}:{message}",
        runner=f"{JOBS}:{runner}",
        queue=Queue.DEFAULT,
        policy=policy,
        description=f"benchmark: no effect ({policy.value}){why}",
        example_payload=example_payload or {"item_id": "item-1"},
        **extra,
    )


POLICY_BINDINGS = (
    _binding(NOOP, Policy.EFFECT_THEN_CLAIM),
    _binding(NOOP_CLAIM_FIRST, Policy.CLAIM_THEN_EFFECT),
    _binding(NOOP_KEYED, Policy.KEYED_EFFECT),
)
SHAPE_BINDINGS = (
    _binding(STEPS, Policy.EFFECT_THEN_CLAIM, "ThreeStepsRunner"),
    _binding(CHAINED, Policy.EFFECT_THEN_CLAIM, on_success=Then(NOOP, f"{JOBS}:next_item")),
    _binding(WAITING, Policy.EFFECT_THEN_CLAIM, "WaitingRunner"),
    _binding(SIGNALLED, Policy.EFFECT_THEN_CLAIM, "SignalWaitingRunner"),
)
BATCH_BINDINGS = (
    _binding(
        BATCH_DONE,
        Policy.EFFECT_THEN_CLAIM,
        message="BatchDone",
        example_payload={"batch_id": "batch-1", "batch_total": 1, "batch_succeeded": 1},
        why=", a batch's callback",
    ),
)
LIMITED_BINDINGS = (
    _binding(LIMITED, Policy.EFFECT_THEN_CLAIM, limits=(BENCH_PARTNER,)),
    _binding(SHARDED, Policy.EFFECT_THEN_CLAIM, limits=(BENCH_SHARDED,)),
    _binding(CAPPED, Policy.EFFECT_THEN_CLAIM, concurrency=BENCH_CAP),
    _binding(
        DEBOUNCED,
        Policy.EFFECT_THEN_CLAIM,
        message="VersionedJob",
        example_payload={"item_id": "item-1", "version": 1},
        why=", debounced per item",
        debounce=BENCH_DEBOUNCE,
    ),
)
BINDINGS = (*POLICY_BINDINGS, *SHAPE_BINDINGS, *BATCH_BINDINGS, *LIMITED_BINDINGS)
POLICY_OF = {binding.job_type: binding.policy.value for binding in POLICY_BINDINGS}
SHAPES = {
    # name: (job type, the same work on the other two: durable operations, Step Functions transitions, invocations)
    "three_steps": (STEPS, {"steps": 3, "waits": 0}),
    "one_continuation": (CHAINED, {"steps": 2, "waits": 0}),
    "one_wait": (WAITING, {"steps": 2, "waits": 1}),
}
"""The multi-effect shapes `converge bench` prices, each with what the same work is elsewhere: a step each
effect (the continuation's parent and child: two), and each wait."""
