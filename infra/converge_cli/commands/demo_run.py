"""`converge demo`: the whole pipeline on the in-process local cloud, and a report that checks itself.

It seeds the catalogue's demo data and runs its scenario (both from the catalogue's local hooks; see
localcloud.scenario): every job type, no-ops, duplicate enqueues, a replayed dispatch, an identity reused with
different content, hostile raw items, a fail-closed job that pauses and resumes when its toggle is turned on, a
recurring job, a job of steps whose worker dies between two of them, a continuation, a batch that fans out and its
callback, a burst of debounced requests for one key that runs once. A catalogue without a scenario gets each job a
producer starts, its example payload enqueued twice and its dispatch replayed once it ran (the jobs only converge
starts are named, not run). It drains, and reports each job type's operations and the external effects counted from
the emulated services: by resource of the template (localcloud.effect_log), or in the reference shape for a
catalogue whose hooks name where its effects land. It exits 0 only when every invariant holds.
"""

from __future__ import annotations

import json
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console

from converge.flow.registry import Policy
from converge.local_hooks import Planned, ProducerCall, Scenario
from converge.model.envelope import Envelope
from converge.model.errors import IdentityConflict, InvalidMessage
from converge.model.links import ON_SUCCESS, continuation_id
from converge.model.records import Operation
from converge.model.request import JobRequest
from converge.model.states import OperationState
from converge.store.codecs import request_item
from converge_cli.commands import demo_approval, demo_batch, demo_debounce, demo_time
from converge_cli.commands.demo_effects import expected_effects, made_by
from converge_cli.support.output import Column, records, say, styled
from localcloud.bound import runtime_for
from localcloud.project import current
from localcloud.scenario import from_registry

EMAIL_POLICIES = {Policy.EFFECT_THEN_CLAIM}
EXACTLY_ONCE_POLICIES = {Policy.CLAIM_THEN_EFFECT, Policy.KEYED_EFFECT}


@dataclass
class Check:
    name: str
    ok: bool
    detail: str = ""


@dataclass
class DemoReport:
    job_types: dict[str, Counter[str]] = field(default_factory=dict)
    effects: dict[str, int] = field(default_factory=dict)
    checks: list[Check] = field(default_factory=list)
    events: Counter[str] = field(default_factory=Counter)
    seconds: float = 0.0
    effect_names: dict[str, str] = field(default_factory=dict)
    """What each effects row counts, in words ("OrdersTable: DynamoDB items")."""
    not_enqueued: dict[str, str] = field(default_factory=dict)
    """Jobs only converge starts (a continuation, a batch's callback), and why the demo enqueued none of them."""
    approvals: list[str] = field(default_factory=list)
    """What became of the jobs that waited for a person's decision, a line each (demo_approval)."""
    burst: dict[str, Any] = field(default_factory=dict)
    """A burst of debounced requests for one key: each request, how it ended, the run (demo_debounce)."""

    @property
    def invariants_hold(self) -> bool:
        return all(check.ok for check in self.checks)

    def to_json(self) -> dict[str, Any]:
        return {
            "invariants_hold": self.invariants_hold,
            "job_types": {job_type: dict(states) for job_type, states in sorted(self.job_types.items())},
            "effects": self.effects,
            "events": dict(self.events),
            "checks": [{"name": c.name, "ok": c.ok, "detail": c.detail} for c in self.checks],
            "not_enqueued": dict(self.not_enqueued),
            "approvals": list(self.approvals),
            "burst": dict(self.burst),
            "seconds": round(self.seconds, 2),
        }


class Demo:
    def __init__(
        self, cloud: Any, step: Callable[[str], None], scenario: Scenario | None = None, cli: Any = None
    ) -> None:
        self.cloud = cloud
        self.step = step
        self.cli = cli
        """The converge command (`converge signal` is run through it, as an operator runs it)."""
        self.converge = runtime_for(cloud)
        self.report = DemoReport()
        self.scenario = scenario or cloud.hooks.demo_scenario() or from_registry(self.converge.registry)
        self.planned: list[Planned] = self.scenario.planned
        self.refused: set[str] = set()
        """Planned operations whose payload the job refused (a check says so, naming the job)."""
        self.replayed_effects: dict[str, tuple[dict[str, int], dict[str, int]]] = {}
        """Each replayed operation's effects before its dispatch was replayed and after (`replay_all`)."""

    def run(self) -> DemoReport:
        started = time.perf_counter()
        from localcloud import effects

        effects.instrument(self.cloud)
        self._enqueue_mix()
        self._call_producers()
        demo_batch.admit(self)
        with self._crash_between_steps():
            self._drain("dispatching and running the jobs")
        self._rewrite_as_a_producer()
        self._replay_a_dispatch()
        self._replay_every_dispatch(effects)
        self._resume_the_paused_job()
        self._run_the_sweep()
        timed_emails = demo_time.run(self, Check)
        if timed_emails:
            self.report.events["timed_emails"] = timed_emails
        approval_emails = demo_approval.run(self, Check)
        if approval_emails:
            self.report.events["approval_emails"] = approval_emails
        burst_emails = demo_debounce.run(self, Check)
        if burst_emails:
            self.report.events["burst_emails"] = burst_emails
        self.step("counting effects in the emulated services")
        counted = effects.count(self.cloud)
        self.report.effects = counted.totals()
        self.report.effect_names = effect_names(self.cloud, counted)
        stored = self.operations()
        self._tally(stored)
        self._check(counted, {operation.operation_id: operation for operation in stored})
        self.report.seconds = time.perf_counter() - started
        return self.report

    # -- the scenario ----------------------------------------------------------------------------------------

    def _enqueue_mix(self) -> None:
        scenario = self.scenario
        for job_type, why in scenario.skipped:
            self.step(f"{job_type} is not enqueued on its own: {why}")
            self.report.not_enqueued[job_type] = why
        self.step("enqueueing every job type")
        for planned in self.planned:
            try:
                self.converge.enqueue(
                    planned.job_type, planned.operation_id, planned.payload, f"corr-{planned.operation_id}"
                )
            except InvalidMessage as refused:
                self.refused.add(planned.operation_id)
                self.report.checks.append(
                    Check(f"{planned.job_type}: its example payload is enqueued", False, f"refused: {refused}")
                )
                continue
            self.report.events["enqueued"] += 1
        self.step("enqueueing duplicates (same id, same payload)")
        for planned in self.planned[: scenario.duplicates]:
            if planned.operation_id in self.refused:
                continue
            again = self.converge.enqueue(planned.job_type, planned.operation_id, planned.payload)
            self.report.events["duplicate_enqueues_absorbed"] += 0 if again.created else 1
        if scenario.identity_reuse:
            self.step("reusing an identity with different content")
            operation_id, other = scenario.identity_reuse
            reused = next(p for p in self.planned if p.operation_id == operation_id)
            try:
                self.converge.enqueue(reused.job_type, reused.operation_id, other)
            except IdentityConflict:
                self.report.events["identity_conflicts_refused"] += 1
        dynamodb = self.cloud.client("dynamodb")
        if scenario.hostile_raw_items:
            self.step("writing hostile raw items with a plain PutItem")
        for operation_id, attributes, _ in scenario.hostile_raw_items:
            item = {"operation_id": {"S": operation_id}, **attributes}
            dynamodb.put_item(TableName=self.cloud.outputs["JobsTableName"], Item=item)
            self.report.events["raw_items_written"] += 1
        if scenario.owned_raw_item:
            operation_id, job_type, payload, attributes = scenario.owned_raw_item
            item = {**request_item(JobRequest(operation_id, job_type, payload)), **attributes}
            dynamodb.put_item(TableName=self.cloud.outputs["JobsTableName"], Item=item)
            self.report.events["raw_items_written"] += 1

    def _call_producers(self) -> None:
        """The template's own functions that write a business row and enqueue its job, each called twice."""
        for call in self.scenario.producers:
            self.step(f"calling {call.function} twice (its caller retries): {call.note}")
            for _ in range(2):
                self.cloud.invoke(call.function, call.event)
                self.report.events["producer_calls"] += 1

    @contextmanager
    def _crash_between_steps(self) -> Iterator[None]:
        """The scenario's job of steps dies just after one step's marker, once: its retry runs none of them again."""
        if not self.scenario.crash_between_steps:
            yield
            return
        from localcloud.faults import FaultInjector, FaultKind

        operation_id, step = self.scenario.crash_between_steps
        self.step(f"{operation_id}: its worker will die just after the {step!r} step, before the next")
        faults = FaultInjector(self.cloud)
        faults.plan(FaultKind.CRASH_BETWEEN_STEPS, operation_id, times=1, step=step)
        with faults.installed():
            yield
        self.report.events["crashes_between_steps"] += faults.counts[FaultKind.CRASH_BETWEEN_STEPS.value]

    def _planned(self, operation_id: str) -> Planned:
        return next(p for p in self.planned if p.operation_id == operation_id)

    def _rewrite_as_a_producer(self) -> None:
        """A producer retries its plain PutItem after the job ran, and another reuses an id for other content."""
        rewrites = []
        if self.scenario.producer_retry:
            retried = self._planned(self.scenario.producer_retry)
            rewrites.append((retried.operation_id, retried.job_type, retried.payload))
        if self.scenario.producer_conflict:
            operation_id, other = self.scenario.producer_conflict
            rewrites.append((operation_id, self._planned(operation_id).job_type, other))
        if not rewrites:
            return
        self.step("a producer writes its item again (same content), another writes other content under a taken id")
        dynamodb, table = self.cloud.client("dynamodb"), self.cloud.outputs["JobsTableName"]
        for operation_id, job_type, payload in rewrites:
            item = request_item(JobRequest(operation_id, job_type, payload))
            dynamodb.put_item(TableName=table, Item=item)
            self.report.events["producer_rewrites"] += 1
        self._drain("relaying the producer's rewrites")

    def _replay_a_dispatch(self) -> None:
        """The relay sent, then crashed before its checkpoint: the stream delivers the record again."""
        if not self.scenario.replayed:
            return
        self.step("replaying a dispatch after it already ran")
        operation_id, queue_output = self.scenario.replayed
        operation = self.converge.operations.require(operation_id)
        envelope = Envelope(
            operation_id=operation.operation_id,
            job_type=operation.job_type,
            payload=operation.payload,
            correlation_id=operation.correlation_id,
        )
        self.cloud.client("sqs").send_message(QueueUrl=self.cloud.outputs[queue_output], MessageBody=envelope.to_body())
        self.report.events["dispatches_replayed"] += 1
        self._drain("running the replayed message")

    def _replay_every_dispatch(self, effects: Any) -> None:
        """Each planned operation that ran gets its dispatch again (the relay's at-least-once): no effect again."""
        if not self.scenario.replay_all:
            return
        before = effects.count(self.cloud).resources
        replayed = []
        for planned in self.planned:
            operation = self.converge.operations.get(planned.operation_id)
            if operation is None or operation.state is not OperationState.SUCCEEDED:
                continue
            binding = self.converge.registry.get(operation.job_type)
            queue_url = self.converge.settings.queues.url(binding.queue) if binding.queue else None
            if not queue_url:
                continue
            envelope = Envelope(
                operation_id=operation.operation_id,
                job_type=operation.job_type,
                payload=operation.payload,
                correlation_id=operation.correlation_id,
            )
            self.cloud.client("sqs").send_message(QueueUrl=queue_url, MessageBody=envelope.to_body())
            replayed.append(planned.operation_id)
        if not replayed:
            return
        self.step(f"replaying the dispatch of {len(replayed)} operation(s) that already ran")
        self.report.events["dispatches_replayed"] += len(replayed)
        self._drain("running the replayed messages")
        after = effects.count(self.cloud).resources
        for operation_id in replayed:
            self.replayed_effects[operation_id] = (
                _made_and_written(before, operation_id),
                _made_and_written(after, operation_id),
            )

    def _resume_the_paused_job(self) -> None:
        if not self.scenario.paused:
            return
        paused = self.converge.operations.require(self.scenario.paused).state is OperationState.PAUSED
        self.report.events["paused_before_toggle"] += int(paused)
        binding = self.converge.registry.get(self._planned(self.scenario.paused).job_type)
        self.step(f"turning the {binding.toggle_key} toggle on (ssm put-parameter --overwrite)")
        self.cloud.client("ssm").put_parameter(
            Name=self.converge.settings.toggle_parameter(binding.toggle_key),
            Value="on",
            Type="String",
            Overwrite=True,
        )
        self._drain("resuming paused work")

    def _run_the_sweep(self) -> None:
        recurring = self.scenario.recurring
        if recurring is None:
            return
        self.step("ticking the recurring sweep while it is off, then on")
        before = self._sweep_results()
        self.cloud.advance(15 * 60)
        self.cloud.tick_schedules()
        self.cloud.client("ssm").put_parameter(
            Name=self.converge.settings.toggle_parameter(self.converge.registry.get(recurring.job_type).toggle_key),
            Value="on",
            Type="String",
            Overwrite=True,
        )
        self.cloud.advance(15 * 60)
        self.cloud.tick_schedules()
        self._drain("after the sweep")
        results = self._sweep_results()[len(before) :]
        self.report.events["sweep_ticks_skipped"] = sum(1 for r in results if r.get("skipped"))
        self.report.events[recurring.event] = sum(int(r.get(recurring.result_key, 0)) for r in results)

    def _sweep_results(self) -> list[dict[str, Any]]:
        function = self.scenario.recurring.function if self.scenario.recurring else ""
        return [
            invocation.result
            for invocation in self.cloud.invocations
            if invocation.logical_id == function and isinstance(invocation.result, dict)
        ]

    def _drain(self, what: str) -> None:
        self.step(what)
        stats = self.cloud.drain()
        self.report.events["lambda_invocations"] += sum(stats.invocations.values())
        if not stats.quiescent:
            self.report.checks.append(Check("local cloud drained to quiescence", False, what))

    # -- the report ------------------------------------------------------------------------------------------

    def operations(self) -> list[Operation]:
        from localcloud.invariants import operations_in

        return [operation for operation, _ in operations_in(self.cloud).values()]

    def _tally(self, stored: list[Operation]) -> None:
        by_type: dict[str, Counter[str]] = defaultdict(Counter)
        for operation in stored:
            states = by_type[operation.job_type]
            states["accepted"] += 1
            states[operation.state.value.lower()] += 1
            was_paused = any(entry.state == OperationState.PAUSED for entry in operation.history)
            if was_paused and operation.state is not OperationState.PAUSED:
                states["resumed"] += 1
        self.report.job_types = dict(by_type)

    def _check(self, counted: Any, stored: dict[str, Operation]) -> None:
        checks = self.report.checks
        registry = self.converge.registry
        scenario = self.scenario
        for planned in self.planned:
            if planned.operation_id in self.refused:
                continue
            operation = stored.get(planned.operation_id)
            state = operation.state.value if operation else "missing"
            why = (
                f": {operation.last_error}"
                if operation and state != planned.expect.value and operation.last_error
                else ""
            )
            checks.append(
                Check(f"{planned.operation_id} ends {planned.expect.value}", state == planned.expect.value, state + why)
            )
            if operation is None:
                continue
            binding = registry.get(planned.job_type)
            made = made_by(counted, planned.operation_id)
            if counted.by_resource:
                checks += self._effects_by_resource(planned, operation, made)
            elif counted.counts_any and binding.policy in EMAIL_POLICIES | EXACTLY_ONCE_POLICIES:
                # No crash is injected in the demo's window (the one between steps is after a marker), so even
                # e-mail (effect_then_claim) must send exactly once.
                wanted = expected_effects(planned.expect, binding.policy, planned.effects)
                checks.append(
                    Check(
                        f"{planned.operation_id}: {sum(wanted.values())} external effect(s)", made == wanted, str(made)
                    )
                )
            if binding.on_success is not None:
                checks.append(self._continuation(counted, stored, operation, binding.on_success.job_type))
        for operation_id, _, reason in scenario.hostile_raw_items:
            operation = stored.get(operation_id)
            ok = bool(
                operation and operation.state is OperationState.REJECTED and reason in (operation.last_error or "")
            )
            detail = f"{operation.state.value}: {operation.last_error}" if operation else "missing"
            checks.append(Check(f"{operation_id} REJECTED with its reason", ok, detail))
        checks += [self._produced(call, stored) for call in scenario.producers]
        if scenario.crash_between_steps:
            checks.append(self._crashed_between_steps(counted, stored))
        if scenario.paused:
            resumed_op = stored.get(scenario.paused)
            states = [e.state for e in resumed_op.history] if resumed_op else []
            resumed = bool(
                resumed_op
                and resumed_op.state is OperationState.SUCCEEDED
                and "PAUSED" in states
                and "ACCEPTED" in states[states.index("PAUSED") :]
            )
            checks.append(Check("fail-closed job paused, then resumed by the toggle alone", resumed))
        if scenario.producer_retry:
            retried = stored.get(scenario.producer_retry)
            checks.append(
                Check(
                    "a producer's same write again is a no-op",
                    bool(retried and retried.state is OperationState.SUCCEEDED and not retried.conflicts),
                    retried.state.value if retried else "missing",
                )
            )
        if scenario.producer_conflict:
            conflict_id = scenario.producer_conflict[0]
            conflicted = stored.get(conflict_id)
            listed = {
                row["operation_id"]
                for row in self.converge.operations.listings.list_attention("CONFLICT", limit=100).operations
            }
            checks.append(
                Check(
                    "other content under a taken id is refused and listed under CONFLICT",
                    bool(conflicted and conflicted.conflicts and conflict_id in listed),
                    f"{len(conflicted.conflicts) if conflicted else 0} conflict(s) recorded",
                )
            )
        if scenario.owned_raw_item:
            owned = stored.get(scenario.owned_raw_item[0])
            checks.append(
                Check(
                    "attributes converge owns, written by a producer, are ignored",
                    bool(owned and owned.state is OperationState.SUCCEEDED and owned.attempts == 1),
                    f"{owned.state.value}, {owned.attempts} attempt(s)" if owned else "missing",
                )
            )
        events = self.report.events
        batch_emails = demo_batch.check(self, counted, stored, Check)
        if scenario.batch and not counted.by_resource:
            events["batch_emails"] = batch_emails
        duplicates = min(scenario.duplicates, len(self.planned))
        checks.append(Check("duplicate enqueues absorbed", events["duplicate_enqueues_absorbed"] == duplicates))
        if scenario.identity_reuse:
            checks.append(
                Check("identity reused with other content refused", events["identity_conflicts_refused"] == 1)
            )
        if scenario.recurring:
            done = events[scenario.recurring.event]
            checks.append(
                Check(
                    "disabled sweep tick skipped, enabled tick ran",
                    events["sweep_ticks_skipped"] >= 1 and done >= 1,
                    f"{scenario.recurring.result_key} {done}",
                )
            )
        lost = [
            op.operation_id
            for op in stored.values()
            if op.state in (OperationState.ACCEPTED, OperationState.IN_PROGRESS)
        ]
        checks.append(Check("no operation left in flight", not lost, ", ".join(lost)))
        if scenario.replayed and counted.counts_any and not counted.by_resource:
            emails = self.report.effects.get("ses", 0)
            succeeded_emails = (
                sum(
                    expected_effects(p.expect, registry.get(p.job_type).policy, p.effects).get("ses", 0)
                    for p in self.planned
                )
                + self.report.events.get("continuation_emails", 0)
                + self.report.events.get("timed_emails", 0)
                + self.report.events.get("approval_emails", 0)
                + self.report.events.get("burst_emails", 0)
                + self.report.events.get("batch_emails", 0)
                + sum(self._producer_emails(call) for call in scenario.producers)
            )
            checks.append(
                Check("the replayed dispatch sent nothing twice", emails == succeeded_emails, f"{emails} e-mails")
            )

    def _effects_by_resource(self, planned: Planned, operation: Operation, made: dict[str, int]) -> list[Check]:
        """The effects of one planned operation, by resource: those its scenario names (none unless SUCCEEDED), and
        none added by its replayed dispatch."""
        found: list[Check] = []
        if operation.state is not planned.expect:  # its state's check says what went wrong
            return found
        wanted = dict(planned.effects or {}) if operation.state is OperationState.SUCCEEDED else {}
        if planned.effects is not None or operation.state is not OperationState.SUCCEEDED:
            named = ", ".join(f"{n} {r}" for r, n in sorted(wanted.items())) or "no effect"
            found.append(Check(f"{planned.operation_id}: {named}", made == wanted, _shown(made)))
        replayed = self.replayed_effects.get(planned.operation_id)
        if replayed is not None:
            before, after = replayed
            found.append(
                Check(
                    f"{planned.operation_id}: its replayed dispatch made no effect again",
                    before == after,
                    f"before {_shown(before)}; after {_shown(after)}",
                )
            )
        return found

    def _producer_emails(self, call: ProducerCall) -> int:
        """The e-mails a producer's job meant to send once it ran as planned: its own, and its continuation's."""
        binding = self.converge.registry.get(self.converge.operations.require(call.operation_id).job_type)
        sent = expected_effects(call.expect, binding.policy, None).get("ses", 0)
        if binding.on_success is not None and call.expect is OperationState.SUCCEEDED:
            follows = self.converge.registry.get(binding.on_success.job_type).policy
            sent += expected_effects(OperationState.SUCCEEDED, follows, None).get("ses", 0)
        return sent

    def _produced(self, call: ProducerCall, stored: dict[str, Operation]) -> Check:
        """A producer's two calls: its business row written, its job written once (one request, no conflict), run."""
        table, key = call.row
        row = self.cloud.client("dynamodb").get_item(TableName=self.cloud.outputs[table], Key=key).get("Item")
        operation = stored.get(call.operation_id)
        writes = [
            e for e in self.cloud.effect_log.effects if e.function_id == call.function and e.key == _key_text(key)
        ]
        ok = bool(row and operation and operation.state is call.expect and not operation.conflicts and len(writes) == 1)
        detail = f"row {'written' if row else 'missing'} ({len(writes)} write(s)); " + (
            f"{call.operation_id} {operation.state.value}" if operation else f"{call.operation_id} missing"
        )
        name = f"{call.function}: its row and its job written together once, the job {call.expect.value}"
        return Check(name, ok, detail)

    def _continuation(self, counted: Any, stored: dict[str, Operation], parent: Operation, job_type: str) -> Check:
        """A parent that SUCCEEDED is followed once by its continuation, which ran; any other outcome by none."""
        child_id = continuation_id(parent.operation_id, ON_SUCCESS)
        child = stored.get(child_id)
        if parent.state is not OperationState.SUCCEEDED:
            return Check(f"{parent.operation_id} {parent.state.value}: no continuation", child is None)
        policy = self.converge.registry.get(job_type).policy
        made = made_by(counted, child_id)
        ok = bool(
            child
            and child.job_type == job_type
            and child.parent_id == parent.operation_id
            and child.state is OperationState.SUCCEEDED
            and (not counted.counts_any or counted.by_resource or made == expected_effects(child.state, policy, None))
        )
        if child is not None and child.state is OperationState.SUCCEEDED:
            self.report.events["continuations_run"] += 1
            if not counted.by_resource:
                self.report.events["continuation_emails"] += made.get("ses", 0)
        detail = f"{child.state.value}, {_shown(made)}" if child else "missing"
        return Check(f"{parent.operation_id} SUCCEEDED: its continuation {child_id} ran once", ok, detail)

    def _crashed_between_steps(self, counted: Any, stored: dict[str, Operation]) -> Check:
        """The crash happened once, and the retry ran none of the steps recorded: each effect made once."""
        assert self.scenario.crash_between_steps is not None
        operation_id, step = self.scenario.crash_between_steps
        operation = stored.get(operation_id)
        crashed = self.report.events["crashes_between_steps"]
        if counted.by_resource:  # every write once: as many writes as distinct units, as the scenario names them
            planned = self._planned(operation_id)
            writes = _writes(counted.resources, operation_id)
            made = counted.for_operation(operation_id)
            once = writes == made and (planned.effects is None or made == planned.effects)
            detail = f"{crashed} crash(es), writes {_shown(writes)}"
        else:
            object_writes = counted.object_writes.get(operation_id, 0)
            emails = counted.emails.get(operation_id, 0)
            once = object_writes == 1 and emails == 1
            detail = f"{crashed} crash(es), {object_writes} object write(s), {emails} e-mail(s)"
        ok = bool(
            operation
            and crashed == 1
            and operation.state is OperationState.SUCCEEDED
            and operation.attempts >= 2
            and (not counted.counts_any or once)
        )
        return Check(f"{operation_id}: a crash after its {step!r} step repeats no step", ok, detail)


def _key_text(key: dict[str, Any]) -> str:
    """A key as the effect log writes an item's (localcloud.effect_log)."""
    return json.dumps(key, sort_keys=True, default=str)


def _writes(tally: Any, operation_id: str) -> dict[str, int]:
    """An operation's accepted writes by resource (a message is one write; an item or object written twice, two)."""
    return dict(tally.writes.get(operation_id, {}))


def _made_and_written(tally: Any, operation_id: str) -> dict[str, int]:
    """An operation's effects by resource, and its writes (`<resource> writes`): what a replay must leave alone."""
    return {**tally.of(operation_id), **{f"{r} writes": n for r, n in _writes(tally, operation_id).items()}}


def _shown(counts: dict[str, int]) -> str:
    return ", ".join(f"{resource} {number}" for resource, number in sorted(counts.items())) or "none"


_KIND_WORDS = {"item": "DynamoDB items", "object": "S3 objects", "publish": "SNS publishes", "send": "SQS messages"}
REFERENCE_NAMES = {"ses": "SES e-mails", "s3": "S3 objects", "ledger": "ledger rows"}
"""The reference shape's effects (a catalogue whose hooks name EffectSources), in words."""


def effect_names(cloud: Any, counted: Any) -> dict[str, str]:
    """Each effects row in words: a resource of the template with what it counts, or the reference shape's names."""
    if not counted.by_resource:
        return dict(REFERENCE_NAMES)
    names = {"ses": "SES e-mails"}
    for logical_id, kind in cloud.effect_log.resources.by_name.values():
        names[logical_id] = f"{logical_id} ({_KIND_WORDS[kind]})"
    return names


@contextmanager
def started_cloud() -> Iterator[Any]:
    from localcloud import LocalCloud
    from localcloud.server import catalogue_seeder

    project = current()
    with LocalCloud.start(project.template, catalogue=project.catalogue, seeders=[catalogue_seeder]) as cloud:
        yield cloud


def run_demo(console: Console, as_json: bool, cli: Any) -> tuple[dict[str, Any], bool]:
    """Run the demo; print progress (not in JSON mode) and the report. Returns (report, invariants hold)."""
    status = console.status("starting the local cloud (template.yaml → SAM translator → moto)") if not as_json else None
    if status:
        status.start()

    def step(text: str) -> None:
        if status:
            status.update(text)
            say(console, styled("• ", "dim"), text)

    try:
        with started_cloud() as cloud:
            step("local cloud deployed and seeded")
            report = Demo(cloud, step, cli=cli).run()
    finally:
        if status:
            status.stop()
    if as_json:
        print(json.dumps(report.to_json(), indent=2, sort_keys=True))
    else:
        print_report(console, report)
    return report.to_json(), report.invariants_hold


def print_report(console: Console, report: DemoReport) -> None:
    """The report at any width: tables when they fit, one block per job type when they do not."""
    columns = [
        "accepted",
        "succeeded",
        "noop",
        "resumed",
        "paused",
        "failed",
        "unknown",
        "rejected",
        "cancelled",
        "expired",
    ]
    records(
        console,
        ["job type", *(Column(column, justify="right") for column in columns)],
        [
            [job_type, *[str(states.get(column, 0) or "·") for column in columns]]
            for job_type, states in sorted(report.job_types.items())
        ],
        title="operations by job type (resumed: paused while its toggle was off, then ran)",
        omit_empty=True,
    )
    records(
        console,
        ["where", Column("count", justify="right")],
        [[report.effect_names.get(where, where), str(number)] for where, number in sorted(report.effects.items())],
        title="external effects, counted in the emulated services",
    )
    for job_type, why in sorted(report.not_enqueued.items()):
        say(console, styled("· ", "dim"), f"{job_type}: not enqueued on its own ({why})")
    for line in report.approvals:
        say(console, styled("· ", "dim"), line)
    if report.burst:
        burst = report.burst
        records(
            console,
            ["request", burst["newest_by"], "ended", "reason", "made"],
            demo_debounce.rows(burst),
            title=f"a burst of {burst['job_type']} ({burst['debounce']}): one run, {burst['run'] or 'none'}",
        )
    records(
        console,
        ["event", Column("count", justify="right")],
        [[name.replace("_", " "), str(number)] for name, number in sorted(report.events.items())],
        title="what the demo did",
    )
    failed = [check for check in report.checks if not check.ok]
    for check in failed:
        say(console, styled("✗ ", "red"), check.name, f" ({check.detail})")
    verdict = (
        styled("all invariants hold", "bold green")
        if not failed
        else styled(f"{len(failed)} invariant(s) failed", "bold red")
    )
    say(console, verdict, f": {len(report.checks) - len(failed)}/{len(report.checks)} checks in {report.seconds:.1f}s")
