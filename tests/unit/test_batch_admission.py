"""A batch's admission refuses word for word, in a fixed order, and stores each child as its message reads it."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from converge.flow import batches as flow_batches
from converge.flow.registry import JobBinding, Policy, Queue, Registry
from converge.model.batches import BatchCallback, BatchChild, callback_id, parse_child, shard_of
from converge.model.clock import SequentialIds
from converge.model.errors import InvalidMessage, UnknownJobType
from converge.model.submission import BatchSubmission
from converge.runtime import Converge
from converge.screening.identifiers import Identifier
from converge.screening.message import JobMessage

from .batch_fixtures import CALLBACK, StatementRunner, batch_bindings, children, counted, jobs_items
from .conftest import deliver

NAME_RULE = "use 1-{} characters from letters, digits and . _ - starting with a letter or digit"


@pytest.mark.parametrize(
    ("batch_id", "members", "callback", "error", "says"),
    [
        ("b:3", children(1), CALLBACK, InvalidMessage, f"batch id 'b:3' is invalid: {NAME_RULE.format(64)}"),
        (
            "b-3",
            [{"key": "p-0"}],
            CALLBACK,
            InvalidMessage,
            "a batch's children are converge.BatchChild values, not dict",
        ),
        (
            "b-3",
            [BatchChild("a:b", "mail.statement.v1", {"partner_id": "x"})],
            CALLBACK,
            InvalidMessage,
            f"child key 'a:b' is invalid: {NAME_RULE.format(56)}",
        ),
        (
            "b-3",
            children(1),
            BatchCallback("mail.statement-summary.v1", {"month": "x", "batch_total": 1, "batch_failed": 2}),
            InvalidMessage,
            "the callback's payload may not set batch_failed, batch_total: the batch's summary fills them",
        ),
        (
            "b-3",
            children(1),
            BatchCallback("mail.statement-summary.v1", {}),
            InvalidMessage,
            "the callback's payload: month: Field required",
        ),
        # an unknown callback job type is named before anything its payload holds
        (
            "b-3",
            children(1),
            BatchCallback("mail.none.v1", {"batch_total": 1}),
            UnknownJobType,
            "unknown job type 'mail.none.v1'",
        ),
    ],
    ids=["batch-id", "not-a-child", "child-key", "reserved-fields", "callback-payload", "unknown-callback"],
)
def test_a_refused_batch_says_exactly_why_and_writes_nothing(bapp, batch_id, members, callback, error, says):
    with pytest.raises(error, match=f"^{re.escape(says)}$"):
        bapp.enqueue_batch(batch_id, members, callback)
    assert bapp.require_batches().get(batch_id) is None and not jobs_items("b-3")


def test_a_batch_of_exactly_the_most_children_is_admitted_and_one_more_is_not(bapp, monkeypatch):
    # Given a limit of three children (the real one is 10,000: the same comparison, at a size a test can admit)
    monkeypatch.setattr(flow_batches, "MAX_CHILDREN", 3)
    # Then four are refused, saying the limit; three, the limit itself, are admitted
    with pytest.raises(InvalidMessage, match=r"^a batch has 1-3 children, not 4$"):
        bapp.enqueue_batch("b-max", children(4), CALLBACK)
    assert bapp.enqueue_batch("b-max", children(3), CALLBACK).batch.total == 3


class Letter(JobMessage):
    partner_id: Identifier
    language: Identifier = "en"


def test_each_child_is_stored_as_its_message_reads_it_with_its_defaults(bapp, outcomes):
    # Given a job type whose message has a default, and a child that leaves it out
    letter = JobBinding(
        "mail.letter.v1", Letter, lambda: StatementRunner(outcomes), Queue.CRITICAL, Policy.EFFECT_THEN_CLAIM
    )
    registry = Registry([letter, *batch_bindings(outcomes)])
    app = Converge(bapp.settings, registry=registry, clients=bapp.clients, clock=bapp.clock, ids=SequentialIds("a"))
    app.enqueue_batch("b-def", [BatchChild("p-0", "mail.letter.v1", {"partner_id": "p-0"})], CALLBACK)
    # Then the child's request holds the payload as its message reads it: the default written out
    (item,) = jobs_items("b-def::")
    assert item["payload"] == {"M": {"partner_id": {"S": "p-0"}, "language": {"S": "en"}}}


def test_the_callback_carries_the_batch_id_as_its_correlation_id(bapp):
    # Given a batch of one child, run to completion
    bapp.enqueue_batch("b-corr", children(1), CALLBACK)
    (child,) = jobs_items("b-corr::")
    deliver(bapp, child["operation_id"]["S"])
    counted(bapp)
    # Then its callback's request is correlated with the batch, as its children are
    (callback,) = jobs_items(callback_id("b-corr"))
    assert callback["correlation_id"] == {"S": "b-corr"} == child["correlation_id"]


def test_a_batch_of_exactly_one_chunk_writes_one_chunk_and_each_child_is_the_submitters(bapp):
    # When a batch of exactly one chunk's children (100) is admitted by an API caller
    admitted = bapp.admit_batch(BatchSubmission("b-one", tuple(children(100)), CALLBACK, submitted_by="api:alice"))
    # Then its keys are one chunk, with no empty one after it
    assert admitted.batch.chunks == 1 and admitted.batch.written == 100
    table = bapp.require_batches().table
    assert len(table.keys("b-one", 0) or []) == 100 and table.keys("b-one", 1) is None
    # And every child is the caller's own (theirs to read)
    assert {item["submitted_by"]["S"] for item in jobs_items("b-one::")} == {"api:alice"}


def test_children_are_dealt_to_the_shards_in_turn_and_each_shard_expects_exactly_its_own(bapp):
    # When a batch of 501 children (3 counting shards: more than two, where dealing from the back and from the
    # front differ) is admitted
    admitted = bapp.enqueue_batch("b-deal", children(501), CALLBACK).batch
    assert admitted.shards == 3
    # Then the child at each position names the shard dealt to it in turn, in every chunk
    named = {parse_child(item["operation_id"]["S"]) for item in jobs_items("b-deal::")}
    assert {(child.key, child.shard) for child in named if child} == {
        (f"p-{position}", shard_of(position, 3)) for position in range(501)
    }
    # And each shard expects exactly the children whose ids name it
    table = bapp.require_batches().table
    named_per_shard = Counter(child.shard for child in named if child)
    assert [table.shard_counts("b-deal", shard) for shard in range(3)] == [
        (named_per_shard[shard], {}) for shard in range(3)
    ]
