"""What a batch costs, measured: capacity units from moto's state around each call (the benchmark's meter). The
figures are docs/batches.md's: a child's delivery against a plain job's, the admission per child, the completion."""

from __future__ import annotations

import pytest

from converge.model.batches import CHILDREN_PER_SHARD, callback_id, shard_count
from converge.model.outcomes import Outcome
from converge_bench.meter import Meter

from .batch_fixtures import CALLBACK, child_ids, children
from .conftest import body_of, deliver


def metered(app, operation_id: str):
    body = body_of(app, operation_id)
    meter = Meter()
    with meter.active():
        result = deliver(app, operation_id, body=body)
    return result, meter.application


def test_a_child_costs_three_write_units_more_than_a_plain_job_and_one_read(bapp):
    # Given a plain job and a batch's child of the same job type and payload size
    bapp.enqueue("mail.statement.v1", "plain-1", {"partner_id": "p-0"})
    bapp.enqueue_batch("cost-1", children(3), CALLBACK)
    first, *_ = child_ids(bapp, "cost-1")
    # When each is delivered once
    plain, plain_cost = metered(bapp, "plain-1")
    child, child_cost = metered(bapp, first)
    assert plain.outcome is child.outcome is Outcome.SUCCEEDED
    # Then the plain job is its lease and its terminal write (1 + 1)
    assert (plain_cost.write_units, plain_cost.read_units) == (2, 0)
    # and the child is its lease (1), then one TransactWriteItems of its settle and its count (2 + 2), then a
    # strongly consistent read of its shard (1 read unit): 3 write units more than a plain job, not 2
    assert (child_cost.write_units, child_cost.read_units) == (1 + 2 + 2, 1)
    assert child_cost.calls["dynamodb:TransactWriteItems"] == 1 and child_cost.calls["dynamodb:GetItem"] == 1


def test_admission_costs_about_one_write_unit_per_child(bapp):
    # When a batch of 1,000 children is admitted
    meter = Meter()
    with meter.active():
        bapp.enqueue_batch("cost-2", children(1000), CALLBACK)
    cost = meter.application
    # Then each child's request is one write unit (as a plain enqueue), and the batch's own items add little:
    # its record, 4 shards, 10 chunks of keys and their progress, its opening
    per_child = cost.write_units / 1000
    assert 1.0 < per_child < 1.1, per_child
    assert cost.calls["dynamodb:BatchWriteItem"] == 40


@pytest.mark.slow  # 251 deliveries: the fewest children that take two counting shards
def test_the_last_child_reads_every_shard_once_and_writes_the_callback_in_one_transaction(bapp):
    # Given a batch of 251 children (one more than a shard counts: 2 shards), all final but one
    assert shard_count(251) == 2
    bapp.enqueue_batch("cost-3", children(251), CALLBACK)
    ids = child_ids(bapp, "cost-3")
    for operation_id in ids[:-1]:
        deliver(bapp, operation_id)
    # When the last one settles
    result, cost = metered(bapp, ids[-1])
    # Then: its lease and its settle with its count (1 + 4), then the callback and the record's completion in one
    # transaction (2 items, at 2 units each); reads: its shard, the record, the 2 shards (in one BatchGetItem)
    assert result.outcome is Outcome.SUCCEEDED
    assert bapp.operations.jobs.item(callback_id("cost-3")) is not None
    assert cost.calls["dynamodb:TransactWriteItems"] == 2 and cost.calls["dynamodb:BatchGetItem"] == 1
    assert cost.write_units == 1 + 4 + 4
    assert cost.read_units == 1 + 1 + 2


@pytest.mark.slow  # 500 deliveries, metered: the fewest children that fill two counting shards
def test_no_item_takes_more_than_half_a_partitions_second_of_writes_whatever_the_rate(bapp):
    # Given a batch of 500 children (2 counting shards, each as full as a shard gets), admitted and every child
    # delivered, all metered
    assert shard_count(500) == 2 and 2 * CHILDREN_PER_SHARD == 500
    meter = Meter()
    with meter.active():
        bapp.enqueue_batch("cost-4", children(500), CALLBACK)
        ids = child_ids(bapp, "cost-4")
        for operation_id in ids:
            deliver(bapp, operation_id)
    assert bapp.require_batches().require("cost-4").state.value == "complete"
    # Then each counting shard took 1 write unit to be made and 2 per child it counts, 250 children each: 501 in
    # its whole life
    items = meter.application.item_write_units
    shards = {key: units for key, units in items.items() if key.startswith("converge-batches") and "#s" in key}
    assert sorted(shards.values()) == [501, 501]
    # And no item of any table took more (the batch's record: its admission's progress and its completion)
    hottest, units = items.most_common(1)[0]
    assert units <= 501, hottest
    # So even if all 500 children finished within one second (5,000 a second finishes them in 0.1 s), no item
    # takes more than 501 of the 1,000 write units a partition allows in a second; a shard never counts more
    # than 250 children (1,000 children have 4 shards, 10,000 have 40), the same bound each.
