"""Property-based schedules: random interleavings of deliveries, duplicates, crashes and faults, then the invariants.

Each example resets the module's local cloud, enqueues a few operations of the chosen policy, plans
faults for them (crashes after the effect, second receipts during it, lost responses, replayed
dispatches, throttling, failed SendMessageBatch entries, leases expiring under their holder, a
Lambda timing out mid-batch, an SSM outage), sometimes re-enqueues or replays an operation after
it settled, and lets everything converge. Then every invariant must hold (`Chaos.check`).

In the test command the examples are derandomized (the same on every run: 95 schedules over the four
tests); `make faults` runs random ones at length (SCHEDULE_EXAMPLES per test, from a seed it prints).
A failure prints the falsifying schedule.
"""

from __future__ import annotations

import os
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from catalogue import examples
from catalogue.ledger import LedgerMode
from converge.model.states import OperationState
from localcloud.faults import FaultKind

from .conftest import Chaos

EFFECT_THEN_CLAIM = [
    ("email.partner-verification.v1", {"user_id": examples.UNCONFIRMED_USER}),
    ("email.partner-verification.v1", {"user_id": examples.CONFIRMED_USER}),
    ("email.password-reset.v1", {"user_id": examples.CONFIRMED_USER}),
    ("email.password-reset.v1", {"user_id": examples.DELETED_USER}),
]
CLAIM_THEN_EFFECT = [
    ("ledger.partner-benefits.v1", {"partner_id": examples.PARTNER, "amount_cents": 2500, "benefit": "referral"}),
    ("ledger.partner-benefits.v1", {"partner_id": examples.SECOND_PARTNER, "amount_cents": 90, "benefit": "promo"}),
]
KEYED_EFFECT = [
    ("partner-docs.upload.v1", {"partner_id": examples.PARTNER, "upload_id": examples.UPLOAD}),
    ("ads.image-process.v1", {"ad_id": examples.PENDING_AD}),
    ("pdf.cv.v1", {"profile_id": examples.PROFILE}),
]
PER_OPERATION_FAULTS = [
    FaultKind.CRASH_AFTER_EFFECT,
    FaultKind.CONCURRENT_DELIVERY,
    FaultKind.LOST_RESPONSE,
    FaultKind.DISPATCH_REPLAY,
    FaultKind.DYNAMODB_THROTTLE,
    FaultKind.SEND_BATCH_PARTIAL,
    FaultKind.LEASE_EXPIRY,
]
MIN_MAX_RECEIVE_COUNT = 3
"""The template's smallest maxReceiveCount (the bulk queue)."""
AT_LENGTH = int(os.environ.get("SCHEDULE_EXAMPLES") or 0)
"""Examples per test under `make faults` (random, from the seed it passes); 0: the test command's bounded set."""


def bounded(examples: int) -> settings:
    """The test command's derandomized `examples` (about a second each), or `make faults`' random ones."""
    return settings(
        deadline=None,
        derandomize=not AT_LENGTH,
        max_examples=AT_LENGTH or examples,
        print_blob=True,
        suppress_health_check=[HealthCheck.too_slow],
    )


def schedules(jobs: list[tuple[str, dict[str, Any]]]) -> st.SearchStrategy[dict[str, Any]]:
    operation = st.fixed_dictionaries(
        {
            "job": st.sampled_from(jobs),
            "faults": st.lists(st.tuples(st.sampled_from(PER_OPERATION_FAULTS), st.integers(1, 2)), max_size=3),
            "enqueue_twice": st.booleans(),
            "replay_after": st.booleans(),
        }
    )
    return st.fixed_dictionaries(
        {
            "operations": st.lists(operation, min_size=1, max_size=4),
            "timeout": st.sampled_from([None, None, "soft", "hard"]),
            "ssm_outage": st.sampled_from([0, 0, 0, 90]),
            "cold_start": st.booleans(),
            "ledger_mode": st.sampled_from([LedgerMode.DEDUP, LedgerMode.DEDUP, LedgerMode.NONE]),
            "seed": st.integers(0, 2**16),
        }
    )


def run(chaos: Chaos, schedule: dict[str, Any]) -> None:
    # Given a clean cloud and the schedule's operations, with their faults planned
    chaos.reset(schedule["seed"])
    chaos.ledger_mode(schedule["ledger_mode"])
    if schedule["cold_start"]:
        chaos.cloud.runtime.cold_start()
    ids = []
    for index, planned in enumerate(schedule["operations"]):
        job_type, payload = planned["job"]
        operation_id = f"op-{index}"
        ids.append(chaos.enqueue(job_type, operation_id, payload))
        if planned["enqueue_twice"]:
            chaos.enqueue(job_type, operation_id, payload)  # the same content again: the same operation
        for kind, times in planned["faults"]:
            chaos.faults.plan(kind, operation_id, times=times)
    if schedule["timeout"]:
        chaos.faults.plan(FaultKind.LAMBDA_TIMEOUT, hard=schedule["timeout"] == "hard")
    if schedule["ssm_outage"]:
        chaos.faults.ssm_outage(schedule["ssm_outage"])
    # When everything runs, and some dispatches are replayed after the work was done
    chaos.settle()
    replays = [operation_id for operation_id, p in zip(ids, schedule["operations"], strict=True) if p["replay_after"]]
    for operation_id in replays:
        chaos.faults.replay_dispatch(operation_id)
    if replays:
        chaos.settle()
    # Then every invariant holds. An operation is left open only when every receive of it failed and
    # SQS moved its message to the DLQ: a crash fails its whole batch, so batch-mates' crashes count too.
    report = chaos.check(ids)
    for operation_id in ids:
        state = chaos.operation(operation_id).state
        if state in (OperationState.ACCEPTED, OperationState.IN_PROGRESS):
            assert operation_id in report.dead_lettered_open, (operation_id, state)
            assert chaos.faults.total >= MIN_MAX_RECEIVE_COUNT


def features(schedule: dict[str, Any]) -> set[str]:
    """What a schedule plans, by name: each fault kind, the timeout's kind, an SSM outage, a cold start, a
    duplicate enqueue, a replay after completion, a ledger without deduplication."""
    found = {kind.value for planned in schedule["operations"] for kind, _ in planned["faults"]}
    found |= {name for name in ("enqueue_twice", "replay_after") if any(p[name] for p in schedule["operations"])}
    if schedule["timeout"]:
        found.add(f"timeout:{schedule['timeout']}")
    if schedule["ssm_outage"]:
        found.add("ssm_outage")
    if schedule["cold_start"]:
        found.add("cold_start")
    if schedule["ledger_mode"] is LedgerMode.NONE:
        found.add("ledger_without_dedup")
    return found


EVERY_FEATURE = {kind.value for kind in PER_OPERATION_FAULTS} | {
    "enqueue_twice",
    "replay_after",
    "timeout:soft",
    "timeout:hard",
    "ssm_outage",
    "cold_start",
    "ledger_without_dedup",
}


def explore(chaos: Chaos, jobs: list[tuple[str, dict[str, Any]]], examples: int) -> None:
    """Run the schedules of `jobs` (each must keep every invariant); then, in the test command, its fixed schedules,
    fewer than `make faults` runs, must still have planned every fault kind and every other feature at least once."""
    planned: set[str] = set()

    @bounded(examples)
    @given(schedule=schedules(jobs))
    def schedule_keeps_every_invariant(schedule: dict[str, Any]) -> None:
        run(chaos, schedule)
        planned.update(features(schedule))

    schedule_keeps_every_invariant()
    if not AT_LENGTH:  # the fixed set; at length, as few examples as asked for are run, whatever they plan
        assert planned == EVERY_FEATURE, f"never planned: {sorted(EVERY_FEATURE - planned)}"


def test_email_jobs_send_at_least_once_and_duplicate_only_inside_the_window(chaos: Chaos) -> None:
    explore(chaos, EFFECT_THEN_CLAIM, 25)


def test_money_moves_exactly_once_or_waits_as_unknown(chaos: Chaos) -> None:
    explore(chaos, CLAIM_THEN_EFFECT, 25)


def test_keyed_objects_land_on_one_key_per_operation(chaos: Chaos) -> None:
    explore(chaos, KEYED_EFFECT, 20)


def test_mixed_batches_converge(chaos: Chaos) -> None:
    explore(chaos, EFFECT_THEN_CLAIM + CLAIM_THEN_EFFECT + KEYED_EFFECT, 25)
