"""`converge demo --chaos`'s flow control: the reference application's rate-limited ad images and its statements
(one at a time per partner) run under faults, and no job either held reaches a DLQ or is lost.

The check is localcloud/flow_invariants.py's, which the chaos report carries as `flow_control_kept`; the last test
makes a held job read as open and unlisted, to show the check sees a lost one.
"""

from __future__ import annotations

from dataclasses import replace

from catalogue import examples
from converge.model.states import OperationState
from localcloud import invariants
from localcloud.batch_workload import ChaosBatches
from localcloud.faults import FaultKind
from localcloud.flow_invariants import flow_control_kept, held_by

from .conftest import Chaos

AD_IMAGE = "ads.image-process.v1"


def test_held_ad_images_and_statements_under_faults_all_end_and_none_is_dead_lettered(chaos: Chaos) -> None:
    # Given crashes after effects and twice-delivered messages
    chaos.faults.rate(FaultKind.CRASH_AFTER_EFFECT, 0.1)
    chaos.faults.rate(FaultKind.DUPLICATE_DELIVERY, 0.1)
    # When forty ad images go at once (the partner takes eleven at once, then one every 1.2 s) and a month's
    # statements of 30 children, several per partner, are admitted; and everything settles
    for n in range(40):
        chaos.enqueue(AD_IMAGE, f"flow-ad-{n}", {"ad_id": (examples.PENDING_AD, examples.SECOND_PENDING_AD)[n % 2]})
    batches = ChaosBatches.of(chaos.cloud, chaos.workload.converge)
    assert batches is not None
    batches.admit(0, 30 * 20, "flow")
    chaos.workload.drain()
    chaos.workload.settle()
    # Then the partner's limit held ad images back, and the check finds none dead-lettered or lost
    operations = invariants.operations_in(chaos.cloud)
    held = {op: held_by(operation) for op, (operation, _) in operations.items() if held_by(operation)}
    assert sum(kind == "rate limit" for kind in held.values()) >= 20
    check = flow_control_kept(chaos.cloud, chaos.cloud.registry, operations, invariants.attention_lister(chaos.cloud))
    assert check.holds, check.violations
    assert check.detail.startswith(f"{sum(k == 'rate limit' for k in held.values())} jobs held by a rate limit")
    # And every held one ended
    assert all(operations[op][0].state.value in ("SUCCEEDED", "NOOP") for op in held), {
        op: operations[op][0].state for op in held
    }


def test_a_held_job_left_open_and_unlisted_is_caught(chaos: Chaos) -> None:
    # Given twenty ad images at once: the partner's burst runs eleven, the others were held for their slots
    for n in range(20):
        chaos.enqueue(AD_IMAGE, f"flow-lost-{n}", {"ad_id": examples.PENDING_AD})
    chaos.workload.drain()
    operations = invariants.operations_in(chaos.cloud)
    held = sorted(op for op, (operation, _) in operations.items() if op.startswith("flow-lost-") and held_by(operation))
    assert len(held) >= 5
    # When one of them reads as still waiting (SCHEDULED) and no listing holds it, as a lost one would
    lost, item = operations[held[0]]
    operations[held[0]] = (replace(lost, state=OperationState.SCHEDULED), item)
    check = flow_control_kept(chaos.cloud, chaos.cloud.registry, operations, invariants.attention_lister(chaos.cloud))
    # Then the check names it
    assert not check.holds
    assert check.violations == [f"{held[0]}: held by a rate limit, SCHEDULED, and not listed (lost)"]
    chaos.workload.settle()
