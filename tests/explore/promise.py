"""The promise, checked after every step of an explored history and at its quiescence.

Each broken promise raises its own exception class (a subclass of `Broken`), so that Hypothesis
keeps, shrinks and reports each kind of break apart from the others. The effects are counted in the
emulated services (localcloud.effects) and seen as they happened, with the emulated time
(`FaultInjector.effects_seen`); states, receipts and listings are read from the tables and the
attention index, never from converge's word alone. The effect bounds, receipts, times and rewrites
are localcloud.invariants' and localcloud.time_invariants' own checks; what is added here is what a
history needs beyond a settled run: effects before their run_at, and nothing invisible (every open
operation is in flight or listed, after a reconciler pass and at quiescence), and every listing true.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from moto.core.utils import unix_time_millis
from moto.dynamodb.models import dynamodb_backends
from moto.dynamodb.models.dynamo_type import DynamoType
from moto.sqs.models import sqs_backends

from converge.model.records import HISTORY_LIMIT, Operation
from converge.model.signals import INVALID_ITEM, parse_signal_item, signal_form
from converge.model.states import ATTENTION_KEYS, FINAL_STATES, Flag, OperationState, StuckKind
from converge.model.timing import parse_instant
from converge.operate.overdue import OVERDUE_GRACE_SECONDS
from converge.store.codecs import operation_from_records, record_from_item
from localcloud import effects, invariants
from localcloud.clients import ACCOUNT_ID
from localcloud.faults import FaultInjector, FaultKind

_S = OperationState
UNSTARTED_ENDS = frozenset({_S.CANCELLED, _S.EXPIRED, _S.REJECTED})
"""Final states that promise the work never started: no effect may be counted for them."""


@dataclass(frozen=True)
class Planned:
    """What the explorer asked of one operation: its job (short name), how it came in, and its times."""

    operation_id: str
    job: str
    via: str
    run_at: float | None = None
    expires_at: float | None = None
    api_caller: str | None = None


class Broken(AssertionError):
    """A promise converge did not keep (the message names the operations and what was seen)."""

    def __init__(self, *args: object) -> None:
        super().__init__(*args)
        first_break_seen(type(self).__name__)


FIRST_BREAK = "EXPLORE_FIRST_BREAK"
"""A file `make explore-power` names: the first break a run meets (before any shrinking) is written there, and its
modification time is when, so the time to find a break is measured, not the time to find and shrink it."""


def first_break_seen(kind: str) -> None:
    path = os.environ.get(FIRST_BREAK)
    if path and not os.path.exists(path):
        with open(path, "w", encoding="utf-8") as out:
            out.write(kind)


class EffectAfterUnstartedEnd(Broken):
    """An operation ended CANCELLED, EXPIRED or REJECTED, and an effect is counted for it."""


class StartedThenEndedUnstarted(Broken):
    """An operation ended CANCELLED or EXPIRED after a delivery had started it (no effect counted)."""


class EffectBeforeRunAt(Broken):
    """An effect happened before the operation's run_at."""


class StartedBeforeRunAt(Broken):
    """A delivery started the operation before its run_at."""


class EffectCountBroken(Broken):
    """More effects than the policy allows (or a SUCCEEDED one without its effect)."""


class EmailsOutOfBounds(Broken):
    """effect_then_claim: e-mails beyond one plus the faults inside the send-to-claim window."""


class ReceiptInconsistent(Broken):
    """A stored history that does not end in the operation's state, an effect naming no operation, or a signal item's
    view (`converge ops show`) that does not show each of its stored answers once."""


class RewriteMishandled(Broken):
    """A producer's rewrite changed what runs, or was (not) listed under CONFLICT wrongly."""


class FinalStateUnlisted(Broken):
    """An UNKNOWN, CANCELLED or EXPIRED operation missing from its listing."""


class NoopWithoutReason(Broken):
    """A NOOP operation whose receipt says nothing of why."""


class LostAccepted(Broken):
    """ACCEPTED, nothing will deliver it, and it is listed nowhere."""


class LostInProgress(Broken):
    """IN_PROGRESS, nothing will deliver it again, and it is listed nowhere."""


class LostScheduledPastRunAt(Broken):
    """SCHEDULED although its run_at has passed, and nothing will deliver it."""


class LostScheduledAhead(Broken):
    """SCHEDULED for a run_at still ahead, but no message or schedule will deliver it."""


class ScheduleLostWithGroup(Broken):
    """SCHEDULED for ever: its one-time schedule was deleted with the schedule group (an injected fault)."""


class ScheduleFiringLost(Broken):
    """SCHEDULED for ever: its one-time schedule fired and the delivery failed (an injected fault)."""


class LostPaused(Broken):
    """PAUSED, and not listed under PAUSED (the resumer finds it only there)."""


class ApiRefusedItsCaller(Broken):
    """The HTTP API refused a request its caller is entitled to (its own operation, a valid request)."""


class FalseListing(Broken):
    """An operation listed under a state it is not in, or under STUCK while final."""


class WokenBeforeItsTime(Broken):
    """An operation not final whose recorded run_at (a wait's, a delayed request's) is still ahead, yet it is not
    SCHEDULED: paused or made ACCEPTED early, listed where its time does not show (and a cancel says "too late")."""


class RefusedActionChangedSomething(Broken):
    """An operator's action answered "not applied", yet the operation's state record or a step's marker changed."""


NOTICE: list[Callable[[type[Broken], str], None]] = []
"""Told of every break as it is raised (a long run reports when it first saw each kind)."""
IGNORED = frozenset(name.strip() for name in os.environ.get("EXPLORE_IGNORE", "").split(",") if name.strip())
"""Kinds of break a long run looks past (`make explore IGNORE=LostAccepted,...`), to find others behind them."""


def fail(kind: type[Broken], violations: Iterable[str]) -> None:
    found = sorted(violations)
    if found:
        for notice in NOTICE:
            notice(kind, found[0])
        if kind.__name__ in IGNORED:
            return
        raise kind("; ".join(found[:5]) + (f" (and {len(found) - 5} more)" if len(found) > 5 else ""))


def operations_now(cloud: Any) -> dict[str, tuple[Operation, dict[str, Any]]]:
    """Every operation, its request and state record joined, read from moto's tables in this process (a step's
    check runs hundreds of times a minute): `invariants.operations_stored`."""
    return invariants.operations_stored(cloud)


def signal_items_now(cloud: Any) -> dict[str, OperationState | None]:
    """Each signal item in the jobs table, and its answer's state (None: the relay has not answered it yet)."""
    items, states = (
        invariants.stored_items(cloud, output, signal_form) for output in ("JobsTableName", "StateTableName")
    )
    return {key: OperationState(states[key]["state"]["S"]) if key in states else None for key in items}


def listed_now(cloud: Any) -> Callable[[str], set[str]]:
    """The attention listings as the sparse indexes hold them (the state items carrying each key), read from
    moto's table in this process; the quiescence check reads them through the store's own queries."""
    table = dynamodb_backends[ACCOUNT_ID][cloud.clients.region].tables[cloud.outputs["StateTableName"]]
    items = [stored.to_json()["Attributes"] for stored in table.all_items()]

    def listed(key: str) -> set[str]:
        name = "conflict" if key == Flag.CONFLICT else "attention"
        return {item["operation_id"]["S"] for item in items if item.get(name, {}).get("S") == str(key)}

    return listed


# -- after every step ---------------------------------------------------------------------------------------------


def every_step(
    cloud: Any,
    faults: FaultInjector,
    planned: Mapping[str, Planned],
    settled: bool = False,
    steps_jobs: frozenset[str] = frozenset(),
) -> tuple[set[tuple[str, bool]], int]:
    """The cheap invariants: effects, times, receipts, final listings (localcloud.invariants); `settled` (the
    relay has read every write, the run is quiescent): producers' rewrites too, and listings read as
    `converge ops list` reads them (through the indexes). Returns the operations' abstract states now, and how near
    they stand to a started operation that reads as not started (`started_then_unstarted`).

    `steps_jobs`: job types made of steps, whose e-mail is one step among several: it may be sent while the
    operation waits, is retried or was cancelled waiting, so `steps_kept` bounds it, not the one-effect rule."""
    lister = invariants.attention_lister(cloud) if settled else listed_now(cloud)
    operations, counted = operations_now(cloud), effects.count(cloud)
    report = invariants.check(
        cloud, faults, list_attention=lister, effects=counted, reconciled=False, operations=operations
    )
    checks = {check.name: check for check in report.checks}
    unstarted_effects = [v for v in checks["time_and_flow"].violations if "yet started" in v and " 0 effects" not in v]
    unstarted_effects += _rejected_with_effects(counted, operations)
    fail(EffectAfterUnstartedEnd, unstarted_effects)
    fail(EffectBeforeRunAt, _effects_before_run_at(faults, planned))
    fail(EffectCountBroken, checks["exactly_once_effects"].violations)
    fail(EmailsOutOfBounds, _not_of_steps(checks["effect_then_claim_bounded"].violations, operations, steps_jobs))
    time_and_flow = checks["time_and_flow"].violations
    fail(StartedBeforeRunAt, _started_before_run_at(operations, planned))
    fail(StartedThenEndedUnstarted, [v for v in time_and_flow if "yet started" in v and " 0 effects" in v])
    fail(FinalStateUnlisted, [v for v in time_and_flow if "not listed" in v] + checks["unknown_listed"].violations)
    fail(ReceiptInconsistent, checks["receipts_consistent"].violations)
    if settled:  # a rewrite is listed (or not) once the relay has read it
        fail(RewriteMishandled, checks["producer_rewrites_refused"].violations)
    now = float(cloud.clock.now())
    fail(WokenBeforeItsTime, _woken_before_its_time(operations, now))
    fail(
        NoopWithoutReason,
        [
            f"{operation_id} NOOP, its last history entry says nothing"
            for operation_id, (operation, _) in operations.items()
            if operation.state is _S.NOOP and not (operation.history and operation.history[-1].reason.strip())
        ],
    )
    return abstract_states(operations, counted), started_then_unstarted(operations, now)


def _woken_before_its_time(operations: Mapping[str, tuple[Operation, Any]], now: float) -> list[str]:
    early = []
    for operation_id, (operation, _) in operations.items():
        record = operation.record
        if record is None or record.run_at is None or operation.state in FINAL_STATES:
            continue
        if record.run_at > now and operation.state is not _S.SCHEDULED:
            early.append(f"{operation_id} {operation.state.value}, its run_at {record.run_at:.0f} ahead of {now:.0f}")
    return early


def _not_of_steps(
    violations: list[str], operations: Mapping[str, tuple[Operation, Any]], steps_jobs: frozenset[str]
) -> list[str]:
    return [
        violation
        for violation in violations
        if (entry := operations.get(violation.split(" ", 1)[0])) is None or entry[0].job_type not in steps_jobs
    ]


def abstract_states(operations: Mapping[str, tuple[Operation, Any]], counted: effects.Effects) -> set[tuple[str, bool]]:
    """Each operation's state, and whether an effect of it is counted: the model's state space, which the
    promise is about (an effect under a state that says nothing ran is a break; PAUSED with its effect made,
    IN_PROGRESS with its holder gone after the effect, are the rare places a break is reached from)."""
    return {
        (operation.state.value, sum(counted.for_operation(operation_id).values()) > 0)
        for operation_id, (operation, _) in operations.items()
    }


STARTED_READS_UNSTARTED = 3
"""The top of `started_then_unstarted`: a cancel of such an operation must answer "too late"."""


def started_then_unstarted(operations: Mapping[str, tuple[Operation, Any]], now: float) -> int:
    """How near the operations stand to the one place a cancel can break "never cancel started work": 3 when one
    started (a delivery took it) yet reads as not started (ACCEPTED, SCHEDULED or PAUSED: its kill switch met its
    redelivery after its holder died), other than a job of steps waiting between two steps (cancelled by design);
    2 when one is IN_PROGRESS with its holder gone (its lease lapsed: the step before); 1 when one started; else 0.
    The explorer's targeted phase climbs this (`Explorer.teardown`), since no rule reaches it in one step."""
    level = 0
    for operation, _ in operations.values():
        record = operation.record
        if record is None or not record.started:
            continue
        if operation.state in (_S.ACCEPTED, _S.SCHEDULED, _S.PAUSED) and not record.waiting:
            return STARTED_READS_UNSTARTED
        holder_gone = operation.state is _S.IN_PROGRESS and (record.lease_until or 0.0) < now
        level = max(level, 2 if holder_gone else 1)
    return level


def _rejected_with_effects(counted: effects.Effects, operations: Mapping[str, tuple[Operation, Any]]) -> list[str]:
    return [
        f"{operation_id} REJECTED yet {sum(counted.for_operation(operation_id).values())} effects"
        for operation_id, (operation, _) in operations.items()
        if operation.state is _S.REJECTED and sum(counted.for_operation(operation_id).values())
    ]


def _started_before_run_at(
    operations: Mapping[str, tuple[Operation, Any]], planned: Mapping[str, Planned]
) -> list[str]:
    """Started before the run_at first written (a rewrite with other times is the same request: a no-op;
    time_invariants reads the request stored now, which such a rewrite changed)."""
    early = []
    for operation_id, (operation, _) in operations.items():
        wanted = planned.get(operation_id)
        if wanted is None or wanted.run_at is None:
            continue
        for entry in operation.history:
            if entry.state == _S.IN_PROGRESS.value and parse_instant("at", entry.at) < wanted.run_at:
                early.append(f"{operation_id} started at {entry.at}, before its run_at {wanted.run_at:.3f}")
    return early


def _effects_before_run_at(faults: FaultInjector, planned: Mapping[str, Planned]) -> list[str]:
    early = []
    for seen in faults.effects_seen:
        wanted = planned.get(seen.operation_id)
        if wanted is not None and wanted.run_at is not None and seen.at < wanted.run_at:
            early.append(f"{seen.operation_id}: {seen.service} effect at {seen.at:.3f}, run_at {wanted.run_at:.3f}")
    return early


# -- nothing invisible ----------------------------------------------------------------------------------------------


def in_flight(cloud: Any) -> set[str]:
    """Operations something will deliver: a stream record the relay has not been done with, a message in
    a work queue (visible, delayed or hidden), or a one-time schedule not fired yet."""
    found: set[str] = set()
    for source in cloud.stream_sources:
        for record in source.undelivered():
            image = record.get("dynamodb", {}).get("NewImage") or {}
            value = image.get("operation_id") if isinstance(image, dict) else None
            if isinstance(value, dict) and isinstance(value.get("S"), str):
                found.add(value["S"])
    queues = sqs_backends[ACCOUNT_ID][cloud.clients.region].queues
    for source in cloud.queue_sources:
        queue = queues.get(source.mapping.queue_name)
        for message in list(queue._messages) if queue is not None else []:
            found.add(_message_operation(message.body, message.message_attributes))
    for _due, detail in cloud.one_time_schedules.pending():
        found.add(_message_operation((detail.get("Target") or {}).get("Input") or "", {}))
    return found


def dead_lettered(cloud: Any) -> set[str]:
    """Operations with a message in a worker DLQ (the queues' redrive targets in the deployment's outputs)."""
    return {_message_operation(message.body, message.message_attributes) for message in _dead_letters(cloud)}


def _dead_letters(cloud: Any) -> list[Any]:
    """moto's messages in the worker DLQs."""
    queues = sqs_backends[ACCOUNT_ID][cloud.clients.region].queues
    found: list[Any] = []
    for output in ("CriticalDlqUrl", "DefaultDlqUrl", "BulkDlqUrl"):
        queue = queues.get(str(cloud.outputs[output]).rstrip("/").rsplit("/", 1)[-1])
        found += list(queue._messages) if queue is not None else []
    return found


SQS_LONGEST_DELAY = 900.0
"""SQS delays a message 15 minutes at most: converge sends none that is due later than that (a later one waits
for its schedule); a message sent longer before its `run_at` is an early copy (a replayed dispatch)."""


def dead_lettered_on_time(cloud: Any) -> set[str]:
    """As `dead_lettered`, but for early copies: a copy sent more than SQS's longest delay before its own `run_at`
    is handed back until its receives run out, and dead-lettered as documented (docs/dead-letters.md: the reconciler
    deletes it as superseded while its operation waits, redrive as converged once it has ended). A hold never sends
    one: the message of a job a flow control held is sent for its slot, or sent at its time by its schedule."""
    return {
        _message_operation(message.body, message.message_attributes)
        for message in _dead_letters(cloud)
        if not _early_copy(message.body, message.sent_timestamp)
    }


def _early_copy(body: str, sent_ms: float | None) -> bool:
    try:
        run_at = json.loads(body).get("run_at")
        due = parse_instant("run_at", run_at) if isinstance(run_at, str) else None
    except (ValueError, AttributeError, RecursionError):
        return False
    return due is not None and sent_ms is not None and due - sent_ms / 1000 > SQS_LONGEST_DELAY + 1


def relay_failure_queue(cloud: Any) -> Any:
    """moto's queue behind the relay's on-failure destination (None when it is not deployed)."""
    queues = sqs_backends[ACCOUNT_ID][cloud.clients.region].queues
    return queues.get(str(cloud.outputs["RelayFailureQueueUrl"]).rstrip("/").rsplit("/", 1)[-1])


def now_ms() -> int:
    """The real clock as moto's SQS reads it (a message's visible_at is on it)."""
    return int(unix_time_millis())


def relay_failures_kept(cloud: Any) -> bool:
    """Whether the relay's on-failure destination holds stream batches the relay gave up on: the reconciler's
    replay of one records what the relay never did (a producer's rewrite as a CONFLICT, beside a settled
    operation too), so a history is not quiescent while one waits there."""
    queue = relay_failure_queue(cloud)
    return queue is not None and bool(list(queue._messages))


def _message_operation(body: str, attributes: Mapping[str, Any]) -> str:
    attribute = attributes.get("operation_id") or {}
    value = attribute.get("StringValue") or attribute.get("string_value")
    if value:
        return str(value)
    try:
        parsed = json.loads(body)
    except (ValueError, RecursionError):
        return "(not JSON)"
    return str(parsed.get("operation_id")) if isinstance(parsed, dict) else "(no operation id)"


def nothing_invisible(cloud: Any, faults: FaultInjector, now: float) -> None:
    """Every operation that is not final is in flight, or listed under an attention key with a reason."""
    lister = invariants.attention_lister(cloud)
    operations = operations_now(cloud)
    flying = in_flight(cloud)
    stuck = _stuck_with_reason(cloud)
    paused = lister(_S.PAUSED)
    watched = lister(_S.SCHEDULED)
    lost: dict[type[Broken], list[str]] = {}
    for operation_id, (operation, _) in operations.items():
        state = operation.state
        if state in FINAL_STATES or operation_id in stuck:
            continue
        if state is _S.PAUSED:
            if operation_id not in paused:
                lost.setdefault(LostPaused, []).append(f"{operation_id} PAUSED but not listed")
            continue
        if operation_id in flying or _watched_until_overdue(operation, operation_id in watched, now):
            continue
        kind: type[Broken] = LostInProgress
        if state is _S.ACCEPTED:
            kind = LostAccepted
        elif state is _S.SCHEDULED:
            run_at = operation.record.run_at if operation.record else None
            kind = LostScheduledPastRunAt if run_at is None or run_at <= now else LostScheduledAhead
            injected = faults.operations[operation_id].injected if operation_id in faults.operations else {}
            if injected.get(FaultKind.SCHEDULE_GROUP_MISSING.value):
                kind = ScheduleLostWithGroup  # what the injector destroyed, as it counts window faults
            elif injected.get(FaultKind.SCHEDULE_FIRING_DROPPED.value):
                kind = ScheduleFiringLost
        detail = operation.record.history[-1].reason if operation.record and operation.record.history else "no receipt"
        lost.setdefault(kind, []).append(f"{operation_id} {state.value}, nothing delivers it, not listed ({detail})")
    for kind in (
        LostAccepted,
        LostInProgress,
        LostScheduledPastRunAt,
        LostScheduledAhead,
        ScheduleLostWithGroup,
        ScheduleFiringLost,
        LostPaused,
    ):
        fail(kind, lost.get(kind, []))


def _watched_until_overdue(operation: Operation, in_schedule_index: bool, now: float) -> bool:
    """A SCHEDULED operation in the schedule index whose run_at has not passed by the reconciler's overdue grace:
    its message or schedule may be gone (a schedule group deleted with its schedules), but the reconciler's
    overdue pass reads that index and sends it again once the grace is over (docs/time-and-flow.md), so it is
    in flight within a deadline. Past that deadline it must be in flight or listed STUCK like any other."""
    record = operation.record
    if operation.state is not _S.SCHEDULED or not in_schedule_index or record is None or record.run_at is None:
        return False
    return now < record.run_at + OVERDUE_GRACE_SECONDS


def _stuck_with_reason(cloud: Any) -> set[str]:
    store = invariants.attention_lister(cloud)
    listed = store(Flag.STUCK)
    if not listed:
        return set()
    operations = operations_now(cloud)
    return {
        operation_id
        for operation_id in listed
        if operation_id in operations
        and (record := operations[operation_id][0].record) is not None
        and (record.stuck_reason or "").strip()
    }


def moves(operations: Mapping[str, tuple[Operation, Any]]) -> set[tuple[str, str]]:
    """The distinct state moves the operations' receipts record (from, to), ACCEPTED first."""
    found = set()
    for operation, _ in operations.values():
        states = [_S.ACCEPTED.value, *(entry.state for entry in operation.history)]
        found |= {(a, b) for a, b in itertools.pairwise(states) if a != b}
    return found


def listings_true(cloud: Any) -> None:
    """An operation listed under a state is in that state; one listed under STUCK is open."""
    lister: Callable[[str], set[str]] = invariants.attention_lister(cloud)
    operations, answers = operations_now(cloud), signal_items_now(cloud)
    false = []
    for key in ATTENTION_KEYS:
        if key == Flag.CONFLICT:
            continue  # a flag beside any state (the rewrite check covers it)
        for operation_id in lister(key):
            entry = operations.get(operation_id)
            if signal_form(operation_id):  # a signal item's answer: listed REJECTED when it was not kept
                answered = answers.get(operation_id)
                if key != _S.REJECTED or answered is not _S.REJECTED:
                    false.append(f"signal item {operation_id} listed under {key} but answered {answered}")
                continue
            if entry is None:
                false.append(f"{operation_id} listed under {key} but does not exist")
                continue
            state = entry[0].state
            if key == Flag.STUCK and state in FINAL_STATES:
                false.append(f"{operation_id} listed STUCK but {state.value}")
            elif key != Flag.STUCK and state.value != key:
                false.append(f"{operation_id} listed under {key} but {state.value}")
    fail(FalseListing, false)


# -- steps, waits and continuations ---------------------------------------------------------------------------------


class StepEffectTwice(Broken):
    """A claim_then_effect step's effect (the charge) applied more than once for its key."""


class StepEffectLost(Broken):
    """A job of steps SUCCEEDED although one of its steps' effects never happened."""


class StepEffectAfterCancel(Broken):
    """A step's effect after the operation's cancel (or for an operation that ended never started)."""


class ContinuationBroken(Broken):
    """`<id>:next` not there exactly when the parent SUCCEEDED, `<id>:on-failure` not exactly when it ended
    FAILED or UNKNOWN, or a continuation of a parent that never settled that way."""


class WaitCutShort(Broken):
    """A job of steps filed its record (the step after its wait) before its charge (the step before it) plus the
    wait's seconds: a wait between steps is never cut short, whatever comes back early (counted in the emulated
    provider, with the emulated time)."""


class WaitBroughtForward(Broken):
    """A job of steps waiting between two steps is SCHEDULED for a time earlier than its wait's end (as the job first
    asked for it): listed, and sent again, before its time (a hold, or any write but the wait's own, moved it)."""


WAIT_TIME_ROUNDING = 0.001
"""A wait's marker keeps its end to the millisecond (a time read back may be that much earlier than the one asked)."""


class WaitingUnlisted(Broken):
    """An operation waiting between two steps that is not listed under SCHEDULED with its time (nor STUCK with a
    reason other than a dead-lettered copy while its time is ahead)."""


def steps_kept(
    cloud: Any,
    faults: FaultInjector,
    world: Any,
    steps_jobs: frozenset[str],
    cancelled_with: dict[str, int],
) -> None:
    """The promises of steps, waits and continuations (tests/explore/catalogue.py's jobs of steps, `steps_jobs`),
    after every step.

    `cancelled_with`: for each operation seen CANCELLED, how many step effects it had then (kept by the caller
    across steps): an effect counted later is one after the cancel, whenever the clock says it happened."""
    operations = operations_now(cloud)
    fail(
        StepEffectTwice,
        [f"{key}: charged {times} times (claim_then_effect)" for key, times in world.charges.items() if times > 1],
    )
    lost, after_cancel, continuations, unlisted, notice_bounds, cut_short, forward = [], [], [], [], [], [], []
    counted: effects.Effects | None = None
    registry = cloud.registry
    listed = listed_now(cloud)
    scheduled, stuck = listed(_S.SCHEDULED), listed(Flag.STUCK)
    now = float(cloud.clock.now())
    for operation_id, (operation, item) in operations.items():
        waiting = item.get("waiting") and operation.state is _S.SCHEDULED
        # Listed under SCHEDULED with its time, or under STUCK with a reason (as nothing_invisible accepts: its
        # resumption not sent yet, or overdue); never STUCK for a dead-lettered copy while its time is ahead (that
        # copy is superseded by its own delivery; see test_breaks.py)
        why = str((item.get("stuck") or {}).get("S") or "")
        ahead = operation.record is not None and operation.record.run_at is not None and operation.record.run_at > now
        superseded = why.startswith(f"{StuckKind.DEAD_LETTERED}:") and ahead
        shown = operation_id in scheduled or (operation_id in stuck and why and not superseded)
        if waiting and (not shown or operation.record is None or operation.record.run_at is None):
            unlisted.append(f"{operation_id} waits at {item['waiting'].get('S')!r}, not listed with its time ({why})")
        if operation.job_type in registry:
            binding = registry.get(operation.job_type)
            if binding.on_success is not None or binding.on_failure is not None:
                follows = (binding.on_success is not None, binding.on_failure is not None)
                continuations += _continuations_of(operation_id, operation, operations, follows)
        if operation.job_type not in steps_jobs:
            continue
        made = world.effects_of(operation_id)
        cut_short += _wait_cut_short(operation_id, made, world.waits.get(operation_id))
        forward += _wait_brought_forward(operation_id, operation, world.waits.get(operation_id))
        counted = counted or effects.count(cloud)
        notices, window = counted.for_operation(operation_id)["ses"], faults.window(operation_id)
        if notices > 1 + window or (operation.state is _S.SUCCEEDED and not notices):
            notice_bounds.append(f"{operation_id} {operation.state.value}: {notices} notices, window {window}")
        if operation.state is _S.SUCCEEDED:
            missing = [step for step in ("charge", "file") if not any(e.step == step for e in made)]
            if missing:
                lost.append(f"{operation_id} SUCCEEDED without its {', '.join(missing)}")
        after_cancel += _step_effects_after_end(operation_id, operation, made, faults, cancelled_with)
    for operation_id in operations:
        parent, _, outcome = operation_id.rpartition(":")
        if outcome in ("next", "on-failure") and parent not in operations:
            continuations.append(f"{operation_id} follows {parent}, which does not exist")
    fail(EmailsOutOfBounds, notice_bounds)
    fail(StepEffectLost, lost)
    fail(StepEffectAfterCancel, after_cancel)
    fail(ContinuationBroken, continuations)
    fail(WaitingUnlisted, unlisted)
    fail(WaitCutShort, cut_short)
    fail(WaitBroughtForward, forward)


def _wait_cut_short(operation_id: str, made: list[Any], wait: tuple[float, float] | None) -> list[str]:
    """The record filed before the first charge plus the wait's seconds (the wait starts after the charge: nothing
    an operator does, a resolve, a retry, a cancel, makes the file come sooner than that)."""
    charges = [effect.at for effect in made if effect.step == "charge"]
    if wait is None or not charges:
        return []
    seconds, _ = wait
    earliest = min(charges) + seconds - WAIT_TIME_ROUNDING
    return [
        f"{operation_id} filed at {effect.at:.3f}, charged at {min(charges):.3f}, its wait {seconds:.0f} s"
        for effect in made
        if effect.step == "file" and effect.at < earliest
    ]


def _wait_brought_forward(operation_id: str, operation: Operation, wait: tuple[float, float] | None) -> list[str]:
    """SCHEDULED at its wait for a time before the wait's end: the end recorded is never earlier than the one the
    job first asked for (a resumed run waits for the first recorded; a hold after the wait's end holds from then)."""
    record = operation.record
    if wait is None or operation.state is not _S.SCHEDULED or record is None or not record.waiting:
        return []
    _, end = wait
    if record.run_at is None or record.run_at >= end - WAIT_TIME_ROUNDING:
        return []
    reason = record.history[-1].reason if record.history else "no receipt"
    return [f"{operation_id} waits at {record.waiting!r} until {record.run_at:.0f}, its wait ends {end:.0f} ({reason})"]


def _step_effects_after_end(
    operation_id: str, operation: Operation, made: list[Any], faults: FaultInjector, cancelled_with: dict[str, int]
) -> list[str]:
    e_mails = [seen.at for seen in faults.effects_seen if seen.operation_id == operation_id]
    times = [effect.at for effect in made] + e_mails
    if operation.state in (_S.EXPIRED, _S.REJECTED) or (
        operation.state is _S.CANCELLED and not _cancelled_while_waiting(operation)
    ):
        return (
            [f"{operation_id} {operation.state.value} (never started) yet {len(times)} step effects"] if times else []
        )
    if operation.state is not _S.CANCELLED:
        return []
    found = []
    cancelled_at = parse_instant("at", operation.history[-1].at)
    late = [at for at in times if at > cancelled_at]
    if late:
        found.append(f"{operation_id} cancelled at {cancelled_at:.3f}, a step effect at {max(late):.3f}")
    before = cancelled_with.setdefault(operation_id, len(times))
    if len(times) > before:
        found.append(f"{operation_id} had {before} step effects when seen cancelled, {len(times)} now")
    return found


def _cancelled_while_waiting(operation: Operation) -> bool:
    last = operation.history[-1] if operation.history else None
    return last is not None and last.state == _S.CANCELLED.value and "while waiting at" in last.reason


def _continuations_of(
    operation_id: str,
    operation: Operation,
    operations: Mapping[str, tuple[Operation, Any]],
    follows: tuple[bool, bool] = (True, True),
) -> list[str]:
    """`<id>:next` iff SUCCEEDED; `<id>:on-failure` iff FAILED or UNKNOWN now or before (an operator's retry or
    resolve may have moved it on since); neither for an operation that never settled through a terminal write.
    `follows`: whether its binding names a continuation on success, on failure (none is written for one it does not).
    However it settled (a worker, an operator's resolve), the continuation its binding names is there."""
    found = []
    was = {entry.state for entry in operation.history}
    succeeded, failed = operation.state is _S.SUCCEEDED, operation.state in (_S.FAILED, _S.UNKNOWN)
    ever_failed = failed or bool(was & {_S.FAILED.value, _S.UNKNOWN.value})
    on_success, on_failure = follows
    for outcome, must, may in (
        ("next", succeeded and on_success, succeeded and on_success),
        ("on-failure", failed and on_failure, ever_failed and on_failure),
    ):
        child = f"{operation_id}:{outcome}"
        exists = child in operations
        if must and not exists:
            found.append(f"{operation_id} {operation.state.value}, but no {child}")
        elif exists and not may:
            found.append(f"{child} exists, but {operation_id} is {operation.state.value} (history: {sorted(was)})")
        if exists and operations[child][0].parent_id != operation_id:
            found.append(f"{child} names {operations[child][0].parent_id} as its parent, not {operation_id}")
    return found


# -- batches ---------------------------------------------------------------------------------------------------------


class BatchCountsWrong(Broken):
    """A batch's counts differ from its children's final states (a child counted twice, or not at all)."""


class BatchCallbackWrong(Broken):
    """A batch's callback written before every child was final, for a batch not complete, with other counts than
    the batch gave it, or rewritten."""


class BatchAdmissionWrong(Broken):
    """The same batch admitted again refused, or other content under its id admitted."""


class BatchWaitsSilently(Broken):
    """After a reconciler pass at quiescence, a batch neither complete nor listed with a reason."""


@dataclass(frozen=True)
class AdmittedBatch:
    """A batch the explorer admitted (or tried to): its id and its children's keys, in order."""

    batch_id: str
    keys: tuple[str, ...]

    def child_ids(self) -> list[str]:
        from converge.model.batches import child_id, shard_count, shard_of

        shards = shard_count(len(self.keys))
        return [child_id(self.batch_id, key, shard_of(position, shards)) for position, key in enumerate(self.keys)]


def _counted_image(image: Any) -> str | None:
    """What a state record's stream image counts as on its batch: its state when final, else the final state an
    operator reopened it from (None: not final yet)."""
    if not isinstance(image, dict):
        return None
    finals = {state.value for state in FINAL_STATES}
    for name in ("state", "reopened_from"):
        value = (image.get(name) or {}).get("S")
        if value in finals:
            return str(value)
    return None


def uncounted_changes(cloud: Any) -> dict[str, set[str | None]]:
    """By child, what its place may hold while the batch counter has not yet been done with its changes: the count
    before its first such change, and after each (the counter may have written some of a failing batch's)."""
    found: dict[str, set[str | None]] = {}
    for source in cloud.stream_sources if cloud is not None else []:
        if "BatchCounter" not in source.mapping.function_id:
            continue
        for record in source.undelivered():
            change = record.get("dynamodb") or {}
            operation_id = ((change.get("Keys") or {}).get("operation_id") or {}).get("S")
            if operation_id is None:
                continue
            seen = found.setdefault(operation_id, set())
            if not seen:
                seen.add(_counted_image(change.get("OldImage")))
            seen.add(_counted_image(change.get("NewImage")))
    return found


def batches_kept(converge: Any, batches: Iterable[AdmittedBatch], runs: Iterable[tuple[str, dict[str, Any], float]],
                 settled: bool = False, cloud: Any = None) -> None:  # fmt: skip
    """Each child counted exactly once per final state it holds (a child an operator reopened counts as the final
    state it had until it settles again); while the batch counter has changes of a child still to read (`cloud`'s
    stream), its count is any it held since (each state's count between the children that must and that may hold
    it); the callback written only for a complete batch, whose summary has every child final and none UNKNOWN,
    given exactly the summary the batch recorded, and every run of it told that; `settled` (after a reconciler
    pass at quiescence, the streams drained): every batch complete, or listed with its reason."""
    from converge.model.batches import COUNTED, BatchState, callback_id

    batches = list(batches)
    if not batches:
        return  # nothing admitted: no count, callback or listing to check (and the counter's stream goes unread)
    table = converge.require_batches()
    state = converge.operations.state
    wrong_counts, wrong_callbacks, silent = [], [], []
    pending = uncounted_changes(cloud)
    told: dict[str, list[dict[str, Any]]] = {}
    for operation_id, message, _ in runs:
        told.setdefault(operation_id, []).append(message)
    for admitted in batches:
        batch = table.get(admitted.batch_id)
        callback = converge.operations.jobs.item(callback_id(admitted.batch_id))
        if batch is None:
            if callback is not None:
                wrong_callbacks.append(f"{admitted.batch_id}: a callback and no batch")
            continue
        lowest: dict[str, int] = {}
        highest: dict[str, int] = {}
        finals: list[str] = []
        for child in admitted.child_ids():
            record = state.record(child)
            counted_as = record.state if record.state in FINAL_STATES else record.reopened_from
            may = {counted_as.value if counted_as in COUNTED else None} | pending.get(child, set())
            for name in may - {None}:
                highest[name] = highest.get(name, 0) + 1
            if len(may) == 1 and None not in may:
                (name,) = may
                lowest[name] = lowest.get(name, 0) + 1
            finals.append(record.state.value)
        counts = {name: count for name, count in batch.counts.items() if count}
        if any(not lowest.get(name, 0) <= counts.get(name, 0) <= highest.get(name, 0) for name in {*counts, *lowest}):
            held = lowest if lowest == highest else f"{lowest} to {highest}"
            wrong_counts.append(f"{admitted.batch_id}: counted {counts}, its children hold {held} ({finals})")
        if callback is not None:
            summary = dict(batch.summary or {})
            payload = converge.operations.require(callback_id(admitted.batch_id)).payload
            if batch.state is not BatchState.COMPLETE:
                wrong_callbacks.append(f"{admitted.batch_id}: a callback while the batch is {batch.state.value}")
            if sum(summary.values()) != batch.total or summary.get(_S.UNKNOWN.value):
                wrong_callbacks.append(f"{admitted.batch_id}: completed with {summary} of {batch.total} children")
            given = {name: payload.get(f"batch_{name.lower()}", 0) for name in summary}
            if given != summary or payload.get("batch_total") != batch.total:
                wrong_callbacks.append(f"{admitted.batch_id}: the callback was given {payload}, the batch {summary}")
            for message in told.get(callback_id(admitted.batch_id), []):
                if {name: message.get(f"batch_{name.lower()}", 0) for name in summary} != summary:
                    wrong_callbacks.append(f"{admitted.batch_id}: a run of the callback was told {message}")
            record = state.record(callback_id(admitted.batch_id))
            if record.state is _S.SUCCEEDED and not told.get(callback_id(admitted.batch_id)):
                wrong_callbacks.append(f"{admitted.batch_id}: its callback SUCCEEDED and never ran")
            if record.conflicts:
                wrong_callbacks.append(f"{admitted.batch_id}: its callback was written again with other content")
        elif batch.state is BatchState.COMPLETE:
            wrong_callbacks.append(f"{admitted.batch_id}: complete, and no callback")
        if settled and batch.state is not BatchState.COMPLETE and not batch.attention:
            silent.append(f"{admitted.batch_id}: {batch.state.value}, counts {counts}, children {finals}, unlisted")
    fail(BatchCountsWrong, wrong_counts)
    fail(BatchCallbackWrong, wrong_callbacks)
    fail(BatchWaitsSilently, silent)


# -- rate limits (docs/flow-control.md) -----------------------------------------------------------------------------


class LimitExceeded(Broken):
    """A window of the limiter's period held more starts of its jobs than its limit and burst (and the held jobs
    come back late within the grace) allow, counted from the partner's calls as the emulated service saw them."""


class ThrottledJobDeadLettered(Broken):
    """A job held by a rate limit, never started, reached a DLQ."""


class ThrottledJobUnlisted(Broken):
    """A job waiting for its rate limit's slot is not listed under SCHEDULED with its start (nor STUCK, overdue)."""


class ReservationFailed(Broken):
    """A worker's reservation of a rate limiter's key failed its delivery because the key moved under it (another
    worker's reservation, an operator's release): the job handed back, a receive spent, nothing else having met it."""


class ChargedTwice(Broken):
    """A job under several rate limiters was charged twice on one of them for a run: held by a key whose only units
    were its own, taken while another of its limiters held it, it waited behind itself."""


def held_jobs_kept(
    cloud: Any,
    operations: Mapping[str, tuple[Operation, Any]],
    jobs: Iterable[str],
    held: Iterable[str],
    kinds: tuple[type[Broken], type[Broken]],
    *,
    held_as: str = "held",
    start: str = "its start",
) -> None:
    """Jobs a flow control holds back (a rate limit, a cap, a debounce): none of `held` that never started and has not
    ended is in a DLQ (`kinds[0]`; an early copy of its request aside, `dead_lettered_on_time`), and every one of
    `jobs` waiting is listed under SCHEDULED with its run_at (`kinds[1]`), or, once the reconciler found it overdue
    (its message not delivered by its start), under STUCK with that kind."""
    dead, unlisted = kinds
    # (One that ended unstarted, debounced into a newer request or skipped, is no held job the DLQ took: a copy of
    # its message, skipped as settled, comes back with its batch-mates when their invocation dies, as often as they)
    unstarted = {
        op
        for op in held
        if (operation := operations[op][0]).record is not None
        and operation.record.attempts == 0
        and operation.state not in FINAL_STATES
    }
    fail(dead, [f"{op} {held_as}, never started, in a DLQ" for op in sorted(unstarted & dead_lettered_on_time(cloud))])
    listed = listed_now(cloud)
    scheduled, stuck = listed("SCHEDULED"), listed("STUCK")

    def shown(op: str) -> bool:
        record = operations[op][0].record
        if record is None or record.run_at is None:
            return False
        return op in scheduled or (op in stuck and record.stuck_kind is not None)

    fail(
        unlisted,
        [
            f"{op} SCHEDULED, not listed or without {start}"
            for op in sorted(jobs)
            if op in operations and operations[op][0].state is _S.SCHEDULED and not shown(op)
        ],
    )


class CapExceeded(Broken):
    """A capped job started while its key's cap was full of other operations in progress (their leases live)."""


class CappedJobDeadLettered(Broken):
    """A job held by a concurrency cap, never started, reached a DLQ."""


class CappedJobUnlisted(Broken):
    """A job waiting for a concurrency cap's slot is not listed under SCHEDULED with its next try (nor STUCK,
    overdue)."""


class HeldWithASlotFree(Broken):
    """A capped job was held, or ended NOOP in skip mode, while its key had a slot free and no operator's pause: its
    reason counts fewer running than the cap. A take that finds room takes it; a paused key's jobs wait on the pause,
    which their reason names."""


HELD_COUNT = re.compile(r"concurrency (?P<cap>\S+) \((?P<key>.*): (?P<running>\d+) of (?P<limit>\d+) running\)")
"""A cap's hold or skip as its reason gives it: the key, and how many of the cap's slots it found running."""


def caps_kept(cloud: Any, capped: set[str], crowded: list[str]) -> None:
    """Never more running at once per key than the cap: every start of a capped job found fewer other operations
    of its key in progress (IN_PROGRESS, their lease live: a crashed holder counts until its lease lapses) than the
    cap, as the job saw them when it started (`crowded` lists each that did not). No job is held or skipped while its
    key had a slot free (and no pause). No held job that never started is dead-lettered; every one waiting is listed
    under SCHEDULED, with its next try."""
    fail(CapExceeded, crowded[:1])
    if not capped:
        return
    operations = operations_now(cloud)
    free = [
        f"{operation_id}: {entry.reason}"
        for operation_id in sorted(capped & set(operations))
        for entry in operations[operation_id][0].history
        if (found := HELD_COUNT.search(entry.reason)) and int(found["running"]) < int(found["limit"])
    ]
    fail(HeldWithASlotFree, free)
    held = {
        operation_id
        for operation_id in capped
        if operation_id in operations
        and any(entry.reason.startswith("concurrency ") for entry in operations[operation_id][0].history)
    }
    held_jobs_kept(cloud, operations, capped, held, (CappedJobDeadLettered, CappedJobUnlisted), start="its next try")


class NeverQuiet(Broken):
    """A drain of the platform's work did not come to rest within the explorer's bound on rounds: work that keeps
    coming back for nothing (a held job that is never started, copies of one message that put each other off), which
    AWS would run, and bill, forever."""


def drains_quiet(workload: Any, rounds: int) -> None:
    """Every drain since the last look came to rest within `rounds` rounds (the explorer's bound: histories take far
    fewer); the open operations of one that did not are named, with what they are waiting for."""
    unquiet, workload.unquiet = list(workload.unquiet), []
    if not unquiet:
        return
    operations = operations_now(workload.cloud)
    open_now = []
    for operation_id, (operation, _) in sorted(operations.items()):
        if operation.state in FINAL_STATES or operation.record is None:
            continue
        last = operation.record.history[-1].reason if operation.record.history else "no receipt"
        open_now.append(f"{operation_id} {operation.state.value} ({last[:100]})")
    busiest = max(unquiet, key=lambda stats: stats.fast_forwarded_seconds)
    days = busiest.fast_forwarded_seconds / 86400
    fail(
        NeverQuiet,
        [f"a drain still busy after {rounds} rounds ({days:.1f} emulated days on); open: {'; '.join(open_now[:5])}"],
    )


class HeldJobNotWoken(Broken):
    """A job held on a key an operator paused still waits for a later try after the key's release, neither woken nor
    listed under STUCK: a release wakes every job held on its key (due now, and its message sent)."""


def release_woke(cloud: Any, faults: FaultInjector, capped: set[str], cap: str, key: str, released: Any) -> None:
    """After an operator's release of a cap's key, no job of it is held by the pause for later: each is due now (its
    message sent) or listed under STUCK. Not asked while faults are injected (a held job's note on the key may have
    failed: it starts when it next tries, as documented) or when the release says it missed some."""
    if faults.rules or released.missed:
        return
    operations = operations_now(cloud)
    now = cloud.clock.now()
    late = []
    for operation_id in sorted(capped & set(operations)):
        operation = operations[operation_id][0]
        record = operation.record
        if operation.state is not _S.SCHEDULED or record is None or not record.history or record.stuck_kind:
            continue
        reason = record.history[-1].reason
        held_by_pause = reason.startswith(f"concurrency {cap} ") and "paused by" in reason
        if held_by_pause and (operation.payload or {}).get("account_id") == key and (record.run_at or 0) > now:
            late.append(f"{operation_id} still held after its key's release ({reason})")
    fail(HeldJobNotWoken, late)


class SkippedWithoutReason(Broken):
    """A job of a cap in skip mode ended NOOP without naming the operation of its key that held the cap, or waited
    for a slot (it may wait only on a key an operator paused)."""


class OlderReplacedNewer(Broken):
    """A job of a cap in replace mode ended NOOP "replaced by" a request of its key not newer than itself (accepted
    before it), or one of another key: the newest request of a key is always the one kept."""


def modes_kept(cloud: Any, skipping: set[str], replacing: set[str]) -> None:
    """A cap's modes: in skip mode every job refused a slot ends NOOP with its reason, naming a holder of its key, and
    none waits for a slot unless its key is paused; in replace mode every job replaced names a newer request of its
    key (by when each was accepted, then by id), so the newest is kept. (A request it displaced while waiting ends
    NOOP when its message comes back, within the cap's recheck: until then it is listed under SCHEDULED.)"""
    if not skipping and not replacing:
        return
    operations = operations_now(cloud)
    wrong_skips = []
    for op in sorted(skipping & set(operations)):
        operation = operations[op][0]
        holds = [e.reason for e in operation.history if e.reason.startswith("concurrency ")]
        if any("paused by" not in reason for reason in holds):
            wrong_skips.append(f"{op} waited for a slot in skip mode: {holds[-1]}")
        if operation.state is _S.NOOP:
            reason = operation.history[-1].reason if operation.history else ""
            holder = reason.rpartition("held by ")[2].split(", ")[0]
            if not reason.startswith("skipped: concurrency ") or holder not in skipping or holder == op:
                wrong_skips.append(f"{op} NOOP without a holder of its key named: {reason!r}")
    fail(SkippedWithoutReason, wrong_skips)

    def order(op: str) -> tuple[str, str]:
        history = operations[op][0].history
        accepted = next((e.at for e in history if e.state == _S.ACCEPTED.value), "")
        return accepted, op

    wrong_replaces = []
    for op in sorted(replacing & set(operations)):
        operation = operations[op][0]
        reason = operation.history[-1].reason if operation.history else ""
        if operation.state is not _S.NOOP or not reason.startswith("replaced by "):
            continue
        newer = reason[len("replaced by ") :].split(" ")[0]
        if newer not in replacing or newer not in operations:
            wrong_replaces.append(f"{op} replaced by {newer}, not a request of its key")
        elif order(newer) <= order(op):
            wrong_replaces.append(f"{op} (accepted {order(op)[0]}) replaced by the older {newer} ({order(newer)[0]})")
    fail(OlderReplacedNewer, wrong_replaces)


def limits_kept(cloud: Any, faults: FaultInjector, limited: set[str], limiter: Any) -> None:
    """No window of one period holds more starts of the limited jobs than `limit + burst` and the late returns
    within the grace (`grace / interval`, rounded up); no held job that never started is dead-lettered; every one
    waiting is listed under SCHEDULED, with its run_at. A start is one call the partner took (an e-mail in SES, by
    its operation and emulated time: one delivery's call, however often the SDK sent it)."""
    if not limited:
        return
    starts = sorted({(seen.at, seen.operation_id) for seen in faults.effects_seen if seen.operation_id in limited})
    allowed = limiter.limit + limiter.burst + math.ceil(limiter.grace / limiter.interval)
    crowded = []
    # A key released (a raced key's, as an operator's release) forgets its pace, jobs held keep their slots: starts
    # beside them are the release's, not a break
    for index, (at, _) in enumerate(starts if not faults.limiter_keys_released else []):
        window = [operation for when, operation in starts[index:] if when < at + limiter.period]
        if len(window) > allowed:
            crowded.append(f"{len(window)} starts in {limiter.period:g} s from {at:.0f} (at most {allowed}): {window}")
    fail(LimitExceeded, crowded[:1])
    operations = operations_now(cloud)
    held = {
        operation_id
        for operation_id in limited
        if operation_id in operations
        and any("rate limited by" in entry.reason for entry in operations[operation_id][0].history)
    }
    held_jobs_kept(cloud, operations, limited, held, (ThrottledJobDeadLettered, ThrottledJobUnlisted))


def reservations_kept(faults: FaultInjector) -> None:
    """No delivery that a raced limiter key alone met was handed back: a reservation follows its key through another
    worker's reservation and an operator's release between its writes (docs/flow-control.md)."""
    fail(ReservationFailed, [f"{op}: handed back by its worker, its limiter key moved" for op in faults.races_failed])


def charged_once(cloud: Any, faults: FaultInjector, alone: set[str], limiter: Any) -> None:
    """Each of `alone` (a job under `limiter` and another limiter, the only operation of its key on `limiter`) is
    never held by `limiter` before it first started, unless a fault met it: nothing but its own units is on that key
    then, and those it took while the other limiter held it were given back (docs/flow-control.md: charged once on
    each limiter for a run). A copy of its message (a replayed dispatch, a second delivery) may spend units unused,
    and a retry takes its units again: a fault met it, and it is not checked."""
    operations = operations_now(cloud)
    twice = []
    for operation_id in sorted(alone):
        met = faults.operations.get(operation_id)
        if operation_id not in operations or (met is not None and met.injected):
            continue
        history = operations[operation_id][0].history
        if len(history) >= HISTORY_LIMIT:
            # A receipt keeps its first entry and its latest ones (docs/how-it-works.md): past the limit, a hold after
            # ACCEPTED may follow a start the record no longer shows (a run's 429, then its retry held by its own
            # run's units), so the receipt cannot tell a first hold from a retry's
            continue
        for entry in history:
            if entry.state == _S.IN_PROGRESS.value:
                break  # started: a retry takes its units again, and may wait for its own run's
            if entry.reason.startswith(f"rate limited by {limiter.name} "):
                twice.append(f"{operation_id} held by its own key's units, never started: {entry.reason}")
                break
    fail(ChargedTwice, twice[:1])


# -- signals: a step that waits for one (`ctx.wait_for`) -----------------------------------------------------------


class WaitResumedTwice(Broken):
    """A wait for a signal was resumed by more than one outcome (a signal and its timeout, or two signals)."""


class WaitOutcomeUnrecorded(Broken):
    """A wait resumed by an outcome its signal item does not hold (the receipt would say otherwise)."""


class SignalLost(Broken):
    """A signal answered as kept is not the wait's, or one answered as refused is not listed on the wait."""


class SignalWokeUnsent(Broken):
    """A signal answered `woke` (the operation resumes now) when no message could go out to wake it."""


def woke_only_when_sent(receipt: Any, sent: bool) -> None:
    """A signal's answer says it woke the operation only when the wake's message could be sent (`sent`: whether
    the queue took messages while it was sent)."""
    if receipt.woke and not sent:
        fail(SignalWokeUnsent, [f"{receipt.operation_id}: {receipt.signal_id} answered woke ({receipt.detail})"])


class SignalItemMisanswered(Broken):
    """A signal item not answered once the relay read every write, answered but not listed when it was not kept, or
    answered `invalid` when it was a signal (or the other way round, for one forged as a request)."""


@dataclass(frozen=True)
class SentSignal:
    """A signal the explorer sent, and what it was answered."""

    operation_id: str
    signal_id: str
    answer: str
    decisions: tuple[str, ...] = ()
    """The decisions it may have carried (its payloads): the wait holds one of them when it was accepted."""


@dataclass(frozen=True)
class SignalItemSent:
    """A signal item the explorer wrote into the jobs table (`producer_signals_by_item`)."""

    key: str
    decision: str
    how: str


def signal_items_answered(cloud: Any, items: Iterable[SignalItemSent], settled: bool = False) -> list[SentSignal]:
    """Each signal item written, as the record under its key answers it (the first answer stands), for the checks
    every way in shares (`signals_kept`); one not kept is REJECTED and listed; one only ever forged as a request is
    `invalid`, one never forged never is. `settled` (the relay has read every write): every item is answered."""
    table = dynamodb_backends[ACCOUNT_ID][cloud.clients.region].tables[cloud.outputs["StateTableName"]]
    written: dict[str, list[SignalItemSent]] = {}
    for each in items:
        written.setdefault(each.key, []).append(each)
    listed = listed_now(cloud)(_S.REJECTED) if written else set()
    found, wrong, unshown = [], [], []
    for key, writes in written.items():
        stored = table.get_item(DynamoType({"S": key}))
        if stored is None:
            if settled:
                wrong.append(f"{key}: written, never answered")
            continue
        attributes = stored.to_json()["Attributes"]
        record = record_from_item(attributes)
        answer = record.history[-1].reason.split(":", 1)[0] if record.history else "(no answer)"
        unshown.extend(_answers_not_shown_once(key, attributes))
        # The first answer stands: one write of the item (the first the relay read) is answered on the record
        forged = {each.how == "forged as a request" for each in writes}
        if (answer == INVALID_ITEM and forged == {False}) or (answer != INVALID_ITEM and forged == {True}):
            wrong.append(f"{key}: answered {answer!r} ({', '.join(each.how for each in writes)})")
        if record.state is _S.REJECTED and key not in listed:
            wrong.append(f"{key}: answered {answer!r}, REJECTED but not listed")
        if answer == INVALID_ITEM:
            continue
        parsed = parse_signal_item(key)
        found.append(SentSignal(parsed.operation_id, parsed.signal_id, answer, tuple(w.decision for w in writes)))
    fail(SignalItemMisanswered, wrong)
    fail(ReceiptInconsistent, unshown)
    return found


def _answers_not_shown_once(key: str, attributes: dict[str, Any]) -> list[str]:
    """What `converge ops show` of a signal item's record (its view: the current error apart, then the others) does
    not show exactly once of the answers stored on it: its first (the error, when it was not kept) and each rewrite's
    (its errors)."""
    view = operation_from_records(key, None, attributes).to_json()
    shown = ([view["last_error"]] if view["last_error"] is not None else []) + [e["error"] for e in view["errors"]]
    stored = [entry["M"]["error"]["S"] for entry in attributes.get("errors", {}).get("L", [])]
    if sorted(shown) == sorted(stored):
        return []
    return [f"{key}: its answers {stored} shown as {shown} (the error, then the others)"]


def signals_kept(
    converge: Any, approvals: Iterable[str], decided: Iterable[tuple[str, str]], sent: Iterable[SentSignal]
) -> None:
    """Each wait resumed at most once, by a signal or its timeout, as its signal item records; every signal kept
    (the wait's own, for good) or refused and listed, never dropped."""
    store = converge.operations.signals
    outcomes: dict[str, set[str]] = {}
    for operation_id, outcome in decided:
        outcomes.setdefault(operation_id, set()).add(outcome)
    fail(WaitResumedTwice, (f"{op}: resumed by {sorted(seen)}" for op, seen in outcomes.items() if len(seen) > 1))
    unrecorded = []
    for operation_id in approvals:
        seen = outcomes.get(operation_id)
        if not seen:
            continue
        item = store.get(operation_id, "approval")
        recorded = None if item is None else ("timeout" if item.timed_out else f"signal:{item.signal_id}")
        if recorded not in seen:
            unrecorded.append(f"{operation_id}: resumed by {sorted(seen)}, its item holds {recorded}")
    fail(WaitOutcomeUnrecorded, unrecorded)
    lost = []
    for each in sent:
        item = store.get(each.operation_id, "approval")
        holds = item is not None and not item.timed_out and item.signal_id == each.signal_id
        if each.answer in ("accepted", "duplicate") and not holds:
            lost.append(f"{each.operation_id}: {each.signal_id} answered {each.answer}, the wait holds {item}")
        kept = item.payload.get("decision") if item is not None else None
        if each.answer == "accepted" and each.decisions and holds and kept not in each.decisions:
            lost.append(f"{each.operation_id}: {each.signal_id} accepted with {each.decisions}, the wait holds {kept}")
        if each.answer == "refused":
            listed = item is not None and (
                each.signal_id in {r.signal_id for r in item.refused} or item.refused_dropped > 0
            )
            if holds or not listed:
                lost.append(f"{each.operation_id}: {each.signal_id} refused but not listed on its wait")
    fail(SignalLost, lost)


# -- debounce: a burst of requests for one key, one run with the newest payload (docs/flow-control.md) -------------


class OlderPayloadRan(Broken):
    """A debounced request started from a payload older than one of its key that had started before it."""


class DebouncedIntoNothing(Broken):
    """A debounced request ended NOOP naming no newer request of its key (the newest one, or garbage)."""


class DebounceLate(Broken):
    """A debounced request was held to start later than `max_wait` after its burst's first request."""


class DebouncedJobDeadLettered(Broken):
    """A debounced request, never started, reached a DLQ."""


class DebouncedJobUnlisted(Broken):
    """A debounced request waiting for its burst is not listed under SCHEDULED with its start (nor STUCK, overdue)."""


_BURST = re.compile(r"^debounced \(.*a burst since (\S+), newest \S+\); starts by (\S+)$")
_INTO = re.compile(r"^debounced into (\S+)$")


def debounce_kept(
    cloud: Any,
    debounced: dict[str, tuple[str, float]],
    refreshes: list[tuple[str, int | str, int, float]],
    max_wait: float,
) -> None:
    """Of the debounced requests (`debounced`: operation id -> (key, order: its version, or its edit time's, a
    malformed time's the oldest)): their runs started in their payloads' order per key (each request's first start,
    from the runner's notes: an older payload never starts after a newer one did); each that ended NOOP names a newer
    request of its key; none was held to start later than `max_wait` after its burst's first request (its receipt's
    holds); none that never started is dead-lettered; every one waiting is listed under SCHEDULED with its start."""
    if not debounced:
        return
    first_starts: dict[str, float] = {}
    for operation_id, _, _, at in refreshes:
        first_starts.setdefault(operation_id, at)
    older = []
    latest: dict[str, tuple[float, str]] = {}
    for operation_id, _ in sorted(first_starts.items(), key=lambda item: item[1]):
        if operation_id not in debounced:
            continue
        key, version = debounced[operation_id]
        before = latest.get(key)
        if before is not None and (version, operation_id) < before:
            older.append(f"{operation_id} (order {version:g}) started after {before[1]} (order {before[0]:g})")
        latest[key] = max(before or (version, operation_id), (version, operation_id))
    fail(OlderPayloadRan, older[:1])
    operations = operations_now(cloud)
    into_nothing, late = [], []
    for operation_id, (key, version) in debounced.items():
        if operation_id not in operations:
            continue
        operation = operations[operation_id][0]
        for entry in operation.history:
            held = _BURST.match(entry.reason)
            if held is not None:
                since, starts = (parse_instant("held", value) for value in held.groups())
                if starts - since > max_wait + 0.001:
                    late.append(f"{operation_id} held to {held.group(2)}, its burst's first at {held.group(1)}")
        last = operation.history[-1] if operation.history else None
        into = _INTO.match(last.reason) if last is not None and operation.state is _S.NOOP else None
        if into is not None:
            run = debounced.get(into.group(1))
            if run is None or run[0] != key or (run[1], into.group(1)) <= (version, operation_id):
                into_nothing.append(f"{operation_id} (order {version:g}) {last.reason if last else ''}")
    fail(DebouncedIntoNothing, into_nothing[:1])
    fail(DebounceLate, late[:1])
    held = {op for op in debounced if op in operations}
    kinds = (DebouncedJobDeadLettered, DebouncedJobUnlisted)
    held_jobs_kept(cloud, operations, debounced, held, kinds, held_as="debounced")
