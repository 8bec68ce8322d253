"""Property-based schedules: random interleavings of deliveries, duplicates, crashes and faults, then the invariants.

Each example resets the module's local cloud, enqueues a few operations of the chosen policy, plans
faults for them (crashes after the effect, second receipts during it, lost responses, replayed
dispatches, throttling, failed SendMessageBatch entries, leases expiring under their holder, a
Lambda timing out mid-batch, an SSM outage), sometimes re-enqueues or replays an operation after
it settled, and lets everything converge. Then every invariant must hold (`Chaos.check`).

Examples are derandomized (the same on every run); a failure prints the falsifying schedule.
"""

from __future__ import annotations

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
SETTINGS = settings(
    deadline=None,
    derandomize=True,
    print_blob=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
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


@settings(SETTINGS, max_examples=45)
@given(schedule=schedules(EFFECT_THEN_CLAIM))
def test_email_jobs_send_at_least_once_and_duplicate_only_inside_the_window(chaos: Chaos, schedule: dict) -> None:
    run(chaos, schedule)


@settings(SETTINGS, max_examples=45)
@given(schedule=schedules(CLAIM_THEN_EFFECT))
def test_money_moves_exactly_once_or_waits_as_unknown(chaos: Chaos, schedule: dict) -> None:
    run(chaos, schedule)


@settings(SETTINGS, max_examples=35)
@given(schedule=schedules(KEYED_EFFECT))
def test_keyed_objects_land_on_one_key_per_operation(chaos: Chaos, schedule: dict) -> None:
    run(chaos, schedule)


@settings(SETTINGS, max_examples=45)
@given(schedule=schedules(EFFECT_THEN_CLAIM + CLAIM_THEN_EFFECT + KEYED_EFFECT))
def test_mixed_batches_converge(chaos: Chaos, schedule: dict) -> None:
    run(chaos, schedule)
