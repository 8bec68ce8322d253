"""`converge demo --chaos`'s batches: one per wave, a producer dying mid-admission, and the batches' invariants.

Each test runs the catalogue's batch (the month's statements) through the local cloud as chaos does and checks the
invariants from the stored records; the last ones break a batch by hand, to show the check sees it.
"""

from __future__ import annotations

from converge.model.batches import BatchState, callback_id
from localcloud import effects, invariants
from localcloud.batch_workload import ChaosBatches
from localcloud.faults import FaultKind

from .conftest import Chaos


def run_batches(chaos: Chaos, waves: int) -> ChaosBatches:
    """Admit a batch per wave of 60 jobs (its producer dies in the second wave), one more left halfway, settle."""
    batches = ChaosBatches.of(chaos.cloud, chaos.workload.converge)
    assert batches is not None
    for wave in range(waves):
        batches.admit(wave, 60, "cb")
        chaos.workload.drain()
    batches.leave_one_stopped("cb")
    chaos.workload.drain()
    batches.outlive_stopped(chaos.cloud)
    chaos.workload.settle()
    return batches


def test_each_batch_completes_once_or_is_listed_and_the_producer_that_died_finishes_on_its_retry(chaos: Chaos) -> None:
    # Given three waves' batches under a crash after a statement's e-mail, and a producer dying in the second wave
    chaos.faults.rate(FaultKind.CRASH_AFTER_EFFECT, 0.2)
    # When they run and settle (the third wave's producer admits the second's batch again)
    batches = run_batches(chaos, waves=3)
    # Then the two batches admitted whole and the one finished on its retry are complete, each callback once
    table = chaos.workload.converge.require_batches()
    states = {batch_id: table.require(batch_id).state for batch_id in batches.admitted}
    assert states == {
        "cb-w0": BatchState.COMPLETE,
        "cb-w1": BatchState.COMPLETE,
        "cb-w2": BatchState.COMPLETE,
        "cb-stopped": BatchState.ADMITTING,
    }
    assert batches.crashes == 2
    counted = effects.count(chaos.cloud)
    for batch_id in ("cb-w0", "cb-w1", "cb-w2"):
        assert counted.for_operation(callback_id(batch_id))["s3"] == 1
        assert chaos.operation(callback_id(batch_id)).payload["batch_total"] == 3
    # And the one left halfway is listed with its reason, and has no callback
    stopped = table.require("cb-stopped")
    assert stopped.listed and "admission stopped" in stopped.listed
    assert chaos.workload.converge.operations.get(callback_id("cb-stopped")) is None
    # And the batches' invariants hold, beside every other one
    check = batches.check(invariants.operations_in(chaos.cloud))
    assert check.holds, check.violations
    assert "4 batches (2 admissions stopped halfway), 3 complete, 1 listed" in check.detail
    assert chaos.check().holds


def test_a_count_that_differs_from_the_children_is_caught(chaos: Chaos) -> None:
    # Given a batch run to completion
    batches = run_batches(chaos, waves=1)
    # When its first shard's first place is changed by hand (a child counted as a state it does not hold)
    dynamodb, table = chaos.cloud.client("dynamodb"), chaos.cloud.outputs["BatchesTableName"]
    dynamodb.update_item(
        TableName=table,
        Key={"pk": {"S": "cb-w0#s0"}},
        UpdateExpression="SET #c[0] = :unknown",
        ExpressionAttributeNames={"#c": "children"},
        ExpressionAttributeValues={":unknown": {"S": "U"}},
    )
    # Then the check names the batch and both counts
    check = batches.check(invariants.operations_in(chaos.cloud))
    assert not check.holds
    assert any(v.startswith("cb-w0: counted") for v in check.violations), check.violations


def test_a_batch_left_open_and_unlisted_is_caught(chaos: Chaos) -> None:
    # Given the batch left halfway, before the reconciler's pass (nothing listed it yet)
    batches = ChaosBatches.of(chaos.cloud, chaos.workload.converge)
    assert batches is not None
    batches.leave_one_stopped("cb")
    # Then the check, told the reconciler ran, finds it neither complete nor listed
    check = batches.check(invariants.operations_in(chaos.cloud))
    assert not check.holds
    assert check.violations == ["cb-stopped: admitting, counts {}, and not listed"]
