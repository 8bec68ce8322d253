"""Fault injection for the local cloud: the faults listed in docs/fault-injection.md, each counted when injected.

    faults = FaultInjector(cloud, seed=7)
    with faults.installed():
        faults.plan(FaultKind.CRASH_AFTER_EFFECT, operation_id="op-1")   # deterministic: once, for op-1
        faults.rate(FaultKind.LOST_RESPONSE, 0.02)                      # probabilistic, every operation
        cloud.drain()
    faults.counts                  # kind -> injected
    faults.window("op-1")          # faults injected between op-1's effect and its claim

Faults are injected only into invocations of the cloud's functions (never into the emulator's own
polling or a test's setup), through these hooks, all removed by `uninstall()`:

* every boto3 client's `_make_api_call`: throttling and SSM outages before a call reaches moto;
  a lost response after the service applied it; failed SendMessageBatch entries and replayed
  dispatches in the relay;
* `LocalCloud.runtime.invoke`: the stack of running invocations (nested ones included), and a
  simulated crash turned into a failed invocation, as the event source sees a Lambda that died;
* the pipeline's moments, as an extension (converge.flow.extensions) that the cloud gives every function's
  runtime; nothing of converge is patched:
  `before_record`, the record boundaries and a Lambda that runs out of time mid-batch;
  `before_effect`, a second receipt while the first is about to apply the effect;
  `before_terminal_write` after an effect, a crash before the claim and a lease that expires under
  its holder.

* a crash between two steps: the worker dies just after a step's marker is recorded (the step named by the
  rule's `step` option, else any), before the next step; the marker is that step's claim, so the crash is
  no window fault (the retry runs none of the steps recorded).

and, for the delayed-dispatch path and the relay's outages:

* a relay batch failure: the relay's invocation fails for every batch holding a planned operation (or
  any batch), so the stream mapping retries, bisects, and after its MaximumRetryAttempts gives the
  batch up to its on-failure destination (stream_source.py emulates what Lambda does);
* a missing schedule group: deleted (its schedules go with it, as on AWS) until `restore_schedule_group()`,
  CreateSchedule meanwhile answers ResourceNotFoundException;
* a dropped schedule firing: the one-time schedule fires but its target delivery fails, every attempt of
  its RetryPolicy too, each recorded as a failed `Firing` (schedule_runs.py's `failing` hook), until the
  service sends it to the schedules' dead-letter queue;
* a duplicate delivery: a worker's message delivered once more after its first receipt was handled
  (SQS's at-least-once), or a schedule's firing sent twice (schedule_runs.py's `duplicating` hook);
* a raced limiter key: before a worker's write to a rate limiter's key, the key is moved against it, by another
  worker's reservation when the write is for a key at rest, by an operator's release when it is for a busy one
  (each write one opportunity of the rule); a delivery in which the race alone was injected, which its worker
  counted as retried (its `retried` metric: a flow control that failed to answer) and handed back, is logged
  (`races_failed`): the worker's reservation failed for a key that moved under it. (A record handed back for another
  reason, say a copy of a job the same batch just held, which is early, is not a failed reservation.)
* a concurrency cap's first use raced: as a worker is about to make a key's item, the next record of its batch is
  delivered first to a second instance of the function (nested), which takes the key's first slot.

Every effect seen (the service accepted it) is logged with the emulated time (`effects_seen`), so a
run can tell when each effect happened, not only how many there were.

A producer's faults (a plain PutItem written again with the same content or with other content, or
with attributes converge owns) are not invocations: the workload asks `producer_fault()` as it
enqueues, and makes the writes itself (`Workload.enqueue_mix`).

"Window" faults are those injected while an attempt has applied its operation's effect (the
service accepted the e-mail, the object or the credit) and has not yet recorded the claim: each may
cost one duplicate effect under effect_then_claim, so the invariants bound duplicates by them.
"""

from __future__ import annotations

import contextlib
import copy
import json
import random
import threading
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from botocore.client import BaseClient
from botocore.exceptions import ClientError, EndpointConnectionError, ReadTimeoutError

from converge.flow.extensions import Extension
from converge.store.codecs import request_from_image
from converge.store.limits import LIMIT_PK, LimiterTable

from .hooks import EffectSources
from .iam import outside_functions


class FaultKind(StrEnum):
    CRASH_AFTER_EFFECT = "crash_after_effect"
    CONCURRENT_DELIVERY = "concurrent_delivery"
    LOST_RESPONSE = "lost_response"
    DISPATCH_REPLAY = "dispatch_replay"
    SSM_UNAVAILABLE = "ssm_unavailable"
    DYNAMODB_THROTTLE = "dynamodb_throttle"
    SEND_BATCH_PARTIAL = "send_batch_partial_failure"
    LAMBDA_TIMEOUT = "lambda_timeout"
    LEASE_EXPIRY = "lease_expiry"
    RELAY_BATCH_FAILURE = "relay_batch_failure"  # the relay's invocation fails for a whole stream batch
    # The batch counter's invocation fails after its work (its answer lost): the stream gives it the batch again
    COUNTER_BATCH_FAILURE = "counter_batch_failure"
    SCHEDULE_GROUP_MISSING = "schedule_group_missing"  # the delayed jobs' schedule group is deleted for a while
    SCHEDULE_FIRING_DROPPED = "schedule_firing_dropped"  # a one-time schedule fires but its target delivery fails
    DUPLICATE_DELIVERY = "duplicate_delivery"  # a message (or a schedule's firing) delivered twice
    CRASH_BETWEEN_STEPS = "crash_between_steps"  # a worker dies just after a step's marker (option `step`: which)
    # A producer's own writes (plain PutItem into the jobs table), decided by the workload as it enqueues:
    PRODUCER_RETRY_SAME = "producer_retry_same"  # the same item written again (a retry after a timeout)
    PRODUCER_RETRY_OTHER = "producer_retry_other"  # other content written under the same id
    PRODUCER_OWNED_ATTRIBUTES = "producer_owned_attributes"  # attributes converge owns, with wrong types/values
    # A worker's write to a rate limiter's key (its reservation) meets the key moved against it just before: another
    # worker's reservation before a write for a key at rest, an operator's release before one for a busy key
    LIMITER_KEY_RACED = "limiter_key_raced"
    # As a worker is about to make a concurrency cap's key item (the key's first use), the next record of its batch
    # is delivered to a second instance first (nested), which races it for the key
    FIRST_USE_RACED = "first_use_raced"


PRODUCER_FAULTS = frozenset(
    {FaultKind.PRODUCER_RETRY_SAME, FaultKind.PRODUCER_RETRY_OTHER, FaultKind.PRODUCER_OWNED_ATTRIBUTES}
)


class SimulatedCrash(BaseException):
    """The Lambda process died. A BaseException, so no `except Exception` in converge can absorb it."""


class LambdaCrashed(RuntimeError):
    """What the event source sees of a crashed invocation: a failed invoke (the batch comes back)."""


@dataclass
class Rule:
    """Inject `kind` with `probability` at each opportunity, for one operation or all, `times` times at most."""

    kind: FaultKind
    probability: float = 1.0
    operation_id: str | None = None
    times: int | None = None
    options: dict[str, Any] = field(default_factory=dict)
    used: int = 0

    def applies(self, operation_id: str | None) -> bool:
        if self.times is not None and self.used >= self.times:
            return False
        return self.operation_id is None or self.operation_id == operation_id


@dataclass(frozen=True)
class EffectSeen:
    """One effect the service accepted, for an operation, at an emulated time."""

    operation_id: str
    service: str
    at: float


@dataclass
class _Invocation:
    function_id: str
    role: str  # "worker", "relay", "counter" or "other"
    event: Any
    depth: int
    records_seen: int = 0
    operation_id: str | None = None
    body: str | None = None
    effect_applied: bool = False
    effect_ran: bool = False
    dead: bool = False
    raced: bool = False
    """A limiter key was moved against one of its writes (`FaultKind.LIMITER_KEY_RACED`)."""
    retried: bool = False
    """Its function counted a delivery retried once raced (a `retried` metric's EMF line)."""


@dataclass
class OperationLog:
    """What was injected for one operation, and what the second receipts it got ended as."""

    injected: Counter[str] = field(default_factory=Counter)
    window: int = 0
    second_receipts: list[str] = field(default_factory=list)
    original: tuple[str, dict[str, Any]] | None = None
    """A producer fault's operation: the content first written (job type, payload), which must be what runs."""
    original_fingerprints: tuple[str, ...] = ()
    """The fingerprints the first-written request may be admitted under (with its options: times, caller;
    the first is its full fingerprint); empty: those of `original` alone."""
    rewritten_fingerprints: list[str] = field(default_factory=list)
    """The full fingerprint of each rewrite (with its options), when the writer logged it: a rewrite whose
    options differ is other content too."""
    rewrites: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)
    """(when, job type, payload) of each rewrite a producer fault made: "before" or "after" it ran."""
    owned_attributes: list[str] = field(default_factory=list)


_ORIGINAL_API_CALL = BaseClient._make_api_call
RETRIED_METRIC = '"Name":"retried"'
"""How a function's EMF line counting a delivery retried names its metric (converge.observability's `retried`)."""
_ACTIVE: FaultInjector | None = None
_THROTTLE = "ProvisionedThroughputExceededException"


def _patched_api_call(client: BaseClient, operation: str, params: dict[str, Any]) -> Any:
    injector = _ACTIVE
    if injector is None:
        return _ORIGINAL_API_CALL(client, operation, params)
    return injector._on_api_call(client, operation, params)


class FaultInjector(Extension):
    """Injects faults into one LocalCloud's invocations; see the module docstring."""

    def __init__(self, cloud: Any, seed: int = 0) -> None:
        self.cloud = cloud
        self.rng = random.Random(seed)
        self.rules: list[Rule] = []
        self.counts: Counter[str] = Counter()
        self.operations: dict[str, OperationLog] = defaultdict(OperationLog)
        self.ssm_outage_until = 0.0
        self.ssm_calls_failed = 0
        self._local = threading.local()
        self._roles = {lid: _role(spec.code_dir.name) for lid, spec in cloud.functions.items()}
        self._saved_invoke: Callable[..., Any] | None = None
        self._at_effect: dict[str, list[Callable[[], None]]] = defaultdict(list)
        self.effects_seen: list[EffectSeen] = []
        self._dropped_firings: set[str] = set()
        """Schedules whose firing was dropped: each of their delivery attempts fails."""
        self.missing_groups: set[str] = set()
        self.limiter_keys_released = 0
        """How many times a raced limiter key was released (its pace forgotten, as an operator's release does)."""
        self.races_failed: list[str] = []
        """Operations a raced limiter key alone met in a delivery its worker handed back and counted as retried (its
        reservation failed)."""
        self._racing = False

    # -- configuration ----------------------------------------------------------------------------------------

    def plan(self, kind: FaultKind, operation_id: str | None = None, times: int = 1, **options: Any) -> Rule:
        """Inject `kind` deterministically: at the next `times` opportunities (for `operation_id`, or any)."""
        return self._add(Rule(FaultKind(kind), 1.0, operation_id, times, options))

    def rate(self, kind: FaultKind, probability: float, **options: Any) -> Rule:
        """Inject `kind` with `probability` at every opportunity, for every operation."""
        return self._add(Rule(FaultKind(kind), probability, None, None, options))

    def _add(self, rule: Rule) -> Rule:
        self.rules.append(rule)
        return rule

    def withdraw(self, rule: Rule) -> None:
        """Stop injecting `rule` (planned or rated); what it injected stays counted."""
        if rule in self.rules:
            self.rules.remove(rule)

    def delete_schedule_group(self, group: str | None = None) -> str:
        """Delete the delayed jobs' schedule group (and its schedules, as Scheduler does) until restored.

        Meanwhile CreateSchedule in it answers ResourceNotFoundException, as the service does."""
        name = group or self.cloud.outputs["ScheduleGroupName"]
        if name not in self.missing_groups:
            scheduler = self.cloud.client("scheduler")
            for summary in scheduler.list_schedules(GroupName=name).get("Schedules", []):
                detail = scheduler.get_schedule(Name=summary["Name"], GroupName=name)
                lost = _operation_id((detail.get("Target") or {}).get("Input") or "")
                if lost is not None:  # its schedule goes with the group: logged against the operation
                    self.operations[lost].injected[FaultKind.SCHEDULE_GROUP_MISSING.value] += 1
            scheduler.delete_schedule_group(Name=name)
            self.missing_groups.add(name)
            self._injected(FaultKind.SCHEDULE_GROUP_MISSING, None)
        return name

    def restore_schedule_group(self, group: str | None = None) -> None:
        """Create the deleted schedule group again (empty), as a stack update or an operator would."""
        for name in [group] if group else sorted(self.missing_groups):
            if name in self.missing_groups:
                self.cloud.client("scheduler").create_schedule_group(Name=name)
                self.missing_groups.discard(name)

    def ssm_outage(self, seconds: float) -> None:
        """SSM answers nothing (EndpointConnectionError) for `seconds` of emulated time from now (counted once)."""
        self.ssm_outage_until = max(self.ssm_outage_until, self.cloud.clock.now() + seconds)
        self._injected(FaultKind.SSM_UNAVAILABLE, None)

    def reset(self, seed: int | None = None) -> None:
        """Forget rules, counts and logs (between examples of a property test)."""
        self.rules.clear()
        self.counts.clear()
        self.operations.clear()
        self._at_effect.clear()
        self.ssm_outage_until = 0.0
        self.ssm_calls_failed = 0
        self.effects_seen.clear()
        self.races_failed.clear()
        self.limiter_keys_released = 0
        self._dropped_firings.clear()
        self.restore_schedule_group()
        if seed is not None:
            self.rng.seed(seed)

    def during_effect(self, operation_id: str, action: Callable[[], None]) -> None:
        """Run `action` once, while the operation's effect is under way (e.g. a producer's write meanwhile).

        The action is another party's, not the function's: its calls are not checked against the function's role."""
        self._at_effect[operation_id].append(action)

    def producer_fault(self, kind: FaultKind, operation_id: str) -> Rule | None:
        """Decide one of a producer's faults for an operation it enqueues (counted when injected)."""
        if FaultKind(kind) not in PRODUCER_FAULTS:
            raise ValueError(f"{kind} is not a producer fault")
        rule = self._decide(FaultKind(kind), operation_id)
        if rule is not None:
            self._injected(FaultKind(kind), operation_id)
        return rule

    def window(self, operation_id: str) -> int:
        return self.operations[operation_id].window if operation_id in self.operations else 0

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    # -- install ----------------------------------------------------------------------------------------------

    @contextlib.contextmanager
    def installed(self) -> Iterator[FaultInjector]:
        self.install()
        try:
            yield self
        finally:
            self.uninstall()

    def install(self) -> None:
        global _ACTIVE
        if _ACTIVE is not None and _ACTIVE is not self:
            raise RuntimeError("another FaultInjector is installed; uninstall it first")
        if _ACTIVE is self:
            return
        _ACTIVE = self
        BaseClient._make_api_call = _patched_api_call  # type: ignore[method-assign]
        runtime = self.cloud.runtime
        self._saved_invoke = runtime.invoke
        runtime.invoke = self._invoke  # an instance attribute: the event sources call runtime.invoke
        runtime.extensions.add(self)  # every function's pipeline in this cloud
        runtime.log_listeners.append(self._heard)
        schedules = self.cloud.one_time_schedules
        schedules.failing, schedules.duplicating = self._firing_fails, self._firing_twice

    def uninstall(self) -> None:
        global _ACTIVE
        if _ACTIVE is not self:
            return
        BaseClient._make_api_call = _ORIGINAL_API_CALL  # type: ignore[method-assign]
        vars(self.cloud.runtime).pop("invoke", None)
        self.cloud.runtime.extensions.remove(self)
        self.cloud.runtime.log_listeners.remove(self._heard)
        self.cloud.one_time_schedules.failing = self.cloud.one_time_schedules.duplicating = None
        _ACTIVE = None

    # -- deciding and counting --------------------------------------------------------------------------------

    def _decide(self, kind: FaultKind, operation_id: str | None) -> Rule | None:
        for rule in self.rules:
            if rule.kind is kind and rule.applies(operation_id) and self.rng.random() < rule.probability:
                rule.used += 1
                return rule
        return None

    def _decide_any(self, kind: FaultKind, operation_ids: list[str]) -> Rule | None:
        """A rule of `kind` for any of the operations (a batch's), decided once."""
        candidates: list[str | None] = [*operation_ids] or [None]
        for rule in self.rules:
            if rule.kind is not kind or not any(rule.applies(op) for op in candidates):
                continue
            if self.rng.random() < rule.probability:
                rule.used += 1
                return rule
        return None

    def _injected(self, kind: FaultKind, operation_id: str | None) -> None:
        self.counts[kind.value] += 1
        if operation_id is None:
            return
        log = self.operations[operation_id]
        log.injected[kind.value] += 1
        invocation = self._top()
        if invocation is not None and invocation.operation_id == operation_id and invocation.effect_applied:
            log.window += 1

    # -- invocations ------------------------------------------------------------------------------------------

    def _stack(self) -> list[_Invocation]:
        stack = getattr(self._local, "stack", None)
        if stack is None:
            stack = self._local.stack = []
        return stack

    def _top(self) -> _Invocation | None:
        stack = self._stack()
        return stack[-1] if stack else None

    def _invoke(self, logical_id: str, event: Any, request_id: str | None = None) -> Any:
        assert self._saved_invoke is not None
        stack = self._stack()
        invocation = _Invocation(logical_id, self._roles.get(logical_id, "other"), event, len(stack))
        stack.append(invocation)
        before = Counter(self.counts)
        try:
            if invocation.role == "relay" and invocation.depth == 0:
                self._maybe_fail_relay_batch(event)
            response = self._saved_invoke(logical_id, event, request_id)
            if invocation.role == "counter" and invocation.depth == 0:
                self._maybe_fail_counter_batch(event)
        except SimulatedCrash as crash:
            raise LambdaCrashed(f"{logical_id} crashed: {crash}") from None
        finally:
            stack.pop()
        if invocation.raced and set(self.counts - before) == {FaultKind.LIMITER_KEY_RACED.value}:
            self._note_race_failed(invocation, event, response)
        if invocation.role == "worker" and invocation.depth == 0:
            self._maybe_deliver_twice(logical_id, event)
        return response

    def _heard(self, function_id: str, line: str) -> None:
        """A line a function printed: whether a raced invocation counts a delivery retried (its EMF metric)."""
        invocation = self._top()
        if invocation is not None and invocation.raced and RETRIED_METRIC in line:
            invocation.retried = True

    def _note_race_failed(self, invocation: _Invocation, event: Any, response: Any) -> None:
        """The records a worker handed back from an invocation that no fault but a raced limiter key met, and that
        counted a delivery as retried (what a failed reservation does: a copy of a held job, early, is handed back
        without)."""
        if not invocation.retried:
            return
        failed = {failure.get("itemIdentifier") for failure in (response or {}).get("batchItemFailures") or []}
        for record in (event or {}).get("Records", []):
            operation_id = _operation_id(record.get("body", ""))
            if record.get("messageId") in failed and operation_id is not None:
                self.races_failed.append(operation_id)

    def _maybe_fail_relay_batch(self, event: Any) -> None:
        """The relay's invocation fails for the whole batch (before it does anything), as a Lambda error would."""
        operations = [op for op in (_stream_operation(r) for r in (event or {}).get("Records", [])) if op]
        if self._decide_any(FaultKind.RELAY_BATCH_FAILURE, operations) is None:
            return
        self.counts[FaultKind.RELAY_BATCH_FAILURE.value] += 1
        for operation_id in operations:
            self.operations[operation_id].injected[FaultKind.RELAY_BATCH_FAILURE.value] += 1
        raise LambdaCrashed("injected: the relay's invocation failed for its whole batch")

    def _maybe_fail_counter_batch(self, event: Any) -> None:
        """The batch counter's invocation fails once its work is done (a timeout as it answers): Lambda gives it the
        same stream batch again, whose changes are written already."""
        operations = [op for op in (_stream_operation(r) for r in (event or {}).get("Records", [])) if op]
        if self._decide_any(FaultKind.COUNTER_BATCH_FAILURE, operations) is None:
            return
        self.counts[FaultKind.COUNTER_BATCH_FAILURE.value] += 1
        for operation_id in operations:
            self.operations[operation_id].injected[FaultKind.COUNTER_BATCH_FAILURE.value] += 1
        raise LambdaCrashed("injected: the batch counter's invocation failed after its work")

    def _maybe_deliver_twice(self, logical_id: str, event: Any) -> None:
        """A message handled once is received again (SQS delivers at least once): the same record, later."""
        for record in (event or {}).get("Records", []):
            operation_id = _operation_id(record.get("body", ""))
            if operation_id is None or self._decide(FaultKind.DUPLICATE_DELIVERY, operation_id) is None:
                continue
            self._injected(FaultKind.DUPLICATE_DELIVERY, operation_id)
            again = copy.deepcopy(record)
            attributes = again.setdefault("attributes", {})
            attributes["ApproximateReceiveCount"] = str(int(attributes.get("ApproximateReceiveCount", "1")) + 1)
            again["receiptHandle"] = f"duplicate-receipt-{self.rng.getrandbits(64):016x}"
            try:
                self._invoke(logical_id, {"Records": [again]})
            except Exception as exc:  # its batch would come back; the original message is handled already
                self.operations[operation_id].second_receipts.append(exc.__class__.__name__)

    # -- one-time schedules' firings (schedule_runs.py's hooks) ----------------------------------------------------

    def _firing_fails(self, detail: dict[str, Any]) -> str | None:
        """A dropped firing fails every delivery attempt (the retries of the schedule's RetryPolicy too), so it
        ends in the schedules' dead-letter queue, as a target that stays unreachable does."""
        error = "injected: the schedule's target delivery failed"
        if detail["Name"] in self._dropped_firings:
            return error
        operation_id = _operation_id((detail.get("Target") or {}).get("Input") or "")
        if self._decide(FaultKind.SCHEDULE_FIRING_DROPPED, operation_id) is None:
            return None
        self._injected(FaultKind.SCHEDULE_FIRING_DROPPED, operation_id)
        self._dropped_firings.add(detail["Name"])
        return error

    def _firing_twice(self, detail: dict[str, Any]) -> bool:
        operation_id = _operation_id((detail.get("Target") or {}).get("Input") or "")
        if self._decide(FaultKind.DUPLICATE_DELIVERY, operation_id) is None:
            return False
        self._injected(FaultKind.DUPLICATE_DELIVERY, operation_id)
        return True

    def deliver_again(self, invocation: _Invocation) -> str:
        """A second receipt of the record being processed, to the same function, now (nested)."""
        record = _current_record(invocation)
        if record is None:
            return "no record"
        second = copy.deepcopy(record)
        attributes = second.setdefault("attributes", {})
        attributes["ApproximateReceiveCount"] = str(int(attributes.get("ApproximateReceiveCount", "1")) + 1)
        second["receiptHandle"] = f"second-receipt-{self.rng.getrandbits(64):016x}"
        try:
            response = self._invoke(invocation.function_id, {"Records": [second]})
        except Exception as exc:  # the second receipt crashed or timed out: its batch would come back
            return exc.__class__.__name__
        failures = (response or {}).get("batchItemFailures") or []
        return "handed back" if failures else "acknowledged"

    # -- the extension's hooks: the record boundary, the effect moment, the terminal write ------------------------

    def before_record(self, pipeline: Any, body: str, delivery: Any) -> None:
        invocation = self._top()
        if invocation is None or invocation.role != "worker":
            return
        index = invocation.records_seen
        invocation.records_seen += 1
        invocation.body = body
        invocation.operation_id = _operation_id(body)
        invocation.effect_applied = False
        invocation.effect_ran = False
        if index == 0:
            return
        rule = self._decide(FaultKind.LAMBDA_TIMEOUT, invocation.operation_id)
        if rule is None:
            return
        self._injected(FaultKind.LAMBDA_TIMEOUT, invocation.operation_id)
        remaining = delivery.remaining_ms()
        if rule.options.get("hard"):
            self.cloud.advance(remaining / 1000 + 1)  # past the deadline: the runtime reports a timeout
        else:
            left = max(pipeline.time_margin_ms - 1_000, 0)  # under the margin: the worker hands the rest back
            self.cloud.advance(max(remaining - left, 0) / 1000)

    def before_effect(self, attempt: Any) -> None:
        invocation = self._top()
        operation_id = attempt.ctx.operation_id
        if invocation is None or invocation.depth > 0:
            return
        while self._at_effect.get(operation_id):
            with outside_functions():  # another party's action (a producer's write), not the function's own call
                self._at_effect[operation_id].pop(0)()
        if self._decide(FaultKind.CONCURRENT_DELIVERY, operation_id):
            self._injected(FaultKind.CONCURRENT_DELIVERY, operation_id)
            self.operations[operation_id].second_receipts.append(self.deliver_again(invocation))

    def after_effect(self, attempt: Any) -> None:
        invocation = self._top()
        if invocation is not None:
            invocation.effect_ran = True

    def before_terminal_write(self, lease: Any, decision: Any, ctx: Any) -> None:
        """After a successful effect, before its claim: where a crash costs a duplicate and a lease can run out."""
        invocation = self._top()
        operation_id = ctx.operation_id
        if invocation is None or not invocation.effect_ran:
            return
        invocation.effect_ran = False
        if invocation.depth == 0 and self._decide(FaultKind.LEASE_EXPIRY, operation_id):
            # The holder is still working (about to claim) when its lease runs out: another receipt takes over.
            self._injected(FaultKind.LEASE_EXPIRY, operation_id)
            self.cloud.advance(lease.until - self.cloud.clock.now() + 1)
            self.operations[operation_id].second_receipts.append(self.deliver_again(invocation))
        if self._decide(FaultKind.CRASH_AFTER_EFFECT, operation_id):
            self._injected(FaultKind.CRASH_AFTER_EFFECT, operation_id)
            invocation.dead = True
            raise SimulatedCrash(f"injected crash after the effect of {operation_id}")

    # -- API calls ----------------------------------------------------------------------------------------------

    def _on_api_call(self, client: BaseClient, operation: str, params: dict[str, Any]) -> Any:
        if self._racing:  # the race's own moves: another worker's, an operator's
            return _ORIGINAL_API_CALL(client, operation, params)
        if operation == "CreateSchedule" and params.get("GroupName") in self.missing_groups:
            message = f"Schedule group {params['GroupName']} does not exist."
            missing = client.exceptions.from_code("ResourceNotFoundException")  # the modeled class, as boto3 raises
            raise missing({"Error": {"Code": "ResourceNotFoundException", "Message": message}}, operation)
        invocation = self._top()
        if invocation is None:
            return _ORIGINAL_API_CALL(client, operation, params)
        if invocation.dead:
            raise SimulatedCrash("the process is gone")
        service = client.meta.service_model.service_name
        operation_id = invocation.operation_id
        if service == "ssm":
            self._maybe_ssm_outage(client, operation_id)
        if service == "dynamodb" and operation == "UpdateItem" and invocation.role == "worker":
            self._maybe_race_limiter_key(invocation, params)
        if service == "dynamodb" and invocation.role in ("worker", "relay"):
            rule = self._decide(FaultKind.DYNAMODB_THROTTLE, operation_id)
            if rule is not None:
                self._injected(FaultKind.DYNAMODB_THROTTLE, operation_id)
                raise ClientError({"Error": {"Code": _THROTTLE, "Message": "injected: throughput exceeded"}}, operation)
        if service == "sqs" and operation == "SendMessageBatch" and invocation.role == "relay":
            return self._relay_send(client, operation, params)
        if service == "dynamodb" and invocation.role == "worker" and self._makes_a_cap_key(operation, params):
            self._maybe_race_first_use(invocation)
        response = _ORIGINAL_API_CALL(client, operation, params)
        if operation_id is not None and invocation.role == "worker" and self._step_recorded(service, operation, params):
            self._maybe_crash_between_steps(invocation, operation_id, params["Item"]["sk"]["S"].split("#", 1)[1])
        if operation_id is not None and self._is_effect(service, operation, params):
            invocation.effect_applied = True
            self.effects_seen.append(EffectSeen(operation_id, service, self.cloud.clock.now()))
            if self._decide(FaultKind.LOST_RESPONSE, operation_id):
                self._injected(FaultKind.LOST_RESPONSE, operation_id)
                raise ReadTimeoutError(endpoint_url=client.meta.endpoint_url)
        return response

    def _step_recorded(self, service: str, operation: str, params: dict[str, Any]) -> bool:
        """A step's marker written done (converge.store.markers: `step#<name>`, status `done`)."""
        if service != "dynamodb" or operation != "PutItem":
            return False
        if params.get("TableName") != self.cloud.outputs.get("MarkersTableName"):
            return False
        item = params.get("Item", {})
        return item.get("sk", {}).get("S", "").startswith("step#") and item.get("status", {}).get("S") == "done"

    def _makes_a_cap_key(self, operation: str, params: dict[str, Any]) -> bool:
        """A worker's write that makes a concurrency cap's key item holding its slot (converge.store.concurrency: the
        key's first use, `running#<cap>`, only while the item has no holders)."""
        if operation != "UpdateItem" or params.get("TableName") != self.cloud.outputs.get("MarkersTableName"):
            return False
        making = params.get("ConditionExpression") == "attribute_not_exists(#h)"
        return making and params.get("Key", {}).get("pk", {}).get("S", "").startswith("running#")

    def _maybe_race_first_use(self, invocation: _Invocation) -> None:
        """The next record of the batch delivered now to a second instance of the function (nested), as SQS may hand
        a message to two pollers at once: another job of the key takes its first slot just before this one would.
        The batch's own turn for that record comes later, a second delivery of it."""
        records = (invocation.event or {}).get("Records", [])
        current = _current_record(invocation)
        later = records[records.index(current) + 1 :] if current in records else []
        other = next((record for record in later if record.get("body") != invocation.body), None)
        if invocation.depth > 0 or other is None:
            return
        if self._decide(FaultKind.FIRST_USE_RACED, invocation.operation_id) is None:
            return
        self._injected(FaultKind.FIRST_USE_RACED, invocation.operation_id)
        raced = copy.deepcopy(other)
        raced["receiptHandle"] = f"raced-receipt-{self.rng.getrandbits(64):016x}"
        try:
            self._invoke(invocation.function_id, {"Records": [raced]})
        except Exception:  # the second instance crashed or timed out: its batch would come back
            return

    def _maybe_crash_between_steps(self, invocation: _Invocation, operation_id: str, step: str) -> None:
        for rule in self.rules:
            if rule.kind is not FaultKind.CRASH_BETWEEN_STEPS or not rule.applies(operation_id):
                continue
            if rule.options.get("step") not in (None, step) or self.rng.random() >= rule.probability:
                continue
            rule.used += 1
            invocation.effect_applied = False  # the step's marker is its claim: no duplicate can follow
            self._injected(FaultKind.CRASH_BETWEEN_STEPS, operation_id)
            invocation.dead = True
            raise SimulatedCrash(f"injected crash after step {step!r} of {operation_id}, before the next")

    def _maybe_race_limiter_key(self, invocation: _Invocation, params: dict[str, Any]) -> None:
        """Move a rate limiter's key against the worker's write to it, when a rule says so: a write that expects the
        key busy (its condition: free later than now) meets it released by an operator; any other (a key at rest, a
        give-back, a push back) meets it reserved by another worker, one unit of its pace from now."""
        pk = str(params.get("Key", {}).get("pk", {}).get("S", ""))
        if not pk.startswith(LIMIT_PK):
            return
        rule = self._decide(FaultKind.LIMITER_KEY_RACED, invocation.operation_id)
        if rule is None:
            return
        limiter = self.cloud.registry.limiters.get(pk.removeprefix(LIMIT_PK))
        key = str(params["Key"]["sk"]["S"]).split("#", 1)[1]
        if limiter is None:
            return
        other = LimiterTable(str(params["TableName"]), self.cloud.client("dynamodb"))
        expects_busy = " > " in str(params.get("ConditionExpression", ""))
        self._racing = True
        try:
            with outside_functions():  # another worker's write, an operator's: not the function's own call
                if expects_busy:
                    other.release(limiter.name, key)
                    self.limiter_keys_released += 1
                else:
                    other.reserve(limiter.name, key, self.cloud.clock.now(), limiter.cost())
        finally:
            self._racing = False
        invocation.raced = True
        self._injected(FaultKind.LIMITER_KEY_RACED, invocation.operation_id)

    def _maybe_ssm_outage(self, client: BaseClient, operation_id: str | None) -> None:
        now = self.cloud.clock.now()
        if now >= self.ssm_outage_until:
            rule = self._decide(FaultKind.SSM_UNAVAILABLE, operation_id)
            if rule is None:
                return
            self.ssm_outage_until = now + float(rule.options.get("seconds", 60))
            self._injected(FaultKind.SSM_UNAVAILABLE, operation_id)  # one outage, however many calls it fails
        self.ssm_calls_failed += 1
        raise EndpointConnectionError(endpoint_url=client.meta.endpoint_url)

    def _relay_send(self, client: BaseClient, operation: str, params: dict[str, Any]) -> Any:
        entries = params["Entries"]
        failing = {
            entry["Id"]
            for entry in entries
            if self._decide(FaultKind.SEND_BATCH_PARTIAL, _entry_operation(entry)) is not None
        }
        for entry in entries:
            if entry["Id"] in failing:
                self._injected(FaultKind.SEND_BATCH_PARTIAL, _entry_operation(entry))
        kept = [entry for entry in entries if entry["Id"] not in failing]
        response: dict[str, Any] = {"Successful": [], "Failed": []}
        if kept:
            response = dict(_ORIGINAL_API_CALL(client, operation, {**params, "Entries": kept}))
        response["Failed"] = [
            *response.get("Failed", []),
            *({"Id": id_, "SenderFault": False, "Code": "InternalError", "Message": "injected"} for id_ in failing),
        ]
        sent = {entry["Id"] for entry in response.get("Successful", [])}
        replayed = [entry for entry in kept if entry["Id"] in sent and self._replay(entry)]
        if replayed:
            # The relay sent, then died before the stream checkpoint: the stream delivers the records again.
            _ORIGINAL_API_CALL(client, operation, {**params, "Entries": replayed})
        return response

    def _replay(self, entry: dict[str, Any]) -> bool:
        operation_id = _entry_operation(entry)
        if self._decide(FaultKind.DISPATCH_REPLAY, operation_id) is None:
            return False
        self._injected(FaultKind.DISPATCH_REPLAY, operation_id)
        return True

    def replay_dispatch(self, operation_id: str, item: dict[str, Any] | None = None) -> None:
        """Send an operation's request to its queue again, as a replayed stream record would (counted).

        `item`: the request as its INSERT record carried it (default: the item stored now, which a producer's
        later rewrite may have changed; a replayed record still holds what was first written)."""
        item = (
            item
            or self.cloud.client("dynamodb").get_item(
                TableName=self.cloud.outputs["JobsTableName"], Key={"operation_id": {"S": operation_id}}
            )["Item"]
        )
        request = request_from_image(item)
        binding = self.cloud.registry.get(request.job_type)
        assert binding.queue is not None
        queue_url = self.cloud.outputs[f"{binding.queue.value.capitalize()}QueueUrl"]
        self.cloud.client("sqs").send_message(
            QueueUrl=queue_url,
            MessageBody=request.envelope().to_body(),
            MessageAttributes={
                "job_type": {"DataType": "String", "StringValue": request.job_type},
                "operation_id": {"DataType": "String", "StringValue": request.operation_id},
            },
        )
        self._injected(FaultKind.DISPATCH_REPLAY, operation_id)

    def _is_effect(self, service: str, operation: str, params: dict[str, Any]) -> bool:
        """A call that applies a job's externally visible effect (what the effects ledger counts)."""
        if service in ("sesv2", "ses") and operation in ("SendEmail", "SendRawEmail"):
            return True
        sources = self.cloud.hooks.effects
        log = getattr(self.cloud, "effect_log", None)
        if sources == EffectSources() and log is not None:  # counted by resource: every write to the team's own
            return bool(log.is_effect(service, operation, params))
        if service == "s3" and operation == "PutObject" and sources.bucket_output and sources.object_prefixes:
            return params.get("Bucket") == self.cloud.outputs.get(sources.bucket_output) and str(
                params.get("Key", "")
            ).startswith(sources.object_prefixes)
        if service == "dynamodb" and operation == "TransactWriteItems" and sources.ledger_output:
            ledger = self.cloud.outputs.get(sources.ledger_output)
            return any(item.get("Put", {}).get("TableName") == ledger for item in params.get("TransactItems", []))
        return False


def _role(code_dir: str) -> str:
    return {"worker": "worker", "outbox_relay": "relay", "batch_counter": "counter"}.get(code_dir, "other")


def _operation_id(body: str) -> str | None:
    try:
        value = json.loads(body).get("operation_id")
    except (ValueError, AttributeError, RecursionError):  # RecursionError: a body nested past the parser's depth
        return None
    return value if isinstance(value, str) else None


def _stream_operation(record: dict[str, Any]) -> str | None:
    image = (record.get("dynamodb") or {}).get("NewImage") or (record.get("dynamodb") or {}).get("Keys") or {}
    value = image.get("operation_id") if isinstance(image, dict) else None
    return value.get("S") if isinstance(value, dict) and isinstance(value.get("S"), str) else None


def _entry_operation(entry: dict[str, Any]) -> str | None:
    attribute = entry.get("MessageAttributes", {}).get("operation_id", {})
    return attribute.get("StringValue")


def _current_record(invocation: _Invocation) -> dict[str, Any] | None:
    for record in (invocation.event or {}).get("Records", []):
        if record.get("body") == invocation.body:
            return record
    return None
