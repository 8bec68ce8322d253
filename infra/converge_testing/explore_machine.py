"""The explorer's rules over a team's catalogue: a Hypothesis state machine made for one cloud and its plan.

Each history starts on the same cloud (its ids are new: `r<run>h<history>-...`), every kill switch on, no fault. Its
steps are drawn from the rules below, each named for what happens, so a shrunk history reads as a story:

    ways in      a producer enqueues a job's example (now, or a few minutes ahead), the same request again, a
                 batch of a job's examples with a callback of the catalogue's
    faults       planned for the next chance they get: the worker dies after the effect, a lost response, a second
                 receipt while the effect is made, a message delivered twice, the lease running out under its
                 holder, a throttled DynamoDB call, a Lambda timeout, a relay send that partly fails, a crash between
                 two steps, SSM down for a while; a replayed dispatch of an operation
    switches     a job's kill switch off or on
    operators    cancel, retry, resolve an UNKNOWN (succeeded if its effects are there, else as told)
    platform     the clock moves; the stream, the queues, what is visible or everything is drained; the reconciler
                 and the resumer run; due schedules fire

After every step the cheap promise holds (explore_promise.every_step); at the end the history is made quiet (faults
off, every switch on, the clock past every wait, the resumer and the reconciler run, everything drained) and the
whole promise holds (explore_promise.settled).
"""

from __future__ import annotations

import contextlib
import itertools
import re
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, invariant, multiple, precondition, rule

from converge.model.batches import BatchChild
from converge.model.clock import iso
from converge.model.states import FINAL_STATES, OperationState
from converge_testing import explore_promise as promise
from converge_testing.explore_plan import Plan
from localcloud.faults import FaultKind

CLOCK_STEPS = (1.0, 30.0, 400.0, 3700.0)
"""A small step, past a short run_at or a visibility timeout, past a lease, past an hour."""
DELAYS = (0.0, 300.0)
"""When a producer wants its job run: now, or in five minutes."""
RESUMER_EVENT = {"source": "aws.events", "detail-type": "Scheduled Event", "detail": {}}
OPERATOR = "explore:operator"

GROUPS: dict[str, tuple[str, ...]] = {
    "ways in": ("producer_enqueues", "producer_enqueues_again", "producer_admits_batch"),
    "faults": (
        "worker_dies_after_effect",
        "effect_response_lost",
        "second_receipt_during_effect",
        "delivered_twice",
        "lease_expires_under_holder",
        "dynamodb_throttles",
        "lambda_times_out",
        "relay_send_partly_fails",
        "worker_dies_between_steps",
        "ssm_goes_down",
        "dispatch_replayed",
    ),
    "switches": ("kill_switch_flips",),
    "operators": ("operator_cancels", "operator_retries", "operator_resolves"),
    "platform": (
        "clock_advances",
        "stream_polled_once",
        "queues_polled_once",
        "visible_work_drains",
        "everything_drains",
        "reconciler_runs",
        "resumer_runs",
        "due_schedules_fire",
    ),
}
"""Every rule, by group: `explore(..., leave_out=...)` takes group or rule names."""
RULES = frozenset(name for names in GROUPS.values() for name in names)


class Progress:
    """What a run did so far (every history of it, across Hypothesis' phases), and when it first met a break."""

    runs = itertools.count(1)
    """Runs in this process: a history's ids name its run, so that runs on one cloud never share an id."""

    def __init__(self, on_break: Callable[[str, int, float], None] | None = None) -> None:
        """`on_break(kind, histories, seconds)`: told of the first break, before its shrinking starts."""
        self.run = next(Progress.runs)
        self.histories = 0
        self.steps = 0
        self.started = time.perf_counter()
        self.first_break: tuple[int, float] | None = None
        """(histories, seconds) when the first break was seen, before any shrinking."""
        self.on_break = on_break

    @contextlib.contextmanager
    def watching(self) -> Iterator[None]:
        try:
            yield
        except promise.Break as found:
            if self.first_break is None:
                self.first_break = (self.histories, time.perf_counter() - self.started)
                if self.on_break is not None:
                    self.on_break(type(found).__name__, *self.first_break)
            raise


def machine_for(cloud: Any, plan: Plan, faults: Any, progress: Progress, leave_out: frozenset[str]) -> type[Any]:
    """The state machine class for this cloud and plan, without the rules (or groups of rules) in `leave_out`."""
    jobs = st.sampled_from(plan.job_types)
    toggles = st.sampled_from(plan.toggles)
    callbacks = st.sampled_from([binding.job_type for binding in plan.callbacks] or ["(none)"])

    class TeamExplorer(RuleBasedStateMachine):
        """A team's catalogue under everything that can happen to its operations (explore_machine's docstring)."""

        operations = Bundle("operations")
        progress_every: ClassVar[int] = 25

        def __init__(self) -> None:
            super().__init__()
            progress.histories += 1
            self.prefix = f"r{progress.run}h{progress.histories}-"
            self.made = 0
            self.history = promise.History(self.prefix, plan, faults, denials_before=len(cloud.denials))
            self.converge = cloud.converge
            self.operator = self.converge.operator(OPERATOR)
            faults.reset(seed=0)  # the same history runs the same way every time (shrinking replays it)
            for module in list(cloud.local.runtime._modules.values()):  # the functions' own jitter (retry delays)
                warm = getattr(module, "converge", None)
                if warm is not None:
                    warm.rng.seed(0)
            cloud.effects.clear()
            set_toggles(cloud, plan.toggles, "on")

        def _new_id(self) -> str:
            self.made += 1
            return f"{self.prefix}{self.made}"

        # -- ways in ---------------------------------------------------------------------------------------------

        def producer_enqueues(self, job: str, delay: float) -> str:
            """A producer enqueues the job's example payload, now or a few minutes ahead (one rule per job:
            `producer_enqueues_<job type>`, so that a history may dwell on a few jobs)."""
            operation_id = self._new_id()
            run_at = iso(float(cloud.clock.now()) + delay) if delay else None
            self.converge.enqueue(job, operation_id, plan.payload(job), run_at=run_at)
            self.history.enqueued[operation_id] = job
            return operation_id

        @rule(operation=operations)
        def producer_enqueues_again(self, operation: str) -> None:
            """The same request again (a producer's retry): absorbed, the same operation."""
            if "::" in operation:  # a batch's child: its batch enqueues it (explore_machine admits a batch once)
                return
            stored = self.converge.operations.get(operation)
            if stored is not None and stored.request is not None:
                again = self.converge.enqueue(stored.job_type, operation, stored.payload, run_at=stored.request.run_at)
                assert not again.created, f"{operation} enqueued again with its own content was created anew"

        @rule(target=operations, job=jobs, size=st.integers(min_value=2, max_value=3), callback=callbacks)
        @precondition(lambda self: bool(plan.callbacks) and len(self.history.batches) < 2)
        def producer_admits_batch(self, job: str, size: int, callback: str) -> Any:
            batch_id = f"{self.prefix}b{len(self.history.batches) + 1}"
            children = [BatchChild(f"c{n}", job, plan.payload(job)) for n in range(size)]
            admission = self.converge.enqueue_batch(batch_id, children, plan.callback(plan.registry.get(callback)))
            self.history.batches[batch_id] = size
            batch = admission.batch
            return multiple(*(batch.child_id(position, child.key) for position, child in enumerate(children)))

        # -- faults, each at its next chance ---------------------------------------------------------------------

        @rule(operation=operations)
        def worker_dies_after_effect(self, operation: str) -> None:
            """The operation's next worker to make its effect dies before it records the operation."""
            faults.plan(FaultKind.CRASH_AFTER_EFFECT, operation)

        @rule(operation=operations)
        def effect_response_lost(self, operation: str) -> None:
            """The operation's next effect is made, and its answer lost (a timeout)."""
            faults.plan(FaultKind.LOST_RESPONSE, operation)

        @rule(operation=operations)
        def second_receipt_during_effect(self, operation: str) -> None:
            """A second receipt of the operation's message comes while its effect is being made."""
            faults.plan(FaultKind.CONCURRENT_DELIVERY, operation)

        @rule(operation=operations)
        def delivered_twice(self, operation: str) -> None:
            """The operation's next message is delivered once more after it was handled."""
            faults.plan(FaultKind.DUPLICATE_DELIVERY, operation)

        @rule(operation=operations)
        def lease_expires_under_holder(self, operation: str) -> None:
            """The operation's lease runs out under its holder after the effect; another receipt takes over."""
            faults.plan(FaultKind.LEASE_EXPIRY, operation)

        @rule()
        def dynamodb_throttles(self) -> None:
            faults.plan(FaultKind.DYNAMODB_THROTTLE)

        @rule(operation=operations, hard=st.booleans())
        def lambda_times_out(self, operation: str, hard: bool) -> None:
            """The worker handling the operation runs out of time (`hard`: killed mid-record)."""
            faults.plan(FaultKind.LAMBDA_TIMEOUT, operation, hard=hard)

        @rule()
        def relay_send_partly_fails(self) -> None:
            faults.plan(FaultKind.SEND_BATCH_PARTIAL)

        @rule(operation=operations)
        def worker_dies_between_steps(self, operation: str) -> None:
            """A job of steps: its worker dies just after a step's marker, before the next step."""
            faults.plan(FaultKind.CRASH_BETWEEN_STEPS, operation)

        @rule(seconds=st.sampled_from([30.0, 90.0]))
        def ssm_goes_down(self, seconds: float) -> None:
            faults.ssm_outage(seconds)

        @rule(operation=operations)
        def dispatch_replayed(self, operation: str) -> None:
            """The request is sent to its queue again (a relay that died before its checkpoint)."""
            request = _stored_request(cloud, operation)
            if request is not None:
                faults.replay_dispatch(operation, request)

        # -- kill switches ---------------------------------------------------------------------------------------

        @rule(toggle=toggles, on=st.booleans())
        def kill_switch_flips(self, toggle: str, on: bool) -> None:
            set_toggles(cloud, [toggle], "on" if on else "off")

        # -- operators -------------------------------------------------------------------------------------------

        @rule(operation=operations)
        def operator_cancels(self, operation: str) -> None:
            if self.converge.operations.get(operation) is not None:
                self.operator.cancel(operation, "no longer wanted")

        @rule(operation=operations)
        def operator_retries(self, operation: str) -> None:
            if self.converge.operations.get(operation) is not None:
                self.operator.retry(operation, "the provider is back")

        @rule(operation=operations, if_not_done=st.sampled_from(["retry", "failed"]))
        def operator_resolves(self, operation: str, if_not_done: str) -> None:
            """An operator who looks the effect up: succeeded if its clean run's effects are there, else as told."""
            found = self.converge.operations.get(operation)
            if found is None or found.state is not OperationState.UNKNOWN:
                return
            clean = plan.clean.get(found.job_type, {})
            made = cloud.effects.of(operation)
            done = bool(clean) and all(made.get(resource, 0) >= number for resource, number in clean.items())
            self.operator.resolve(operation, "succeeded" if done else if_not_done, "looked it up")

        # -- the platform ----------------------------------------------------------------------------------------

        @rule(seconds=st.sampled_from(CLOCK_STEPS))
        def clock_advances(self, seconds: float) -> None:
            cloud.advance(seconds)

        @rule()
        def stream_polled_once(self) -> None:
            for source in cloud.local.stream_sources:
                source.poll(flush=True)

        @rule()
        def queues_polled_once(self) -> None:
            for source in cloud.local.queue_sources:
                source.poll(flush=True)

        @rule()
        def visible_work_drains(self) -> None:
            """Every source until quiet, the clock standing still: hidden messages wait for it."""
            cloud.local.drain(max_rounds=10_000, max_fast_forward=0)

        @rule()
        def everything_drains(self) -> None:
            """Every source until quiet, the clock moved on to each hidden message."""
            cloud.local.drain(max_rounds=10_000)

        @rule()
        def reconciler_runs(self) -> None:
            cloud.invoke("ReconcilerFunction", {})

        @rule()
        def resumer_runs(self) -> None:
            cloud.invoke("ResumerFunction", RESUMER_EVENT)

        @rule()
        def due_schedules_fire(self) -> None:
            cloud.local.fire_one_time_schedules()

        # Weights: the small moves come up more often, so faults and switches fall between an operation's moves.
        stream_polled_again = stream_polled_once
        queues_polled_again = queues_polled_once
        visible_work_drains_again = visible_work_drains

        # -- the promise -----------------------------------------------------------------------------------------

        @invariant()
        def promise_kept(self) -> None:
            progress.steps += 1
            with progress.watching():
                promise.every_step(cloud, self.history)

        def teardown(self) -> None:
            """Quiet: faults off, every switch on, the clock past every wait, resumer and reconciler, all drained;
            then the whole promise. (Skipped when a step failed: its failure is the one reported.)"""
            if sys.exc_info()[0] is not None or not hasattr(self, "history"):
                return
            faults.rules.clear()
            faults.ssm_outage_until = 0.0
            set_toggles(cloud, plan.toggles, "on")
            cloud.local.drain(max_rounds=10_000)
            operations = promise.operations_of(cloud, self.prefix)
            if any(op.state not in FINAL_STATES for op in operations.values()):  # (else nothing below moves anything)
                cloud.advance(3700.0)  # past every run_at the rules make, every visibility timeout and lease
                cloud.invoke("ResumerFunction", RESUMER_EVENT)
                cloud.local.drain(max_rounds=10_000)
                cloud.invoke("ReconcilerFunction", {})
                cloud.local.drain(max_rounds=10_000)
            with progress.watching():
                promise.settled(cloud, self.history)

    namespace: dict[str, Any] = {}
    for job in plan.job_types:
        namespace[enqueue_rule(job)] = _enqueues(job, TeamExplorer.operations)
    aliases = {"stream_polled_again": "stream_polled_once", "queues_polled_again": "queues_polled_once",
               "visible_work_drains_again": "visible_work_drains"}  # fmt: skip
    removed = {name for name in RULES if name in leave_out and name != "producer_enqueues"} | {
        alias for alias, name in aliases.items() if name in leave_out
    }
    if not plan.callbacks:
        removed.add("producer_admits_batch")
    removed |= set(namespace) if "producer_enqueues" in leave_out else set(namespace) & leave_out
    drawn = sorted(({*RULES, *namespace} - removed - set(aliases)) - {"producer_enqueues"})
    namespace.update(dict.fromkeys(removed))
    return type("TeamExplorer", (TeamExplorer,), {**namespace, "drawn_rules": drawn})


def enqueue_rule(job_type: str) -> str:
    """The rule that enqueues a job's example: `producer_enqueues_orders_confirm_v1`."""
    return "producer_enqueues_" + re.sub(r"[^0-9a-zA-Z]+", "_", job_type).strip("_").lower()


def _enqueues(job_type: str, operations: Bundle[str]) -> Any:
    def enqueues(self: Any, delay: float) -> str:
        return str(self.producer_enqueues(job_type, delay))

    enqueues.__name__ = enqueues.__qualname__ = enqueue_rule(job_type)  # (before the decorator: the rule keeps it)
    enqueues.__doc__ = f"A producer enqueues {job_type}'s example payload, now or in five minutes."
    return rule(target=operations, delay=st.sampled_from(DELAYS))(enqueues)


def set_toggles(cloud: Any, keys: list[str], value: str) -> None:
    """Write kill switches (as an operator does) and make the warm workers read them again at once."""
    toggles = cloud.converge.toggles
    for key in keys:
        toggles.set(key, value, f"explore: {value}")
    for module in list(cloud.local.runtime._modules.values()):
        warm = getattr(module, "converge", None)
        if warm is not None:
            warm.toggles.forget()


def _stored_request(cloud: Any, operation_id: str) -> dict[str, Any] | None:
    """The operation's request item as the jobs table holds it now (None once deleted, or never written)."""
    found: dict[str, Any] | None = (
        cloud.client("dynamodb")
        .get_item(TableName=cloud.outputs["JobsTableName"], Key={"operation_id": {"S": operation_id}})
        .get("Item")
    )
    return found
