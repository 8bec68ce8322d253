"""Drive N jobs end to end on a deployed local cloud and collect what they cost.

Both designs go through `run_jobs`: enqueue N jobs with the design's producer, `drain()` until the
cloud is quiet, and return the meter's delta, the invocations, and each handler's time split into
service time (moto answering: network and service time on AWS) and in-Lambda time.
"""

from __future__ import annotations

import contextlib
import io
import math
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from converge_bench.meter import Meter, Snapshot, Tally

ASSUMED_LATENCY_MS = {"dynamodb": 5.0, "sqs": 10.0, "ssm": 10.0}
"""Assumed round trip per call from a Lambda in the same region (used only for billed duration)."""
DEFAULT_LATENCY_MS = 10.0
REPLAYS = 3
"""Each invocation is replayed this many times and its least CPU time kept: the work is the same each time, so
the least is the one a busy neighbour (sharing the core and its caches) disturbed least."""


@dataclass
class HandlerTime:
    """In-Lambda time of one function's invocations, and a modelled billed duration."""

    invocations: int = 0
    records: int = 0
    lambda_seconds: float = 0.0
    """Handler CPU time (this thread's) minus what moto and the meter used: the Lambda's own work."""
    billed_ms: float = 0.0
    """Per invocation: in-Lambda time plus an assumed round trip per AWS call, rounded up to 1 ms."""
    per_record: list[float] = field(default_factory=list)
    """In-Lambda seconds per record, one sample per invocation (the median resists GC pauses and noise)."""
    replayed_per_record: list[float] = field(default_factory=list)
    """The same, measured by replaying the invocation against its recorded AWS answers (no emulator at
    work in between, whose own CPU load would slow the code measured after it), net of the runner's time."""
    replay_mismatches: int = 0


@dataclass
class DesignRun:
    design: str
    jobs: int
    seconds: float
    usage: Snapshot
    invocations: Counter[str]
    handlers: dict[str, HandlerTime]
    memory_mb: dict[str, int]
    runner_seconds: float = 0.0
    service_seconds: float = 0.0
    """Wall time spent in moto and in the meter during the run: the emulator's cost, not the design's."""
    completed: int = 0
    notes: list[str] = field(default_factory=list)


class TimedHandlers:
    """Wraps functions' real handlers (through the local cloud's override hook) to time each invocation.

    Invocations of the `replay` functions are run again (REPLAYS times, the least kept), answered from what
    the emulator said the first time: a replay is the Lambda's own CPU, botocore's client side included, without
    the emulator's work (parsing expressions, copying tables) evicting the caches of the code it measures.
    """

    def __init__(
        self,
        cloud: Any,
        meter: Meter,
        logical_ids: Iterable[str],
        replay: Iterable[str] = (),
        runner_clock: Callable[[], float] = lambda: 0.0,
    ) -> None:
        self.cloud = cloud
        self.meter = meter
        self.times: dict[str, HandlerTime] = {}
        self.replay = set(replay)
        self.replaying = True
        self._runner_clock = runner_clock
        for logical_id in logical_ids:
            real = getattr(cloud.runtime.module(logical_id), cloud.functions[logical_id].handler_attribute)
            cloud.override_handler(logical_id, self._timed(logical_id, real))

    def reset(self) -> None:
        self.times = {}

    def _timed(self, logical_id: str, real: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
        def handler(event: Any, context: Any) -> Any:
            if self.replaying and logical_id in self.replay:
                with self.meter.recording() as recorded:
                    response = live(event, context)
                self._replay(logical_id, real, event, context, recorded)
                return response
            return live(event, context)

        def live(event: Any, context: Any) -> Any:
            calls_before = self.meter.application.calls.copy()
            service_before = self.meter.service_cpu
            started = time.thread_time()
            try:
                return real(event, context)
            finally:
                # CPU time of this thread, less moto's and the meter's: the code a Lambda would run.
                cpu = time.thread_time() - started
                in_lambda = max(0.0, cpu - (self.meter.service_cpu - service_before))
                calls = self.meter.application.calls - calls_before
                waited_ms = sum(
                    count * ASSUMED_LATENCY_MS.get(name.split(":")[0], DEFAULT_LATENCY_MS)
                    for name, count in calls.items()
                )
                timing = self.times.setdefault(logical_id, HandlerTime())
                timing.invocations += 1
                records = len(event.get("Records", [])) if isinstance(event, dict) else 0
                timing.records += records
                timing.lambda_seconds += in_lambda
                if records:
                    timing.per_record.append(in_lambda / records)
                timing.billed_ms += math.ceil(in_lambda * 1000 + waited_ms)

        return handler

    def _replay(
        self, logical_id: str, real: Callable[[Any, Any], Any], event: Any, context: Any, recorded: list[Any]
    ) -> None:
        records = len(event.get("Records", [])) if isinstance(event, dict) else 0
        if not records:
            return
        timing = self.times.setdefault(logical_id, HandlerTime())
        best = None
        for _ in range(REPLAYS):
            mismatches = self.meter.replay_mismatches
            runner_before, service_before = self._runner_clock(), self.meter.service_cpu
            with self.meter.replaying(recorded), contextlib.redirect_stdout(io.StringIO()):
                started = time.thread_time()
                real(event, context)
                cpu = time.thread_time() - started
            if self.meter.replay_mismatches != mismatches:
                timing.replay_mismatches += 1
                return
            # Reads the replay had no answer for went to the emulator: its time is not the Lambda's.
            emulator = self.meter.service_cpu - service_before
            own = max(0.0, cpu - emulator - (self._runner_clock() - runner_before)) / records
            best = own if best is None else min(best, own)
        if best is not None:
            timing.replayed_per_record.append(best)


def run_jobs(
    design: str,
    cloud: Any,
    meter: Meter,
    timers: TimedHandlers,
    enqueue: Callable[[int], None],
    jobs: int,
    runner_clock: Callable[[], float],
    follow: Callable[[int], None] | None = None,
) -> DesignRun:
    """Enqueue `jobs` jobs (enqueue(i) each), drain, and return the metered delta; with `follow`, once the cloud is
    quiet, follow(i) each (a signal to a job that waits for one) and drain again, metered too."""
    timers.reset()
    before = meter.snapshot()
    invocations_before = Counter(cloud.runtime.invocation_counts)
    runner_before = runner_clock()
    service_before = meter.service_clock
    started = time.perf_counter()
    for index in range(jobs):
        enqueue(index)
    stats = cloud.drain(max_rounds=100_000)
    if follow is not None:
        for index in range(jobs):
            follow(index)
        stats = cloud.drain(max_rounds=100_000)
    seconds = time.perf_counter() - started
    run = DesignRun(
        design=design,
        jobs=jobs,
        seconds=seconds,
        usage=meter.since(before),
        invocations=Counter(cloud.runtime.invocation_counts) - invocations_before,
        handlers=dict(timers.times),
        memory_mb={logical_id: spec.memory_mb for logical_id, spec in cloud.functions.items()},
        runner_seconds=runner_clock() - runner_before,
        service_seconds=meter.service_clock - service_before,
    )
    if not stats.quiescent:
        run.notes.append(f"drain stopped after {stats.rounds} rounds before the cloud was quiet")
    return run


def merged(runs: list[DesignRun]) -> DesignRun:
    """Several runs of one design (its rounds) as one: usage, invocations and handler times added up."""
    first = runs[0]
    usage = Snapshot(Tally(), Tally(), 0)
    handlers: dict[str, HandlerTime] = {}
    invocations: Counter[str] = Counter()
    for run in runs:
        usage.application.add(run.usage.application)
        usage.platform.add(run.usage.platform)
        usage.idle_receives += run.usage.idle_receives
        invocations.update(run.invocations)
        for logical_id, timing in run.handlers.items():
            total = handlers.setdefault(logical_id, HandlerTime())
            total.invocations += timing.invocations
            total.records += timing.records
            total.lambda_seconds += timing.lambda_seconds
            total.billed_ms += timing.billed_ms
            total.per_record += timing.per_record
            total.replayed_per_record += timing.replayed_per_record
            total.replay_mismatches += timing.replay_mismatches
    return DesignRun(
        design=first.design,
        jobs=sum(run.jobs for run in runs),
        seconds=sum(run.seconds for run in runs),
        usage=usage,
        invocations=invocations,
        handlers=handlers,
        memory_mb=first.memory_mb,
        runner_seconds=sum(run.runner_seconds for run in runs),
        service_seconds=sum(run.service_seconds for run in runs),
        completed=sum(run.completed for run in runs),
        notes=[note for run in runs for note in run.notes],
    )
