"""The batch counter's reading of the state table's stream: which records are a child's change to a final state,
and what one stream batch writes (one write a shard, a child's last change in it, nothing for a child no batch
wrote). The counter over a whole batch's life is in test_batches.py."""

from __future__ import annotations

from typing import Any

import boto3
import pytest

from converge.model.batches import BatchState, ChildOf, CountMove, callback_id
from converge.model.clock import iso
from converge.model.states import OperationState
from converge.observability import metrics
from converge.store.state_stream import count_moves

from .batch_fixtures import CALLBACK, StateStream, child_ids, children, counted, deliver_all, jobs_items
from .conftest import deliver, sent

_S = OperationState


def record(operation_id: Any, state: Any = "SUCCEEDED", **change: Any) -> dict[str, Any]:
    image = {"operation_id": {"S": operation_id}, "state": {"S": state}}
    return {
        "eventName": "MODIFY",
        "dynamodb": {"Keys": {"operation_id": {"S": operation_id}}, "NewImage": image, **change},
    }


def test_a_childs_change_to_a_final_state_is_read_as_its_new_state() -> None:
    # Given the stream's records of a child's, a callback's, a continuation's and a plain operation's final writes
    records = [record("b::0:c1", "FAILED"), record("b::callback"), record("b::0:c1:next"), record("plain-1")]
    # Then only the child's is a move, to its new state
    assert list(count_moves(records)) == [CountMove("b::0:c1", ChildOf("b", 0, "c1"), _S.FAILED)]


@pytest.mark.parametrize(
    "unreadable",
    [
        "not a record",
        {"dynamodb": "not a change"},
        {"dynamodb": {"Keys": "no keys", "NewImage": {"state": {"S": "SUCCEEDED"}}}},
        {"dynamodb": {"Keys": {"operation_id": "no value"}, "NewImage": {"state": {"S": "SUCCEEDED"}}}},
        {"dynamodb": {"Keys": {"operation_id": {"N": "1"}}, "NewImage": {"state": {"S": "SUCCEEDED"}}}},
        {"eventName": "REMOVE", "dynamodb": {"Keys": {"operation_id": {"S": "b::0:c1"}}}},
        record("b::0:c1", "RUNNING?"),
        record("b::0:c1", "IN_PROGRESS"),
        record("b::0:c1", {"not": "text"}),
        {"dynamodb": {"Keys": {"operation_id": {"S": "b::0:c1"}}, "NewImage": {"state": "SUCCEEDED"}}},
        {"dynamodb": {"Keys": {"operation_id": {"S": "b::0:c1"}}, "NewImage": "not an image"}},
    ],
)
def test_a_record_that_is_not_a_childs_final_change_is_left_out(unreadable: Any) -> None:
    # Given a garbled record, a removal, or a state not final / Then nothing is read from it, and nothing raises
    assert list(count_moves([unreadable, record("b::0:c2", "NOOP")])) == [
        CountMove("b::0:c2", ChildOf("b", 0, "c2"), _S.NOOP)
    ]


def test_one_stream_batch_writes_each_shard_once_with_each_childs_last_change(bapp) -> None:
    # Given a batch of three on one shard, each child final, one of them changed twice in the same stream batch
    bapp.enqueue_batch("k-1", children(3), CALLBACK)
    first, second, third = child_ids(bapp, "k-1")
    deliver_all(bapp, [])  # nothing yet: the stream read from the start
    records = [record(first, "UNKNOWN"), record(second), record(first, "FAILED"), record(third, "NOOP")]
    calls = sent(bapp.clients.dynamodb)
    # When the counter is given them
    answer = bapp.batch_counter.handle({"Records": records})
    # Then one UpdateItem set the three places, the first child's at its last state, and the batch completed
    assert answer == {"placed": 3, "shards": 1}
    assert [name for name, _ in calls].count("UpdateItem") == 1
    batch = bapp.require_batches().require("k-1")
    assert batch.counts == {"FAILED": 1, "SUCCEEDED": 1, "NOOP": 1} and batch.state is BatchState.COMPLETE


def test_a_stream_batch_of_nothing_to_count_writes_nothing(bapp) -> None:
    bapp.enqueue_batch("k-2", children(2), CALLBACK)
    calls = sent(bapp.clients.dynamodb)
    assert bapp.batch_counter.handle({"Records": [record("plain-9"), record("k-2::0:zz")]}) == {
        "placed": 0,
        "shards": 0,
    }
    assert bapp.batch_counter.handle({}) == {"placed": 0, "shards": 0}
    assert [name for name, _ in calls if name not in ("GetItem",)] == []


def test_an_unknown_child_holds_the_look_back_and_its_resolve_completes_the_batch(bapp, outcomes) -> None:
    # Given a batch of two, both counted, one UNKNOWN
    bapp.enqueue_batch("k-3", children(2), CALLBACK)
    first, second = child_ids(bapp, "k-3")
    outcomes.unknowable.add(second)
    looks: list[str] = []
    batches = bapp.require_batches()
    real = batches.observe
    batches.observe = lambda batch_id: looks.append(batch_id) or real(batch_id)  # type: ignore[method-assign]
    deliver_all(bapp, [first, second])
    # Then the counter did not look (its shard holds an UNKNOWN): no callback
    assert looks == [] and batches.require("k-3").counts == {"SUCCEEDED": 1, "UNKNOWN": 1}
    # When an operator resolves it, and the counter reads that
    bapp.operator("cli:alice").resolve(second, "failed", "no record of it")
    counted(bapp)
    # Then it looked once and completed the batch
    assert looks == ["k-3"] and batches.require("k-3").state is BatchState.COMPLETE


def test_a_change_after_the_callback_is_recorded_once_even_when_the_stream_batch_comes_again(bapp, outcomes) -> None:
    # Given a complete batch whose failed child an operator retried, and it succeeded
    bapp.enqueue_batch("k-4", children(2), CALLBACK)
    first, second = child_ids(bapp, "k-4")
    outcomes.failing.add(first)
    deliver_all(bapp, [first, second])
    outcomes.failing.clear()
    assert bapp.operator("cli:alice").retry(first, "fixed").applied
    deliver(bapp, first, message_id="m-2")
    records = StateStream().records()
    # When the counter reads it, and is given everything again
    counted(bapp)
    bapp.batch_counter.handle({"Records": records})
    # Then the change is recorded once, with the time it was counted
    batch = bapp.require_batches().require("k-4")
    assert [(c.child, c.before, c.after, c.at) for c in batch.changes] == [
        (first, "FAILED", "SUCCEEDED", iso(bapp.clock.now()))
    ]
    assert batch.changes_after_callback == 1 and batch.counts == {"SUCCEEDED": 2}


def test_a_stream_batch_over_two_shards_counts_every_child_after_one_no_batch_wrote(bapp) -> None:
    # Given a batch of 251 (two shards), and a stream batch whose first record is a child no batch wrote
    bapp.enqueue_batch("k-5", children(251), CALLBACK)
    ids = child_ids(bapp, "k-5")
    records = [record("k-5::0:zz"), record(ids[0]), record(ids[1]), record(ids[2])]
    metrics.clear_metrics()
    # When the counter is given it
    answer = bapp.batch_counter.handle({"Records": records})
    # Then the three children are placed, on both shards, and counted under the metric
    assert answer == {"placed": 3, "shards": 2}
    assert metrics.metric_set["batch_children_counted"]["Value"] == [3.0]
    assert bapp.require_batches().require("k-5").counts == {"SUCCEEDED": 3}
    metrics.clear_metrics()


def test_a_shard_an_earlier_converge_wrote_keeps_its_counts_and_never_completes_its_batch_early(bapp) -> None:
    # Given an open batch of two whose shard holds the earlier shape (its child count and a number per state), one
    # child counted there before the upgrade
    bapp.enqueue_batch("k-6", children(2), CALLBACK)
    _, second = child_ids(bapp, "k-6")
    earlier = {"pk": {"S": "k-6#s0"}, "kind": {"S": "shard"}, "expected": {"N": "2"}, "SUCCEEDED": {"N": "1"}}
    boto3.client("dynamodb").put_item(TableName=bapp.settings.batches_table, Item=earlier)
    # When the other child's final change reaches the counter, and the reconciler runs
    answer = bapp.batch_counter.handle({"Records": [record(second)]})
    bapp.reconciler.run()
    # Then the shard reads as it stands (one of two counted), nothing is placed on it, and no callback is written
    batches = bapp.require_batches()
    assert answer == {"placed": 1, "shards": 1}
    assert batches.table.all_counts("k-6", 1) == [(2, {"SUCCEEDED": 1})]
    assert batches.require("k-6").state is BatchState.OPEN and batches.observe("k-6") is False
    assert jobs_items(callback_id("k-6")) == []
