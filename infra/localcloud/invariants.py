"""The invariants a run must keep, checked from the emulated services, never from converge's word alone.

    report = check(cloud, faults=injector, expected=operation_ids)
    report.holds, report.to_json()

* effects, for a catalogue counted by resource (a team's: localcloud.effect_log): each operation's effects are
  those of a clean run of its job and payload, give or take what its faults allow (effect_invariants.py);
* effects, in the reference shape: per operation, from the effects ledger (SES messages, distinct S3 keys, ledger rows):
  - `claim_then_effect` and `keyed_effect`: exactly one for SUCCEEDED; for every other state at most
    one, and none unless a fault hit that operation's effect-to-claim window (or, for money, UNKNOWN);
  - `effect_then_claim`: at least one for SUCCEEDED, and at most (1 if SUCCEEDED else 0) plus the
    faults injected inside that operation's effect-to-claim window. Concurrent second receipts are
    *not* in the bound: the lease must absorb them. A lease that expires under its holder counts as a
    window fault, like a crash (the holder's lease outlives its Lambda's time, so only a holder past
    its deadline can lose it).
  - An operation that ends NOOP may carry effects from an attempt that crashed in the window: the
    next attempt found the work already done (e.g. the ad row marked processed).
  - A job of steps whose job policy is not `effect_then_claim` but which e-mails in an `effect_then_claim`
    step (the reference CV's link) sends at most one e-mail plus the faults injected in its window, and
    none once it ended CANCELLED or EXPIRED (time and flow); its other effect is counted by its job policy.
* no operation lost: each ends SUCCEEDED, NOOP, UNKNOWN, PAUSED, FAILED with its message in a DLQ,
  or REJECTED with a reason. An operation left open (ACCEPTED/IN_PROGRESS) is accepted only when its
  message sits in a DLQ (SQS moved it after maxReceiveCount before the worker could record FAILED)
  and, once the reconciler has run, it is listed under STUCK (`converge ops list --state STUCK`);
  it is reported as `dead_lettered_open`.
* every UNKNOWN operation is in the operator's attention listing (`converge ops list --state UNKNOWN`).
* every effect names an operation that exists; every stored receipt ends in the operation's state.
* time and flow (time_invariants.py): nothing started before its run_at; no CANCELLED or EXPIRED
  operation ever started or had an effect; each is listed under its state.
* a producer's rewrites: with other content, the operation keeps the content first written (its
  fingerprint; for money, every ledger row credits the original amount) and is listed under CONFLICT;
  with the same content or with attributes converge owns, it is never listed under CONFLICT.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from moto.dynamodb.models import dynamodb_backends
from moto.sqs.models import sqs_backends

from converge.flow.registry import Policy, Registry
from converge.model.records import HISTORY_LIMIT, Operation
from converge.model.request import fingerprint
from converge.model.signals import signal_form
from converge.model.states import Flag, OperationState
from converge.store.codecs import operation_from_records
from converge.store.operations import OperationStore

from . import effects as effects_ledger
from .checks import SHOWN_VIOLATIONS, Check
from .clients import ACCOUNT_ID
from .effect_invariants import effects_as_a_clean_run
from .time_invariants import time_and_flow

if TYPE_CHECKING:
    from .faults import OperationLog

SETTLED = frozenset(
    {
        OperationState.SUCCEEDED,
        OperationState.NOOP,
        OperationState.UNKNOWN,
        OperationState.PAUSED,
        OperationState.CANCELLED,
        OperationState.EXPIRED,
    }
)
OPEN = frozenset({OperationState.ACCEPTED, OperationState.SCHEDULED, OperationState.IN_PROGRESS})
BLIND_APPENDS = 10
"""History entries writes that know nothing may add beyond the limit before the next knowing write trims them."""


@dataclass
class InvariantReport:
    checks: list[Check]
    operations: Counter[str]
    effects: dict[str, int]
    dead_lettered_open: list[str] = field(default_factory=list)
    window_faults: int = 0
    rejected: Counter[str] = field(default_factory=Counter)
    """REJECTED operations by "<job type>: <reason>", as their receipts give it."""
    lister: Callable[[str], set[str]] = field(default=lambda _state: set(), repr=False)
    """How the run's attention listings were read (`converge ops list --state ...`)."""

    @property
    def holds(self) -> bool:
        return all(check.holds for check in self.checks)

    def check(self, name: str) -> Check:
        return next(check for check in self.checks if check.name == name)

    def failures(self) -> list[str]:
        return [f"{c.name}: {v}" for c in self.checks if not c.holds for v in c.violations[:SHOWN_VIOLATIONS]]

    def to_json(self) -> dict[str, Any]:
        return {
            "invariants_hold": self.holds,
            "checks": [check.to_json() for check in self.checks],
            "operations": dict(sorted(self.operations.items())),
            "effects": dict(self.effects),
            "dead_lettered_open": len(self.dead_lettered_open),
            "window_faults": self.window_faults,
            "rejected": dict(sorted(self.rejected.items())),
        }


def operations_in(cloud: Any) -> dict[str, tuple[Operation, dict[str, Any]]]:
    """Every operation (request and state record joined), with its raw state item ({} when it has none).

    A scan of both tables: a test's and a report's view, never something converge itself does.
    """
    return _joined(_scan(cloud, "JobsTableName"), _scan(cloud, "StateTableName"))


def operations_stored(
    cloud: Any, keep: Callable[[str], bool] | None = None
) -> dict[str, tuple[Operation, dict[str, Any]]]:
    """`operations_in`, read straight from moto's tables in this process rather than scanned through the API (a check
    after every step of a history reads them hundreds of times a minute); only the ids `keep` takes, if given."""
    return _joined(stored_items(cloud, "JobsTableName", keep), stored_items(cloud, "StateTableName", keep))


def _joined(
    requests: dict[str, dict[str, Any]], states: dict[str, dict[str, Any]]
) -> dict[str, tuple[Operation, dict[str, Any]]]:
    """Each operation's request and state record joined, with its raw state item ({} when it has none)."""
    return {
        operation_id: (
            operation_from_records(operation_id, requests.get(operation_id), states.get(operation_id)),
            states.get(operation_id, {}),
        )
        for operation_id in {*requests, *states}
        if not signal_form(operation_id)  # a signal item and its answer: no operation (docs/signals.md)
    }


def stored_items(cloud: Any, output: str, keep: Callable[[str], bool] | None = None) -> dict[str, dict[str, Any]]:
    """The items of a table of the deployment's (`output`: its name's output) by operation id, straight from moto's
    backend in this process; only the ids `keep` takes, if given."""
    table = dynamodb_backends[ACCOUNT_ID][cloud.clients.region].tables[cloud.outputs[output]]
    items = (stored.to_json()["Attributes"] for stored in table.all_items())
    return {item["operation_id"]["S"]: item for item in items if keep is None or keep(item["operation_id"]["S"])}


def _scan(cloud: Any, output: str) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    paginator = cloud.client("dynamodb").get_paginator("scan")
    for page in paginator.paginate(TableName=cloud.outputs[output], ConsistentRead=True):
        for item in page.get("Items", []):
            found[item["operation_id"]["S"]] = item
    return found


def dead_lettered(cloud: Any) -> Counter[str]:
    """Operation ids of the messages now in a DLQ (or the relay's failure queue), read from moto."""
    names = [
        url.rsplit("/", 1)[-1] for key, url in cloud.outputs.items() if key.endswith(("DlqUrl", "FailureQueueUrl"))
    ]
    queues = sqs_backends[ACCOUNT_ID][cloud.clients.region].queues
    found: Counter[str] = Counter()
    for name in names:
        queue = queues.get(name)
        if queue is None:
            continue
        for message in list(queue._messages):
            found[_message_operation(message)] += 1
    return found


def _message_operation(message: Any) -> str:
    attribute = message.message_attributes.get("operation_id") or {}
    value = attribute.get("StringValue") or attribute.get("string_value")
    if value:
        return str(value)
    try:
        body = json.loads(message.body)
    except (ValueError, RecursionError):
        return "(not JSON)"
    if isinstance(body, dict) and "DDBStreamBatchInfo" in body:
        return "(relay failure record)"  # names shard and sequence numbers, not operations
    if isinstance(body, dict):
        return str(body.get("operation_id", "(no operation id)"))
    return "(no operation id)"


def attention_lister(cloud: Any) -> Callable[[str], set[str]]:
    """UNKNOWN (or other attention) operation ids exactly as `converge ops list` pages them."""

    def listed(state: str) -> set[str]:
        store = OperationStore(
            cloud.outputs["JobsTableName"],
            cloud.outputs["StateTableName"],
            cloud.client("dynamodb"),
            attention_index=cloud.outputs["AttentionIndexName"],
            conflict_index=cloud.outputs["ConflictIndexName"],
        )
        return {str(row["operation_id"]) for row in store.listings.iter_attention(state)}

    return listed


def _rejection(operation: Operation) -> str:
    """What a REJECTED operation's receipt says, without what differs between two of a kind (the hint after it)."""
    reason = (operation.last_error or "no reason recorded").split(" (", 1)[0]
    return f"{operation.job_type}: {reason[:160]}"


def check(
    cloud: Any,
    faults: Any = None,
    expected: Iterable[str] | None = None,
    list_attention: Callable[[str], set[str]] | None = None,
    effects: effects_ledger.Effects | None = None,
    reconciled: bool = True,
    operations: dict[str, tuple[Operation, dict[str, Any]]] | None = None,
) -> InvariantReport:
    """Check every invariant of the module docstring; `faults` is the FaultInjector used, if any.

    `reconciled`: the reconciler has run since the last job did (so open operations must be listed STUCK).
    `effects` and `operations`: already counted and read (`operations_in`), for a caller that checks often.
    """
    operations = operations if operations is not None else operations_in(cloud)
    counted = effects if effects is not None else effects_ledger.count(cloud)
    in_dlq = dead_lettered(cloud)
    window = faults.window if faults is not None else (lambda _operation_id: 0)
    states = Counter(operation.state.value for operation, _ in operations.values())
    totals = (
        counted.totals()
        if counted.by_resource
        else {**counted.totals(), "s3_writes": sum(counted.object_writes.values())}
    )
    report = InvariantReport(checks=[], operations=states, effects=totals)
    report.window_faults = sum(window(operation_id) for operation_id in operations)
    report.rejected = Counter(
        _rejection(operation) for operation, _ in operations.values() if operation.state is OperationState.REJECTED
    )

    if counted.by_resource:
        report.checks.append(effects_as_a_clean_run(operations, counted, faults))
    else:
        report.checks += _reference_effects(cloud, operations, counted, window)
    _listed_and_consistent(report, cloud, operations, counted, expected, list_attention, reconciled, in_dlq)
    if faults is not None:
        report.checks.append(_producer_rewrites(faults, operations, counted, report.lister))
    return report


def _reference_effects(
    cloud: Any,
    operations: dict[str, tuple[Operation, dict[str, Any]]],
    counted: effects_ledger.Effects,
    window: Callable[[str], int],
) -> list[Check]:
    """Each operation's effects by its policy, in the reference shape (ses, s3, ledger)."""
    exactly_once, bounded = [], []
    for operation_id, (operation, _) in operations.items():
        policy = _policy(cloud.registry, operation.job_type)
        if policy is None:
            continue
        made = _effects_of(counted, operation_id, policy)
        allowed_window = window(operation_id)
        state = operation.state
        if policy is Policy.EFFECT_THEN_CLAIM:
            low = 1 if state is OperationState.SUCCEEDED else 0
            high = low + allowed_window
            if not low <= made <= high:
                bounded.append(f"{operation_id} {state.value}: {made} e-mails, allowed {low}..{high}")
        elif counted.emails.get(operation_id, 0) > 1 + allowed_window:  # an e-mail step of a job of steps
            emails = counted.emails[operation_id]
            bounded.append(
                f"{operation_id} {state.value}: {emails} e-mails from its steps, allowed 0..{1 + allowed_window}"
            )
        elif policy in (Policy.CLAIM_THEN_EFFECT, Policy.KEYED_EFFECT):
            if state is OperationState.SUCCEEDED:
                ok = made == 1
            elif state is OperationState.UNKNOWN and policy is Policy.CLAIM_THEN_EFFECT:
                ok = made <= 1
            else:
                ok = made <= min(1, allowed_window)
            if not ok:
                exactly_once.append(f"{operation_id} {state.value} ({policy.value}): {made} effects")
    return [
        Check(
            "exactly_once_effects",
            not exactly_once,
            "claim_then_effect and keyed_effect: one ledger row / distinct S3 key per SUCCEEDED operation, "
            "none otherwise (UNKNOWN money: at most one; a window fault may leave one behind a NOOP)",
            exactly_once,
        ),
        Check(
            "effect_then_claim_bounded",
            not bounded,
            "effect_then_claim: at least one e-mail per SUCCEEDED operation, at most one plus the faults "
            "injected in that operation's effect-to-claim window (concurrent receipts add none); an e-mail "
            "step of another job: at most one plus its window's faults",
            bounded,
        ),
    ]


def _listed_and_consistent(
    report: InvariantReport,
    cloud: Any,
    operations: dict[str, tuple[Operation, dict[str, Any]]],
    counted: effects_ledger.Effects,
    expected: Iterable[str] | None,
    list_attention: Callable[[str], set[str]] | None,
    reconciled: bool,
    in_dlq: Counter[str],
) -> None:
    """Nothing lost, every UNKNOWN listed, every effect naming an operation, every receipt consistent, time and flow."""
    lister = report.lister = list_attention or attention_lister(cloud)
    stuck = lister(Flag.STUCK) if reconciled else set()
    lost, unexplained_failures, unreasoned = [], [], []
    for operation_id, (operation, _) in operations.items():
        state = operation.state
        if state in SETTLED:
            continue
        if state is OperationState.FAILED and not in_dlq[operation_id]:
            unexplained_failures.append(f"{operation_id} FAILED but its message is in no DLQ")
        elif state is OperationState.REJECTED and not (operation.last_error or "").strip():
            unreasoned.append(f"{operation_id} REJECTED without a reason")
        elif state in OPEN:
            if not in_dlq[operation_id]:
                lost.append(f"{operation_id} still {state.value}, and its message is in no DLQ")
            elif reconciled and operation_id not in stuck:
                lost.append(f"{operation_id} still {state.value}, its message in a DLQ, but not listed STUCK")
            else:
                report.dead_lettered_open.append(operation_id)
    missing = [f"{operation_id} was enqueued but is not in the jobs table" for operation_id in expected or ()]
    missing = [m for m in missing if m.split(" ", 1)[0] not in operations]
    violations = missing + lost + unexplained_failures + unreasoned
    report.checks.append(
        Check(
            "no_operation_lost",
            not violations,
            "each operation ends SUCCEEDED, NOOP, UNKNOWN, PAUSED, FAILED with its message in a DLQ, or "
            f"REJECTED with a reason ({len(report.dead_lettered_open)} left open with their message in a DLQ)",
            violations,
        )
    )

    unknown = {operation_id for operation_id, (op, _) in operations.items() if op.state is OperationState.UNKNOWN}
    listed = lister(OperationState.UNKNOWN) if unknown else set()
    unlisted = sorted(unknown - listed)
    report.checks.append(
        Check(
            "unknown_listed",
            not unlisted,
            f"every UNKNOWN operation ({len(unknown)}) is listed by `converge ops list --state UNKNOWN`",
            [f"{operation_id} is UNKNOWN but not listed" for operation_id in unlisted],
        )
    )

    if counted.by_resource:  # effects made outside any operation (a producer's own function) name none
        per_resource = [
            (resource, Counter({op: units[resource] for op, units in counted.resources.units.items() if op}))
            for resource in counted.totals()
        ]
    else:
        per_resource = [
            ("ses", counted.emails),
            ("s3", Counter({k: len(v) for k, v in counted.object_keys.items()})),
            ("ledger", counted.ledger_rows),
        ]
    orphans = [
        f"{count} {service} effect(s) name no known operation ({operation_id})"
        for service, per_operation in per_resource
        for operation_id, count in per_operation.items()
        if operation_id not in operations and count
    ]
    receipts = [
        f"{operation_id}: state {operation.state.value} but history ends {operation.history[-1].state}"
        for operation_id, (operation, item) in operations.items()
        if "state" in item and operation.history and operation.history[-1].state != operation.state.value
    ]
    receipts += [
        f"{operation_id}: {len(operation.history)} history entries, more than {HISTORY_LIMIT} + one per delivery"
        for operation_id, (operation, _) in operations.items()
        if len(operation.history) > HISTORY_LIMIT + BLIND_APPENDS
    ]
    report.checks.append(
        Check(
            "receipts_consistent",
            not (orphans or receipts),
            "every effect names an existing operation; every stored history ends in its operation's state",
            orphans + receipts,
        )
    )

    report.checks.append(time_and_flow(operations, counted, lister))


def _producer_rewrites(
    faults: Any,
    operations: dict[str, tuple[Operation, dict[str, Any]]],
    counted: effects_ledger.Effects,
    lister: Callable[[str], set[str]],
) -> Check:
    """What a faulty producer's writes must leave: the original content run, other content refused and listed."""
    logs = {op: log for op, log in faults.operations.items() if log.original or log.rewrites or log.owned_attributes}
    conflicted = lister(Flag.CONFLICT) if logs else set()
    violations = []
    for operation_id, log in logs.items():
        entry = operations.get(operation_id)
        if entry is None:
            violations.append(f"{operation_id}: written by a faulty producer but no operation exists")
            continue
        operation, _ = entry
        other: list[Any] = [
            rewrite for rewrite in log.rewrites if log.original and (rewrite[1], rewrite[2]) != log.original
        ]
        if log.original_fingerprints:  # the options count: other times or another caller are other content
            other += [fp for fp in log.rewritten_fingerprints if fp != log.original_fingerprints[0]]
        admitted = log.original_fingerprints or ((fingerprint(*log.original),) if log.original else ())
        if admitted and operation.fingerprint not in (None, *admitted):
            violations.append(
                f"{operation_id}: runs other content than was first written ({_rewrites_told(operation, log)})"
            )
        if other and operation_id not in conflicted:
            violations.append(
                f"{operation_id}: other content written under its id, but not listed CONFLICT "
                f"({_rewrites_told(operation, log)})"
            )
        if not other and operation_id in conflicted:
            violations.append(f"{operation_id}: listed CONFLICT, but its producer only wrote its own content again")
        if log.original and "amount_cents" in log.original[1]:
            amount = int(log.original[1]["amount_cents"])
            wrong = [cents for cents in counted.ledger_amounts.get(operation_id, []) if cents != amount]
            if wrong:
                violations.append(f"{operation_id}: credited {wrong} instead of the original {amount}")
    return Check(
        "producer_rewrites_refused",
        not violations,
        f"{len(logs)} operations written by a faulty producer: the content first written is what ran; "
        "other content is refused and listed under CONFLICT; the same again, or converge's attributes, change nothing",
        violations,
    )


def _rewrites_told(operation: Operation, log: OperationLog) -> str:
    """What a rewrite violation needs to be read: the record's fingerprint and path, the content first written and
    each rewrite's (fingerprints cut to 12 characters)."""
    path = " > ".join(f"{entry.state} ({entry.reason})" for entry in operation.history)
    return (
        f"its record {str(operation.fingerprint)[:12]}, first written {[fp[:12] for fp in log.original_fingerprints]}, "
        f"rewrites {[fp[:12] for fp in log.rewritten_fingerprints]}; its path: {path}"
    )


def _policy(registry: Registry, job_type: str) -> Policy | None:
    return registry.get(job_type).policy if job_type in registry else None


def _effects_of(counted: effects_ledger.Effects, operation_id: str, policy: Policy) -> int:
    made = counted.for_operation(operation_id)
    if policy is Policy.EFFECT_THEN_CLAIM:
        return made["ses"]
    if policy is Policy.CLAIM_THEN_EFFECT:
        return made["ledger"]
    return made["s3"]
