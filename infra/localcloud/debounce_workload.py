"""Debounced bursts under faults (`converge demo --chaos`), and the bursts' checks; `send_burst` is `converge demo`'s.

The job type is the catalogue's first debounced one in its workload's mix (else its first debounced binding; none
when it has none); a burst's payload is one of its mix rows, its demo scenario's burst or its example payload, one
per key (a payload's debounce key: a profile). In the first wave of each two, every key gets a burst of `REQUESTS`
requests, sent a moment apart and out of order, the keys' bursts side by side, each request relayed and delivered as
it comes, under the wave's faults; the next drain runs them. Once the run has settled, each burst:

- ran once, as its newest request (the debounce's `newest_by`), and every other request ended NOOP, "debounced into
  <the run's id>"; every request is final. The run ends as any job does (SUCCEEDED, or NOOP by its own reason), or
  FAILED or UNKNOWN when a fault was injected on it;
- no request that never started is in a DLQ (or the relay's failure queue);
- the run started no later than `max_wait` after the burst's first request was written, and no hold promised a
  later start than `max_wait` after the burst's first request reached a worker.

A burst that met a fault (one injected on a request of its wave's bursts, which share the worker's batches, or a
kill switch read as off) is held to what the debounce promises under faults instead: each request that did not run
names a newer request of its key that ran, and no older payload started after a newer one (a request a fault
delayed past its burst's start opens a burst of its own); its run's start counts from its first request reaching a
worker (docs/flow-control.md: a burst's times are the worker's), later by what the faults cost it: the
time its receipt shows it PAUSED, and a failed receipt of its message per retry its queue allows (each comes back
after the queue's visibility timeout). Such bursts are named in the checks' details.
"""

from __future__ import annotations

import itertools
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from converge.model.clock import iso
from converge.model.debounce import Debounce
from converge.model.records import Operation
from converge.model.states import FINAL_STATES, OperationState
from converge.model.timing import parse_instant

from .checks import Check
from .invariants import dead_lettered

REQUESTS = 4
"""Requests in one burst."""
ARRIVALS = (2, 0, 3, 1)
"""How new each of a burst's requests is (0 the oldest), in the order they are sent: edits whose requests reach
converge out of order, the newest third."""
EVERY = 2
"""Every so many waves (the first of each two), each key gets a burst."""
MAX_KEYS = 3
ORDERS_PER_WAVE = 1000
"""A wave's bursts are newer than the last wave's: each request's order is this times (wave + 1), plus its rank."""
EPOCH = 1_900_000_000.0
"""Where the orders start when `newest_by` is a time (an ISO-8601 string): each order a second after it."""
SLACK = 0.002
"""A start's rounding: the burst's times are whole milliseconds, and the local cloud wakes 1 ms past a delay."""
SHOWN = 3
"""What a fault changed, shown in a check's detail (a few)."""
_HELD = re.compile(r"^debounced \(.*a burst since (\S+), newest \S+\); starts by (\S+)$")
_INTO = re.compile(r"^debounced into (\S+)$")
_S = OperationState


def send_burst(
    cloud: Any, converge: Any, job_type: str, rounds: Sequence[Sequence[tuple[str, dict[str, Any]]]], spacing: float
) -> None:
    """Enqueue each round's requests (operation id, payload), relay and deliver them without moving the clock (each
    waits SCHEDULED for its burst), then move the local clock `spacing` seconds on: a burst, a moment apart."""
    for requests in rounds:
        for operation_id, payload in requests:
            converge.enqueue(job_type, operation_id, payload, f"corr-{operation_id}")
        cloud.drain(max_fast_forward=0)
        cloud.advance(spacing)


def first_at(operation: Operation, state: OperationState) -> float:
    """When the operation's receipt first shows `state` (epoch seconds), or infinity when it never does."""
    times = [parse_instant(state.value, entry.at) for entry in operation.history if entry.state == state.value]
    return min(times, default=float("inf"))


@dataclass
class Burst:
    """One key's burst in one wave: its requests' ids and payloads, in the order they were sent."""

    wave: int
    key: str
    ids: list[str]
    payloads: list[dict[str, Any]]


@dataclass
class ChaosBursts:
    """The debounced bursts a chaos run sends, and their checks."""

    cloud: Any
    converge: Any
    job_type: str
    debounce: Debounce
    templates: list[dict[str, Any]]
    """One payload per key."""
    delivery_allowance: float
    """How much later a run may start than its burst's start for failed receipts of its message."""
    bursts: list[Burst] = field(default_factory=list)

    @classmethod
    def of(cls, workload: Any) -> ChaosBursts | None:
        """The catalogue's debounced job type and a payload per key (see the module docstring), or None."""
        cloud = workload.cloud
        debounced = {binding.job_type: binding for binding in cloud.registry if binding.debounce is not None}
        in_mix = [job_type for job_type, _, _ in workload.mix if job_type in debounced]
        job_type = in_mix[0] if in_mix else next(iter(debounced), None)
        if job_type is None:
            return None
        binding = debounced[job_type]
        debounce: Debounce = binding.debounce
        step = getattr(cloud.hooks.demo_scenario(), "debounce", None)
        candidates = [payload for each, payload, _ in workload.mix if each == job_type]
        if step is not None and step.job_type == job_type:
            candidates += step.payloads
        candidates.append(dict(binding.example_payload or {}))
        templates: dict[str, dict[str, Any]] = {}
        for payload in candidates:
            templates.setdefault(debounce.key_of(payload), payload)
        return cls(
            cloud,
            workload.converge,
            job_type,
            debounce,
            list(templates.values())[:MAX_KEYS],
            _delivery_allowance(cloud, binding.queue.value),
        )

    def send(self, wave: int, prefix: str) -> list[str]:
        """In the first wave of each `EVERY`, a burst per key, sent side by side (their ids); else none."""
        if wave % EVERY:
            return []
        bursts = []
        for place, template in enumerate(self.templates):
            ids = [f"{prefix}-k{place}-{n}" for n in range(REQUESTS)]
            payloads = [self._stamped(template, ORDERS_PER_WAVE * (wave + 1) + rank) for rank in ARRIVALS]
            bursts.append(Burst(wave, self.debounce.key_of(template), ids, payloads))
        rounds = [[(burst.ids[n], burst.payloads[n]) for burst in bursts] for n in range(REQUESTS)]
        # a moment apart, the whole burst within half its quiet period: one burst, whatever the period
        send_burst(self.cloud, self.converge, self.job_type, rounds, self.debounce.period / (2 * REQUESTS))
        self.bursts += bursts
        return [operation_id for burst in bursts for operation_id in burst.ids]

    def _stamped(self, template: dict[str, Any], order: int) -> dict[str, Any]:
        """The template with its `newest_by` field set to `order`: a number, or a time when the field holds one."""
        example = template.get(self.debounce.newest_by)
        return {**template, self.debounce.newest_by: iso(EPOCH + order) if isinstance(example, str) else order}

    @property
    def requests(self) -> int:
        return sum(len(burst.ids) for burst in self.bursts)

    def summary(self) -> dict[str, Any]:
        return {
            "job_type": self.job_type,
            "debounce": self.debounce.describe(),
            "bursts": len(self.bursts),
            "requests": self.requests,
            "keys": len({burst.key for burst in self.bursts}),
        }

    # -- the checks -------------------------------------------------------------------------------------------

    def checks(self, operations: dict[str, tuple[Operation, Any]], faults: Any) -> list[Check]:
        """The three checks the chaos report carries (see the module docstring); none when no burst was sent."""
        if not self.bursts:
            return []
        ran_once, kept, dead, late, on_time = [], [], [], [], []
        faulted: dict[str, list[str]] = {}
        """The bursts that met faults, by the faults their wave's requests met."""
        in_dlq = dead_lettered(self.cloud)
        latest = 0.0
        for burst in self.bursts:
            stored = {op: operations[op][0] for op in burst.ids if op in operations}
            ran_once += [f"{op}: never stored" for op in burst.ids if op not in stored]
            met = self._faults_met(burst, stored, faults)
            if met:
                faulted.setdefault(met, []).append(burst.ids[0][:-2])
            for op, operation in stored.items():
                if operation.state not in FINAL_STATES:
                    ran_once.append(f"{op}: {operation.state.value}, not final once drained")
                never_started = operation.record is None or operation.record.attempts == 0
                if never_started and in_dlq.get(op):
                    dead.append(f"{op}: debounced, never started, in a DLQ")
            if met:  # what the faults changed is said; what the debounce promises under faults must hold
                kept.extend(self._ran_once(burst, stored, faults, exact=True))
            ran_once.extend(self._ran_once(burst, stored, faults, exact=not met))
            found, later, slowest = self._timing(stored, bool(met))
            late += found
            on_time += later
            latest = max(latest, slowest)
        where = f"{len(self.bursts)} bursts of {self.job_type} ({self.requests} requests, {len(self.templates)} keys)"
        named = [f"{', '.join(names)} ({kinds})" for kinds, names in faulted.items()]
        count = sum(len(names) for names in faulted.values())
        met_note = f"; {count} met a fault, on their wave's requests: {'; '.join(named)}" if faulted else ""
        later_note = f"; later by what faults cost: {', '.join(on_time)}" if on_time else ""
        return [
            Check(
                "debounce_ran_once",
                not ran_once,
                f"{where}: each ran once, as its newest request, the others NOOP debounced into it, all final"
                + (
                    " (one that met a fault: each NOOP into a newer request that ran, none older ran after a newer)"
                    if faulted
                    else ""
                )
                + met_note
                + (f"; what its faults changed: {'; '.join(kept[:SHOWN])}" if kept else ""),
                ran_once,
            ),
            Check(
                "debounced_not_dead_lettered",
                not dead,
                f"{where}: none that never started is in a DLQ",
                dead,
            ),
            Check(
                "debounce_within_max_wait",
                not late,
                f"{where}: each run started within {self.debounce.max_wait:g} s of its burst's first request (the "
                f"latest after {latest:.1f} s"
                + (
                    "; one that met a fault: from its first request reaching a worker, plus what the faults cost"
                    if faulted
                    else ""
                )
                + f"), and no hold promised later{later_note}",
                late,
            ),
        ]

    def _timing(self, stored: dict[str, Operation], met: bool) -> tuple[list[str], list[str], float]:
        """What breaks the burst's timing; the runs later than `max_wait` within what their faults cost; and the
        longest wait. Measured from the producer's first write when nothing delayed the burst (its requests reach a
        worker as they are written); from its first request's arrival at a worker, as the run's hold names it, when a
        fault may have (docs/flow-control.md: a burst's times are the worker's)."""
        late, later, latest = [], [], 0.0
        for op, operation in stored.items():
            for since, starts in _holds(operation):
                if starts - since > self.debounce.max_wait + SLACK:
                    late.append(f"{op}: held to start {starts - since:.1f} s after its burst's first request")
        written = min((first_at(operation, _S.ACCEPTED) for operation in stored.values()), default=math.inf)
        for op, operation in stored.items():
            started = first_at(operation, _S.IN_PROGRESS)
            holds = [since for since, _ in _holds(operation, before=started)]
            if started == math.inf or (met and not holds):
                continue
            waited = started - (holds[-1] if met else written)
            allowed = self.debounce.max_wait + SLACK
            if met:
                allowed += _paused_for(operation, started) + self.delivery_allowance
            latest = max(latest, waited)
            if waited > allowed:
                late.append(f"{op}: started {waited:.1f} s after its burst's first request (allowed {allowed:g} s)")
            elif waited > self.debounce.max_wait + SLACK:
                later.append(f"{op} {waited:.0f} s")
        return late, later, latest

    def _faults_met(self, burst: Burst, stored: dict[str, Operation], faults: Any) -> str:
        """The faults a burst met, as a phrase ("" for none): injected on a request of its wave's bursts (they share
        the worker's batches), or a kill switch read as off (a PAUSED on a receipt: an SSM outage fails closed)."""
        kinds: dict[str, int] = {}
        for other in self.bursts:
            if other.wave != burst.wave:
                continue
            for op in other.ids:
                log = faults.operations.get(op)
                for kind, number in log.injected.items() if log is not None else ():
                    kinds[kind] = kinds.get(kind, 0) + number
        paused = sum(any(entry.state == _S.PAUSED.value for entry in op.history) for op in stored.values())
        if paused:
            kinds["kill switch read as off"] = paused
        return ", ".join(f"{kind} {number}" for kind, number in sorted(kinds.items()))

    def _ran_once(self, burst: Burst, stored: dict[str, Operation], faults: Any, exact: bool) -> list[str]:
        """What breaks the burst's outcome: `exact`, one run, the newest, the others NOOP into it; else the debounce's
        promise under faults (each NOOP names a newer request of its key that ran; no older payload ran after a
        newer one). A run ends as any job does, FAILED or UNKNOWN only with a fault injected on it."""
        order = {
            op: (self.debounce.order_of(payload), op) for op, payload in zip(burst.ids, burst.payloads, strict=True)
        }
        newest = max(burst.ids, key=lambda op: order[op])
        started = {op: first_at(operation, _S.IN_PROGRESS) for op, operation in stored.items()}
        ran = sorted((op for op, at in started.items() if at != math.inf), key=lambda op: started[op])
        wrong = []
        for op in ran:
            operation = stored[op]
            if operation.state in (_S.FAILED, _S.UNKNOWN) and not _injected(faults, op):
                wrong.append(f"{op}: the run ended {operation.state.value} with no fault injected on it")
            if operation.state is _S.NOOP and _INTO.match(_reason(operation)):
                wrong.append(f"{op}: started, then ended {_reason(operation)!r}")
        for op, operation in stored.items():
            if op in ran:
                continue
            into = _INTO.match(_reason(operation)) if operation.state is _S.NOOP else None
            if exact and (into is None or into.group(1) != newest):
                wrong.append(f"{op}: {operation.state.value} {_reason(operation)!r}, not debounced into {newest}")
            elif not exact and (into is None or into.group(1) not in ran or order[into.group(1)] <= order[op]):
                wrong.append(f"{op}: {operation.state.value} {_reason(operation)!r}, into no newer request that ran")
        if exact and ran != [newest]:
            wrong.append(f"{burst.ids[0][:-2]}: ran {', '.join(ran) or 'none'}, not its newest request {newest} alone")
        if not exact:
            for before, after in itertools.pairwise(ran):
                if order[after] < order[before]:
                    wrong.append(f"{after} (older) started after {before} (newer)")
        return wrong


def _reason(operation: Operation) -> str:
    return operation.history[-1].reason if operation.history else ""


def _injected(faults: Any, operation_id: str) -> bool:
    log = faults.operations.get(operation_id)
    return log is not None and sum(log.injected.values()) > 0


def _holds(operation: Operation, before: float = math.inf) -> list[tuple[float, float]]:
    """(its burst's first request, the start it promised) of each debounce hold on the receipt, before `before`."""
    found = []
    for entry in operation.history:
        held = _HELD.match(entry.reason) if entry.state == _S.SCHEDULED.value else None
        if held is not None and parse_instant("at", entry.at) < before:
            found.append((parse_instant("since", held.group(1)), parse_instant("starts", held.group(2))))
    return found


def _paused_for(operation: Operation, until: float) -> float:
    """How long the receipt shows the operation PAUSED before `until` (each PAUSED to the entry after it)."""
    total, history = 0.0, operation.history
    for entry, after in zip(history, [*history[1:], None], strict=True):
        if entry.state != _S.PAUSED.value:
            continue
        start = parse_instant("at", entry.at)
        end = parse_instant("at", after.at) if after is not None else until
        total += max(0.0, min(end, until) - start)
    return total


def _delivery_allowance(cloud: Any, queue: str) -> float:
    """A message's visibility timeout times the retries its queue allows before its DLQ: how much later a fault's
    failed receipts can deliver a run than its burst's start (read from the deployed queue)."""
    url = cloud.outputs[f"{queue.title()}QueueUrl"]
    attributes = cloud.client("sqs").get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    redrive = json.loads(attributes.get("RedrivePolicy") or "{}")
    return float(attributes["VisibilityTimeout"]) * max(0, int(redrive.get("maxReceiveCount", 1)) - 1)
