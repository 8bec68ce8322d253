"""The orders on the local cloud, with converge_testing: their effects counted where they land, by operation."""

from __future__ import annotations

from converge import BatchCallback, BatchChild, OperationState
from converge_testing import FaultKind


def test_an_order_is_recorded_and_confirmed_once_then_followed_up(converge_cloud) -> None:
    # Given the project deployed / When an order is confirmed and the cloud runs until quiet
    converge_cloud.converge.enqueue("orders.confirm.v1", "order-1", {"order_id": "o-1"})
    converge_cloud.run_until_quiet()
    # Then it succeeded: one row in the orders table, one e-mail; its follow-up (its continuation) published once
    order = converge_cloud.operation("order-1")
    assert order.state is OperationState.SUCCEEDED, order.last_error
    assert converge_cloud.effects.of("order-1") == {"OrdersTable": 1, "ses": 1}
    assert converge_cloud.effects.of("order-1:next") == {"FollowUpsTopic": 1}


def test_a_worker_that_dies_after_both_steps_repeats_neither(converge_cloud) -> None:
    # Given a worker that dies once after the order's two steps, before the operation is recorded
    with converge_cloud.faults() as faults:
        faults.plan(FaultKind.CRASH_AFTER_EFFECT, "order-2")
        converge_cloud.converge.enqueue("orders.confirm.v1", "order-2", {"order_id": "o-2"})
        converge_cloud.run_until_quiet()
    # Then its retry found both steps recorded: the row written once, the e-mail sent once
    order = converge_cloud.operation("order-2")
    assert (order.state, order.attempts) == (OperationState.SUCCEEDED, 2), order.last_error
    assert converge_cloud.effects.writes("OrdersTable", "order-2") == 1
    assert converge_cloud.effects.emails("order-2") == 1


def test_a_batch_of_receipts_writes_each_once_then_tells_accounting_once(converge_cloud) -> None:
    # Given 50 receipts as one batch, and its callback
    children = [BatchChild(f"r{n}", "orders.receipt.v1", {"order_id": f"o-{n}"}) for n in range(50)]
    callback = BatchCallback("orders.receipts-written.v1", {})
    # When the batch is admitted (twice: a producer's retry) and the cloud runs until quiet
    app = converge_cloud.converge
    app.enqueue_batch("receipts-1", children, callback)
    app.enqueue_batch("receipts-1", children, callback)
    converge_cloud.run_until_quiet()
    # Then each receipt is one row, and accounting got one message, from the callback, with the counts
    assert converge_cloud.effects.writes("ReceiptsTable") == 50
    told = converge_cloud.operation("receipts-1::callback")
    assert told.state is OperationState.SUCCEEDED, told.last_error
    assert told.payload["batch_succeeded"] == 50
    assert (
        converge_cloud.effects.sends("AccountingQueue")
        == 1
        == converge_cloud.effects.sends("AccountingQueue", told.operation_id)
    )
