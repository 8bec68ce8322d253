"""Load under faults: a few hundred mixed jobs with about 5% injected faults, nothing lost, every invariant held.

The 10,000-job run is `converge demo --chaos --jobs 10000`; this is its small sibling, so CI stays fast.
"""

from __future__ import annotations

import random
import time

import boto3
import pytest

from catalogue.ledger import LedgerMode
from converge.model.clock import FakeClock
from converge.model.records import Lease, Refused, Subject
from converge.model.request import JobRequest
from converge.model.states import OperationState
from converge.store.markers import MarkerStore
from converge.store.operations import OperationStore
from converge_cli.commands.demo_chaos import FAULT_RATES
from localcloud.faults import FaultKind
from localcloud.invariants import operations_in
from localcloud.speedups import fast_moto
from localcloud.timed_workload import run_timed
from tests.conftest import REGION

from .conftest import Chaos

JOBS = 400
LEDGER = "ledger.partner-benefits.v1"


def test_hundreds_of_jobs_under_faults_lose_nothing(chaos: Chaos) -> None:
    # Given about 5% of the jobs hit by a fault of some kind, and one wave with a ledger that cannot be asked
    for kind, (probability, options) in FAULT_RATES.items():
        chaos.faults.rate(FaultKind(kind), probability, **options)
    started = time.perf_counter()
    enqueued = chaos.workload.enqueue_mix(JOBS - 50, "load")
    chaos.workload.drain()
    chaos.ledger_mode(LedgerMode.NONE)
    chaos.workload.enqueue_mix(50, "load", enqueued)
    chaos.workload.drain()
    chaos.ledger_mode(LedgerMode.DEDUP)
    # ...and delayed, cancelled and expiring jobs, their one-time schedules firing twice half the time
    chaos.cloud.one_time_schedules.duplicate_rate = 0.5
    try:
        timed = run_timed(chaos.workload, 30, "load", random.Random(3))
    finally:
        chaos.cloud.one_time_schedules.duplicate_rate = 0.0
    # When everything has settled
    chaos.settle()
    seconds = time.perf_counter() - started
    # Then every invariant holds, for every operation enqueued, the time and flow ones included
    report = chaos.check([*enqueued.operation_ids, *timed.delayed, *timed.cancelled, *timed.expiring])
    assert report.check("time_and_flow").holds and timed.cancelled and timed.expiring and timed.delayed
    assert report.operations[OperationState.CANCELLED.value] == len(timed.cancelled)
    assert report.operations[OperationState.EXPIRED.value] == len(timed.expiring)
    # And beside them, one partner's notice (the money job's continuation) per credit that SUCCEEDED, and no other
    stored = [operation for operation, _ in operations_in(chaos.cloud).values()]
    credited = {op.operation_id for op in stored if op.job_type == LEDGER and op.state is OperationState.SUCCEEDED}
    notices = [op for op in stored if op.parent_id is not None]
    assert sorted(op.parent_id for op in notices) == sorted(credited)
    assert all(op.operation_id == f"{op.parent_id}:next" for op in notices)
    assert sum(report.operations.values()) == JOBS + len(timed) + len(notices)
    assert report.operations[OperationState.SUCCEEDED.value] > JOBS * 0.7
    assert chaos.faults.total >= JOBS * 0.02, chaos.faults.counts
    print(
        f"\n{JOBS} jobs in {seconds:.1f} s ({JOBS / seconds:.1f} jobs/s); faults {dict(chaos.faults.counts)}; "
        f"states {dict(report.operations)}; effects {report.effects}"
    )


def test_the_moto_shortcuts_change_nothing_but_speed(tables: dict[str, str]) -> None:
    # Given moto's serializer and the shortcut run side by side on every item operation converge uses
    client = boto3.client("dynamodb", region_name=REGION)
    clock = FakeClock()
    operations = OperationStore(tables["jobs"], tables["state"], client, clock=clock)
    markers = MarkerStore(tables["markers"], client, clock)
    with fast_moto(verify=True):
        # When converge admits, reads, leases, settles, refuses, lists and claims (each raises on a mismatch)
        admitted = operations.admit(
            JobRequest("op-1", "email.password-reset.v1", {"user_id": "u-1", "n": 3}, "c-1")
        ).operation
        operations.admit(JobRequest("op-1", "email.password-reset.v1", {"user_id": "u-1", "n": 3}, "c-1"))
        subject = Subject("op-1", "email.password-reset.v1", admitted.request.fingerprint)
        lease = operations.state.acquire(subject, "w-1", 30)
        assert isinstance(lease, Lease)
        with pytest.raises(Refused):  # the failed write raises with the record
            operations.state.acquire(subject, "w-2", 30)
        assert operations.state.settle(lease, OperationState.FAILED, "boom", error="boom") is None
        with pytest.raises(Refused):
            operations.state.settle(lease, OperationState.SUCCEEDED, "late")
        assert [row["operation_id"] for row in operations.listings.iter_attention(OperationState.FAILED)] == ["op-1"]
        assert markers.claim_step("op-1", "charge", 0, "claim_then_effect", "a") is None
        assert markers.claim_step("op-1", "charge", 0, "claim_then_effect", "b") is not None
        assert markers.release_step("op-1", "charge")
        client.transact_write_items(
            TransactItems=[
                {
                    "Put": {
                        "TableName": tables["markers"],
                        "Item": {"pk": {"S": "t"}, "sk": {"S": "t"}, "b": {"B": b"\x00"}},
                    }
                }
            ]
        )
        assert client.scan(TableName=tables["markers"])["Count"] == 1
        # And a cancelled transaction leaves every item it named as it was (the rollback shortcut)
        put = {
            "TableName": tables["markers"],
            "Item": {"pk": {"S": "t"}, "sk": {"S": "t"}},
            "ConditionExpression": "attribute_not_exists(pk)",
        }
        add = {
            "TableName": tables["markers"],
            "Key": {"pk": {"S": "balance"}, "sk": {"S": "count"}},
            "UpdateExpression": "ADD amount :one",
            "ExpressionAttributeValues": {":one": {"N": "1"}},
        }
        client.transact_write_items(TransactItems=[{"Update": add}])
        with pytest.raises(client.exceptions.TransactionCanceledException):
            client.transact_write_items(TransactItems=[{"Put": put}, {"Update": add}])
        balance = client.get_item(TableName=tables["markers"], Key={"pk": {"S": "balance"}, "sk": {"S": "count"}})[
            "Item"
        ]
        assert balance["amount"] == {"N": "1"}
        assert client.scan(TableName=tables["markers"])["Count"] == 2
    # Then the two encodings agreed on every response
    assert operations.require("op-1").state is OperationState.FAILED
