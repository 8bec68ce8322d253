"""A limiter whose keys are too hot for one item (about 1,000 writes a second) spreads each key over `shards` items,
each paced at its share: the arithmetic, and the pipeline's jobs of one key spread over the items (over moto)."""

from __future__ import annotations

import json
import uuid
from collections import Counter
from typing import Any

import boto3
import pytest

from converge.flow.registry import JobBinding, Policy, Queue, Registry
from converge.flow.runner import JobContext
from converge.model.clock import SequentialIds, iso
from converge.model.errors import RegistryError
from converge.model.limits import Limiter
from converge.model.outcomes import Outcome
from converge.runtime import Converge
from converge.runtime.clients import Clients
from converge.store.limits import LimiterTable

from .conftest import Notice, deliver, sent
from .test_rate_limits import PartnerCall

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


SPLIT = Limiter("split-api", limit=2, period=10, key="user_id", shards=2)
"""Two every ten seconds per user, over two items: each item one every ten seconds, no burst."""


class Refusing(PartnerCall):
    """A partner call that answers 429 with a retry-after for each entry of `refuse`, naming the split limiter."""

    LIMITER = "split-api"


@pytest.fixture
def calls() -> list[str]:
    return []


@pytest.fixture
def refuse() -> list[float]:
    return []


@pytest.fixture
def split(settings, clock, calls, refuse) -> Converge:
    binding = JobBinding(
        "split.call.v1",
        Notice,
        lambda: Refusing(calls, refuse),
        Queue.CRITICAL,
        Policy.EFFECT_THEN_CLAIM,
        limits=(SPLIT,),
    )
    clients = Clients(dynamodb=boto3.client("dynamodb"), sqs=boto3.client("sqs"), ssm=boto3.client("ssm"))
    return Converge(settings, registry=Registry([binding]), clients=clients, clock=clock, ids=SequentialIds("a"))


def on_item(user: str, shard: int) -> str:
    """A new operation id whose job takes its units from the user's item `shard`."""
    while SPLIT.item_of(user, candidate := f"op-{uuid.uuid4().hex[:8]}") != f"{user}~{shard}":
        pass
    return candidate


def submit(app: Converge, user: str, shard: int) -> str:
    operation_id = on_item(user, shard)
    app.enqueue("split.call.v1", operation_id, {"user_id": user})
    return operation_id


@pytest.fixture
def sqs_sent(split: Converge) -> list[tuple[str, dict[str, Any]]]:
    return sent(split.clients.sqs)


def test_a_429_pauses_every_item_of_a_sharded_key_and_charges_only_the_jobs_own_item(split, refuse, clock):
    # Given a user's job whose partner answers 429 for 30 s
    user = str(uuid.uuid4())
    refuse.append(30.0)
    refused = submit(split, user, 0)
    # When it runs, Then it waits for the pause
    assert deliver(split, refused).outcome is Outcome.WAITING
    # And a job of the key's other item starts right when the pause ends (its item paused, charged nothing)
    other = deliver(split, submit(split, user, 1))
    assert other.outcome is Outcome.HELD and f"starts at {iso(clock.now() + 30)}" in other.reason
    # And a job of the refused job's item waits a unit more, behind the slot the refused job holds
    behind = deliver(split, submit(split, user, 0))
    assert behind.outcome is Outcome.HELD and f"starts at {iso(clock.now() + 40)}" in behind.reason


def test_a_429_holds_its_own_items_slot_though_another_item_of_the_key_is_busy_past_the_pause(
    split, sqs_sent, calls, refuse, clock
):
    # Given a user whose second item is busy 40 s ahead, and a job on the first whose partner answers 429 for 30 s
    user = str(uuid.uuid4())
    split.rate_limits.reserve(SPLIT, f"{user}~1", 4)
    refuse.append(30.0)
    refused = submit(split, user, 0)
    # When it runs, Then it waits for the pause, its message holding the first slot of its own item after it
    assert deliver(split, refused).outcome is Outcome.WAITING
    (body,) = [json.loads(entry["MessageBody"]) for _, params in sqs_sent for entry in params.get("Entries", [])]
    assert (body["held_until"], body["held_by"]) == (clock.now() + 30, "split-api")
    # And come back then, it starts on that slot
    clock.advance(30)
    assert deliver(split, refused, body=json.dumps(body), message_id="m-2").outcome is Outcome.SUCCEEDED
    assert calls == [refused]


def test_an_operators_pause_and_release_act_on_every_item_of_a_sharded_key(split, clock):
    # Given a user's key, paused by an operator for 30 s
    user = str(uuid.uuid4())
    split.rate_limits.pause("split-api", user, 30, operator="ops@example.com")
    # Then a job of either of its items waits until then
    for shard in (0, 1):
        held = deliver(split, submit(split, user, shard))
        assert held.outcome is Outcome.HELD and f"starts at {iso(clock.now() + 30)}" in held.reason
    # When the operator releases the key, Then both items' pace is forgotten: a job of either starts at once
    assert split.rate_limits.release("split-api", user, operator="ops@example.com")
    assert [deliver(split, submit(split, user, shard)).outcome for shard in (0, 1)] == [Outcome.SUCCEEDED] * 2


def test_ctx_limits_calls_of_one_key_take_their_units_from_all_of_its_items(split, tables, clock):
    # Given forty calls of one user's key at once under ctx.limit (no operation id to pick an item by)
    user = str(uuid.uuid4())
    starts = [split.rate_limits.slot("split-api", user, 1) for _ in range(40)]
    # Then they took units of both of the key's items, so the last starts sooner than if one item took them all
    items = LimiterTable(tables["markers"], boto3.client("dynamodb")).keys("split-api")
    assert {state.key for state in items} == {f"{user}~0", f"{user}~1"}
    assert max(starts) < clock.now() + 390


def test_an_operator_sees_a_sharded_key_once_its_queue_its_items_together_and_its_earliest_next_start(split, clock):
    # Given a user's first item reserved two units ahead and its second four
    user = str(uuid.uuid4())
    split.rate_limits.reserve(SPLIT, f"{user}~0", 2)
    split.rate_limits.reserve(SPLIT, f"{user}~1", 4)
    # When an operator looks, Then the key is listed once: the items' queues added up, the earlier next start
    (waiting,) = split.rate_limits.waiting()
    assert (waiting.key, waiting.queued, waiting.next_start) == (user, 1 + 3, clock.now() + 20)


def test_a_sharded_keys_items_are_read_back_as_the_key_and_anything_else_as_written():
    # Given a limiter over two items / Then an item is read back as its key, a key holding the mark included
    assert [SPLIT.key_of_item(item) for item in ("k~1", "a~b~0")] == ["k", "a~b"]
    # And an item without a shard (kept from before the limiter was sharded) is read as it is
    assert [SPLIT.key_of_item(item) for item in ("legacy", "k~x")] == ["legacy", "k~x"]
    # And an unsharded limiter's items are its keys, whatever they hold
    assert Limiter("one", limit=5, period=1).key_of_item("a~1") == "a~1"
