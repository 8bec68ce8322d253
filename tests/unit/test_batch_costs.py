"""What a batch costs, measured: capacity units from moto's state around each call (the benchmark's meter). The
figures are docs/batches.md's: a child's delivery against a plain job's, the admission per child, the counter's
writes and the completion."""

from __future__ import annotations

import pytest

from converge.model.batches import CHILDREN_PER_SHARD, shard_count
from converge.model.outcomes import Outcome
from converge_bench.meter import Meter

from .batch_fixtures import CALLBACK, StateStream, child_ids, children, counted
from .conftest import body_of, deliver


def metered(app, operation_id: str):
    body = body_of(app, operation_id)
    meter = Meter()
    with meter.active():
        result = deliver(app, operation_id, body=body)
    return result, meter.application


def test_a_child_costs_what_a_plain_job_costs_and_its_count_one_write_a_shard_a_stream_batch(bapp):
    # Given a plain job and a batch's three children of the same job type and payload size
    bapp.enqueue("mail.statement.v1", "plain-1", {"partner_id": "p-0"})
    bapp.enqueue_batch("cost-1", children(3), CALLBACK)
    ids = child_ids(bapp, "cost-1")
    counted(bapp)  # what the stream held before (nothing final)
    # When each is delivered once
    plain, plain_cost = metered(bapp, "plain-1")
    settled = [metered(bapp, operation_id) for operation_id in ids]
    # Then the plain job is its lease and its terminal write (1 + 1), and so is each child: no transaction, no read
    assert plain.outcome is Outcome.SUCCEEDED and (plain_cost.write_units, plain_cost.read_units) == (2, 0)
    for child, child_cost in settled:
        assert child.outcome is Outcome.SUCCEEDED
        assert (child_cost.write_units, child_cost.read_units) == (2, 0)
        assert child_cost.calls["dynamodb:TransactWriteItems"] == 0
    # When the counter is given the stream batch that holds the three (and the plain job's record, counted nowhere)
    meter = Meter()
    with meter.active():
        given = counted(bapp)
    # Then it wrote the three children's places in one UpdateItem of their shard (1 write unit: 1/3 a child), and
    # completed the batch: the callback and the record in one transaction (2 items, at 2 units each)
    assert len(given) == 4
    cost = meter.application
    assert cost.calls["dynamodb:UpdateItem"] == 1 and cost.calls["dynamodb:TransactWriteItems"] == 1
    assert cost.write_units == 1 + 4
    assert bapp.require_batches().require("cost-1").state.value == "complete"


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


@pytest.mark.slow  # 500 deliveries: the fewest children that fill two counting shards
def test_a_counting_shard_stays_one_write_unit_however_full_and_is_written_once_a_stream_batch(bapp):
    # Given a batch of 500 children (2 counting shards, each as full as a shard gets), every child delivered
    assert shard_count(500) == 2 and 2 * CHILDREN_PER_SHARD == 500
    bapp.enqueue_batch("cost-4", children(500), CALLBACK)
    ids = child_ids(bapp, "cost-4")
    for operation_id in ids:
        deliver(bapp, operation_id)
    records = StateStream().records()
    # When the counter is given them as stream batches of one child each (the worst case: nothing to gather)
    meter = Meter()
    with meter.active():
        for record in records:
            bapp.batch_counter.handle({"Records": [record]})
    # Then each write to a full shard was one write unit (its item stays under 1 KB), 250 in the shard's whole life
    items = meter.application.item_write_units
    shards = {key: units for key, units in items.items() if key.startswith("converge-batches") and "#s" in key}
    assert sorted(shards.values()) == [250, 250]
    assert bapp.require_batches().require("cost-4").state.value == "complete"
    # And given as one stream batch again (Lambda retries a failed one), the same places are set again: a shard's 250
    # places in three writes of up to 100 (one write unit each), and nothing counted twice
    meter = Meter()
    with meter.active():
        bapp.batch_counter.handle({"Records": records})
    items = meter.application.item_write_units
    assert sorted(u for k, u in items.items() if "#s" in k) == [3, 3]
    assert bapp.require_batches().require("cost-4").counts == {"SUCCEEDED": 500}
