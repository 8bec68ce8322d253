"""A limiter whose keys are too hot for one item (about 1,000 writes a second) spreads each key over `shards` items,
each paced at its share: the arithmetic, and the pipeline's jobs of one key spread over the items (over moto)."""

from __future__ import annotations

import uuid
from collections import Counter

import boto3
import pytest

from converge.flow.registry import JobBinding, Policy, Queue, Registry
from converge.flow.runner import JobContext
from converge.model.clock import SequentialIds
from converge.model.errors import RegistryError
from converge.model.limits import Limiter
from converge.model.outcomes import Outcome
from converge.runtime import Converge
from converge.runtime.clients import Clients

from .conftest import Notice, deliver

HOT = Limiter("hot-api", limit=4, period=10, burst=4, shards=4)
"""Four a ten seconds over four items: each item one every ten seconds, with one more at once."""


class Call:
    def load(self, message: Notice, ctx: JobContext) -> str:
        return "ready"

    def run(self, message: Notice, loaded: str, ctx: JobContext) -> None:
        pass


def test_a_sharded_limiter_paces_each_item_at_its_share_and_spreads_its_burst():
    # Given a limiter of 4,000 a second over four items / Then each item paces 1,000 a second, a millisecond apart
    hot = Limiter("hot", limit=4000, period=1, burst=400, shards=4)
    assert (hot.interval, hot.tolerance) == (0.001, 0.1)
    assert hot.describe() == "4000 per 1 s, burst 400, over 4 items"
    # And a job's item is one of the key's four, the same for the same operation, its key read back from it
    items = {hot.item_of("k", f"op-{n}") for n in range(200)}
    assert items == set(hot.items_of("k")) == {"k~0", "k~1", "k~2", "k~3"}
    assert hot.item_of("k", "op-7") == hot.item_of("k", "op-7") and hot.key_of_item("k~3") == "k"
    # And an unsharded limiter's item is its key
    assert Limiter("one", limit=5, period=1).item_of("k", "op-1") == "k"


@pytest.mark.parametrize("shards", [0, 101, True, 2.5])
def test_shards_out_of_range_are_refused(shards):
    with pytest.raises(RegistryError, match="shards must be a whole number from 1 to 100"):
        Limiter("x", limit=200, period=1, shards=shards)


def test_more_shards_than_the_limit_are_refused():
    with pytest.raises(RegistryError, match=r"shards \(4\) must not exceed the limit \(2\)"):
        Limiter("x", limit=2, period=1, shards=4)


def test_jobs_of_one_key_take_their_units_from_its_items_and_never_more_than_the_limit_and_burst(settings, clock):
    # Given a job type under the sharded limiter
    binding = JobBinding("hot.call.v1", Notice, Call, Queue.CRITICAL, Policy.EFFECT_THEN_CLAIM, limits=(HOT,))
    clients = Clients(dynamodb=boto3.client("dynamodb"), sqs=boto3.client("sqs"), ssm=boto3.client("ssm"))
    app = Converge(settings, registry=Registry([binding]), clients=clients, clock=clock, ids=SequentialIds("a"))
    # When forty jobs of the one user arrive at once
    user, prefix = str(uuid.uuid4()), uuid.uuid4().hex[:6]
    outcomes: Counter[Outcome] = Counter()
    per_item: Counter[str] = Counter()
    for n in range(40):
        operation_id = f"op-{prefix}-{n}"
        app.enqueue("hot.call.v1", operation_id, {"user_id": user})
        outcomes[deliver(app, operation_id).outcome] += 1
        per_item[HOT.item_of("*", operation_id)] += 1
    # Then each item started its one and its burst's one now, the others held for their slots: never more than
    # the limit and the burst in all
    assert set(per_item) == {"*~0", "*~1", "*~2", "*~3"}
    assert outcomes[Outcome.SUCCEEDED] == sum(min(2, count) for count in per_item.values()) <= HOT.limit + HOT.burst
    assert outcomes[Outcome.HELD] == 40 - outcomes[Outcome.SUCCEEDED]
    # And the operator sees the one key, its queue the items' together
    (waiting,) = app.rate_limits.waiting()
    assert (waiting.key, waiting.queued) == ("*", outcomes[Outcome.HELD])
