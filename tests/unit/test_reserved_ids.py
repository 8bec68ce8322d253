"""The batches' reserved ids: a request under a child's or a callback's id is dispatched only if its batch wrote it.

The relay asks `ReservedIds` (converge.flow.reserved_ids); ProducerPolicy denies a producer's plain put under
"::" ids and any write of a callback (tests/localcloud/test_iam.py). The explorer plays the same against the
whole system (tests/explore/test_steps_and_batches_breaks.py).
"""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest

from converge.flow.reserved_ids import ReservedIds
from converge.model.batches import batch_form, callback_id, child_id, parse_child
from converge.model.request import JobRequest
from converge.model.states import OperationState
from converge.runtime import Converge
from converge.store.codecs import request_item

from .batch_fixtures import CALLBACK, child_ids, children, counted
from .conftest import deliver

pytestmark = pytest.mark.usefixtures("batches_table")


class CountingReads:
    """The DynamoDB client, counting the reads of the batches table."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.reads = 0

    def get_item(self, **request: Any) -> Any:
        self.reads += 1
        return self._client.get_item(**request)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def reserved_ids(app: Converge) -> tuple[ReservedIds, CountingReads]:
    table = app.require_batches().table
    counting = CountingReads(boto3.client("dynamodb"))
    table._client = counting
    return ReservedIds(table), counting


@pytest.mark.parametrize(
    ("operation_id", "acts_on_a_batch"),
    [
        ("b-1::0:p-1", True),
        ("b-1::callback", True),
        ("b-1::0:p-1:next", False),  # a child's continuation counts nowhere
        ("b-1::callback:on-failure", False),
        ("order-7::retry", False),  # "::" in no batch's form
        ("b-1::0:p-1::callback", False),
        ("plain-1", False),
    ],
)
def test_only_a_childs_and_a_callbacks_ids_act_on_a_batch(operation_id: str, acts_on_a_batch: bool) -> None:
    assert batch_form(operation_id) is acts_on_a_batch


def test_a_child_the_batch_wrote_passes_and_one_it_never_had_is_refused_naming_why(bapp: Converge) -> None:
    # Given a batch of 300 children (three chunks of keys, two shards)
    bapp.enqueue_batch("b-1", children(300), callback=CALLBACK)
    admitted = child_ids(bapp, "b-1")
    ids, counting = reserved_ids(bapp)
    # When the relay asks about each of its children, a key it lacks, a key on the wrong shard, and another batch's
    # Then its children pass, and the others are refused with the reason
    assert [ids.refusal(child) for child in admitted] == [None] * 300
    assert ids.refusal(child_id("b-1", "zz", 0)) == "batch 'b-1' admitted no child 'zz' on shard 0"
    assert ids.refusal(child_id("b-1", "p-0", 1)) == "batch 'b-1' admitted no child 'p-0' on shard 1"
    assert ids.refusal(child_id("b-9", "p-0", 0)) == "no batch 'b-9' admitted it (ids with '::' are the batches' own)"
    # And the batch's keys were read once for all its children: its record and each chunk of keys, then one more
    # read past the last chunk for the key it lacks (the shard's is known); a batch it does not know, its record
    assert counting.reads == 1 + 3 + 1 + 1


def test_a_callback_passes_only_once_its_batch_is_complete(bapp: Converge, outcomes: Any) -> None:
    # Given a batch of two children, one still to run
    bapp.enqueue_batch("b-2", children(2), callback=CALLBACK)
    first, second = child_ids(bapp, "b-2")
    ids, _ = reserved_ids(bapp)
    deliver(bapp, first)
    # When the relay asks about the callback's id / Then it is refused while the batch is open
    refused = ids.refusal(callback_id("b-2"))
    assert refused == "batch 'b-2' is not complete: its callback is written by its completion alone"
    # And it passes once the last child settled and was counted, which wrote it
    deliver(bapp, second)
    counted(bapp)
    assert bapp.require_batches().require("b-2").callback_id == callback_id("b-2")
    assert ids.refusal(callback_id("b-2")) is None


def test_the_relay_rejects_a_child_its_batch_never_had_and_counts_it_nowhere(bapp: Converge) -> None:
    # Given a batch of two children, and a producer's request under a key the batch lacks (as BatchWriteItem would
    # write it: ProducerPolicy denies a plain put under "::")
    bapp.enqueue_batch("b-3", children(2), callback=CALLBACK)
    forged = JobRequest(child_id("b-3", "zz", 0), "mail.statement.v1", {"partner_id": "p-9"})
    image = request_item(forged)
    # When the relay reads it
    relay = bapp.relay
    failed = relay.act([relay.decide({"eventName": "INSERT", "dynamodb": {"SequenceNumber": "7", "NewImage": image}})])
    # Then it is REJECTED, saying why, nothing is sent, and the counter, given its change, counts nothing
    assert failed is None
    record = bapp.operations.state.record(forged.operation_id)
    assert record.state is OperationState.REJECTED
    assert record.history[-1].reason == "refused: batch 'b-3' admitted no child 'zz' on shard 0"
    assert len(counted(bapp)) == 1
    assert bapp.require_batches().require("b-3").counts == {}


def test_the_counter_places_a_child_where_its_batch_dealt_it_and_nowhere_else(bapp: Converge) -> None:
    # Given a batch of five over one shard, and the keys the counter reads
    bapp.enqueue_batch("b-5", children(5), callback=CALLBACK)
    ids, _ = reserved_ids(bapp)
    # Then a child's place is its position on its shard; a key the batch lacks, another shard or no batch: none
    assert [ids.place(parse_child(child)) for child in child_ids(bapp, "b-5")] == [0, 1, 2, 3, 4]
    assert ids.place(parse_child(child_id("b-5", "zz", 0))) is None
    assert ids.place(parse_child(child_id("b-5", "p-1", 1))) is None
    assert ids.place(parse_child(child_id("b-none", "p-1", 0))) is None


class CountingStateReads(CountingReads):
    """The DynamoDB client, counting the reads of the state table."""


def test_the_relay_reads_a_record_only_to_reject_a_child_its_batch_wrote(bapp: Converge) -> None:
    # Given a relay whose state table counts its reads, and an ordinary request the relay cannot use
    counting = CountingStateReads(boto3.client("dynamodb"))
    bapp.operations.state._client = counting
    image = request_item(JobRequest("plain-7", "no.such.v1", {"partner_id": "p-1"}))
    relay = bapp.relay
    # When the relay rejects it
    relay.act([relay.decide({"eventName": "INSERT", "dynamodb": {"SequenceNumber": "8", "NewImage": image}})])
    # Then it is REJECTED with one write and no read (only a batch's child is read for what it was counted as)
    assert counting.reads == 0
    assert bapp.operations.state.record("plain-7").state is OperationState.REJECTED


def test_a_request_under_a_childs_id_its_batch_never_wrote_is_counted_as_refused(bapp: Converge) -> None:
    from converge.observability import metrics

    # Given a batch, and a producer's request under a key it lacks
    bapp.enqueue_batch("b-4", children(1), callback=CALLBACK)
    image = request_item(JobRequest(child_id("b-4", "zz", 0), "mail.statement.v1", {"partner_id": "p-9"}))
    metrics.clear_metrics()
    # When the relay refuses it / Then the refusal is counted under its own name
    relay = bapp.relay
    relay.act([relay.decide({"eventName": "INSERT", "dynamodb": {"SequenceNumber": "9", "NewImage": image}})])
    assert metrics.metric_set["reserved_id_refused"]["Value"] == [1.0]
    metrics.clear_metrics()


def test_children_its_batch_wrote_are_all_sent_when_they_come_in_one_stream_batch(bapp: Converge) -> None:
    from .sqs_deliveries import receive

    # Given a batch of three children, whose requests reach the relay in one stream batch
    bapp.enqueue_batch("b-5", children(3), callback=CALLBACK)
    ids = child_ids(bapp, "b-5")
    records = []
    for sequence, operation_id in enumerate(ids):
        item = boto3.client("dynamodb").get_item(
            TableName=bapp.settings.jobs_table, Key={"operation_id": {"S": operation_id}}, ConsistentRead=True
        )["Item"]
        records.append({"eventName": "INSERT", "dynamodb": {"SequenceNumber": str(sequence), "NewImage": item}})
    # When the relay carries them
    relay = bapp.relay
    failed = relay.act([relay.decide(record) for record in records])
    # Then every one was vouched for and sent, none left behind
    assert failed is None
    sent = {json.loads(message["Body"])["operation_id"] for message in receive(bapp)}
    assert sent == set(ids)
