"""converge_testing's effect counter: what a team's own resources accepted from its functions, by operation, in every
service its template uses (DynamoDB, S3, SES, SNS, SQS), counted where the effects land."""

from __future__ import annotations

import pytest

from converge import BatchCallback, BatchChild, OperationState
from converge_testing import Cloud, FaultKind


def test_each_effect_is_counted_in_its_own_resource_under_the_operation_that_made_it(orders_cloud: Cloud) -> None:
    # Given the team's project deployed / When an order is confirmed and the cloud runs until quiet
    orders_cloud.converge.enqueue("orders.confirm.v1", "count-order", {"order_id": "o-count"})
    orders_cloud.run_until_quiet()
    # Then its row is in its table and its e-mail in SES, under its own operation; its continuation's publish under
    # the continuation's
    assert orders_cloud.operation("count-order").state is OperationState.SUCCEEDED
    assert orders_cloud.effects.of("count-order") == {"OrdersTable": 1, "ses": 1}
    assert orders_cloud.effects.of("count-order:next") == {"FollowUpsTopic": 1}
    assert orders_cloud.effects.items("OrdersTable", "count-order") == 1
    assert orders_cloud.effects.emails("count-order") == 1
    assert orders_cloud.effects.publishes("FollowUpsTopic", "count-order:next") == 1
    # And each effect says what made it: which call, which function, for which operation
    made = orders_cloud.effects.made("count-order")
    assert [(e.resource, e.kind, e.action, e.function_id) for e in made] == [
        ("OrdersTable", "item", "PutItem", "DefaultWorkerFunction"),
        ("ses", "email", "SendEmail", "DefaultWorkerFunction"),
    ]
    assert made[0].key == '{"order_id": {"S": "o-count"}}'
    assert {"count-order", "count-order:next"} <= orders_cloud.effects.operations()


def test_items_are_counted_by_key_and_writes_by_call(orders_cloud: Cloud) -> None:
    # Given two operations that confirm the same order (the same row, written twice)
    before = orders_cloud.effects.items("OrdersTable")
    for operation_id in ("twice-1", "twice-2"):
        orders_cloud.converge.enqueue("orders.confirm.v1", operation_id, {"order_id": "o-twice"})
    orders_cloud.run_until_quiet()
    # Then each wrote one item, the table holds one more, and two writes were accepted
    assert orders_cloud.effects.items("OrdersTable", "twice-1") == orders_cloud.effects.items("OrdersTable", "twice-2")
    assert orders_cloud.effects.items("OrdersTable") == before + 1
    assert (
        orders_cloud.effects.writes("OrdersTable", "twice-1") + orders_cloud.effects.writes("OrdersTable", "twice-2")
        == 2
    )


def test_an_object_written_again_is_one_object_in_two_versions(orders_cloud: Cloud) -> None:
    # Given a worker that dies once after the greeting is written, before its operation is recorded
    with orders_cloud.faults() as faults:
        faults.plan(FaultKind.CRASH_AFTER_EFFECT, "versions-1")
        orders_cloud.converge.enqueue("hello.greeting.v1", "versions-1", {"user_id": "u-versions"})
        orders_cloud.run_until_quiet()
    # Then its retry wrote the same key again: one object, two versions, both its own
    assert orders_cloud.operation("versions-1").attempts == 2
    assert orders_cloud.effects.objects("GreetingsBucket", "versions-1") == 1
    assert orders_cloud.effects.versions("GreetingsBucket", "versions-1") == 2
    assert orders_cloud.effects.objects("GreetingsBucket") >= 1  # what the bucket holds now, read from S3


def test_a_batch_counts_each_childs_row_and_its_callbacks_send(orders_cloud: Cloud) -> None:
    # Given a batch of 5 receipts and its callback / When admitted and run
    children = [BatchChild(f"c{n}", "orders.receipt.v1", {"order_id": f"o-batch-{n}"}) for n in range(5)]
    orders_cloud.converge.enqueue_batch("count-batch", children, BatchCallback("orders.receipts-written.v1", {}))
    orders_cloud.run_until_quiet()
    # Then each child wrote its row, and the callback sent one message to the team's queue
    rows = sorted(e.operation_id for e in orders_cloud.effects.made() if e.resource == "ReceiptsTable")
    assert len([op for op in rows if op and op.startswith("count-batch::")]) == 5
    assert orders_cloud.effects.sends("AccountingQueue", "count-batch::callback") == 1


def test_a_producers_write_is_its_functions_and_a_refused_write_is_none(orders_cloud: Cloud) -> None:
    # Given the project's sign-up function, called twice for one user (the second write's condition fails)
    orders_cloud.invoke("SignUpFunction", {"user_id": "u-counted"})
    orders_cloud.invoke("SignUpFunction", {"user_id": "u-counted"})
    # Then one write was accepted, made by the function outside any operation, and the refused one is no effect
    written = [e for e in orders_cloud.effects.made() if e.resource == "UsersTable"]
    assert [(e.function_id, e.operation_id, e.action) for e in written] == [
        ("SignUpFunction", None, "TransactWriteItems")
    ]
    assert orders_cloud.effects.writes("UsersTable") == 1 == orders_cloud.effects.items("UsersTable")


def test_a_resource_the_template_does_not_declare_is_refused_by_name(orders_cloud: Cloud) -> None:
    # When a test names a table the template does not have (or converge's own) / Then it is told which it has
    with pytest.raises(KeyError, match=r"'JobsTable' is not one of the template's tables.*OrdersTable"):
        orders_cloud.effects.items("JobsTable")
    with pytest.raises(KeyError, match="not one of the template's topics"):
        orders_cloud.effects.publishes("OrdersTable")
