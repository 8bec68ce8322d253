"""Per-key concurrency: a job over its cap is not started and not failed; it waits SCHEDULED and tries again.

Over moto: the cap's items in the markers table, the held job's message read back from the queue, its listing
from the state table's index. A run that delivers another job of its key while it runs is two at once.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import boto3
import pytest

from converge.flow.extensions import Extension, Hold
from converge.flow.registry import JobBinding, Policy, Queue, Registry
from converge.flow.runner import JobContext
from converge.model.clock import SequentialIds, iso
from converge.model.concurrency import Concurrency
from converge.model.errors import RegistryError, TransientError
from converge.model.outcomes import Outcome, Result
from converge.model.states import OperationState
from converge.runtime import Converge
from converge.runtime.clients import Clients
from converge.store.concurrency import ConcurrencyTable

from .conftest import Notice, body_of, deliver, sent

SYNC = Concurrency("partner-sync", limit=1, key="user_id", recheck=30)
"""One sync at a time per user."""
PAIR = Concurrency("pair", limit=2)
"""Two at once, all keys shared."""
EXPORT = Concurrency("partner-export", limit=1, key="user_id", recheck=600)
"""One export at a time per user, a held one trying again every ten minutes."""


class Sync:
    """Records each run; `during` is called while it runs (another delivery meanwhile), `fail` makes it fail."""

    def __init__(self, runs: list[str], during: list[Any], fail: list[Exception]) -> None:
        self.runs, self.during, self.fail = runs, during, fail

    def load(self, message: Notice, ctx: JobContext) -> str:
        return "ready"

    def run(self, message: Notice, loaded: str, ctx: JobContext) -> None:
        self.runs.append(ctx.operation_id)
        if self.during:
            self.during.pop(0)()
        if self.fail:
            raise self.fail.pop(0)


@pytest.fixture
def runs() -> list[str]:
    return []


@pytest.fixture
def during() -> list[Any]:
    return []


@pytest.fixture
def fail() -> list[Exception]:
    return []


@pytest.fixture
def app(settings, clock, runs, during, fail) -> Converge:
    def binding(job_type: str, cap: Concurrency | None) -> JobBinding:
        return JobBinding(
            job_type,
            Notice,
            lambda: Sync(runs, during, fail),
            Queue.CRITICAL,
            Policy.EFFECT_THEN_CLAIM,
            concurrency=cap,
        )

    registry = Registry(
        [
            binding("partner.sync.v1", SYNC),
            binding("partner.pair.v1", PAIR),
            binding("partner.export.v1", EXPORT),
            binding("mail.x.v1", None),
        ]
    )
    clients = Clients(dynamodb=boto3.client("dynamodb"), sqs=boto3.client("sqs"), ssm=boto3.client("ssm"))
    return Converge(settings, registry=registry, clients=clients, clock=clock, ids=SequentialIds("attempt"))


def enqueue(app: Converge, job_type: str = "partner.sync.v1", user: str | None = None) -> str:
    operation_id = f"op-{uuid.uuid4().hex[:8]}"
    app.enqueue(job_type, operation_id, {"user_id": user or str(uuid.uuid4())})
    return operation_id


def resent(outbox: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """The bodies sent again since the last look, each with its DelaySeconds (`delay`)."""
    found = [
        {**json.loads(entry["MessageBody"]), "delay": entry.get("DelaySeconds", 0)}
        for _, params in outbox
        for entry in params.get("Entries", [])
    ]
    outbox.clear()
    return found


def test_a_capped_job_alone_runs_for_one_write_to_take_its_slot_and_one_to_give_it_back(app, runs):
    # Given a sync capped at one per user, its key used once already (its item made)
    user = str(uuid.uuid4())
    deliver(app, enqueue(app, user=user))
    operation_id = enqueue(app, user=user)
    body = body_of(app, operation_id)
    seen = sent(app.clients.dynamodb)
    # When it is delivered
    result = deliver(app, operation_id, body=body)
    # Then it runs, and the cap cost two writes on the markers table (its slot taken, given back) and no read
    assert result.outcome is Outcome.SUCCEEDED and runs[-1] == operation_id
    on_markers = [name for name, params in seen if params.get("TableName") == app.settings.markers_table]
    assert on_markers == ["UpdateItem", "UpdateItem"]
    assert not [name for name, _ in seen if name in ("GetItem", "Query", "Scan")]


def test_a_second_job_of_a_key_while_one_runs_waits_scheduled_listed_and_counts_no_attempt(app, runs, during, clock):
    # Given a sync of a user that, while it runs, sees a second sync of the same user delivered
    user = str(uuid.uuid4())
    first, second = enqueue(app, user=user), enqueue(app, user=user)
    outbox = sent(app.clients.sqs)
    meanwhile: list[Result] = []
    during.append(lambda: meanwhile.append(deliver(app, second, message_id="m-2")))
    # When the first runs
    assert deliver(app, first).outcome is Outcome.SUCCEEDED
    # Then the second was not run and not failed: held, acknowledged, SCHEDULED with the reason, no attempt counted
    (held,) = meanwhile
    assert held.outcome is Outcome.HELD and held.outcome.acknowledged and runs == [first]
    assert "concurrency partner-sync" in held.reason and "1 of 1 running" in held.reason
    record = app.operations.require(second).state_record
    assert (record.state, record.attempts) == (OperationState.SCHEDULED, 0)
    assert second in {row["operation_id"] for row in app.operations.listings.iter_attention("SCHEDULED")}
    # And its message was sent again for its next try: the cap's recheck (the first's slot lapses later)
    (body,) = resent(outbox)
    assert (body["operation_id"], body["delay"]) == (second, 30)
    assert record.run_at == clock.now() + 30
    # When it comes back then, Then the first has given its slot back and it runs
    clock.advance(30)
    again = json.dumps({k: v for k, v in body.items() if k != "delay"})
    assert deliver(app, second, body=again, message_id="m-3").outcome is Outcome.SUCCEEDED
    assert runs == [first, second]


def test_other_keys_run_meanwhile_and_a_cap_of_two_lets_two_run(app, runs, during):
    # Given a sync of one user running
    first, other = enqueue(app), enqueue(app)
    outcomes: list[Outcome] = []
    during.append(lambda: outcomes.append(deliver(app, other, message_id="m-2").outcome))
    deliver(app, first)
    # Then another user's sync ran meanwhile
    assert outcomes == [Outcome.SUCCEEDED] and runs == [first, other]
    # Given a cap of two for all keys, two running
    a, b, c = (enqueue(app, "partner.pair.v1") for _ in range(3))
    nested: list[Outcome] = []
    during.append(lambda: nested.append(deliver(app, b, message_id="m-b").outcome))
    during.append(lambda: nested.append(deliver(app, c, message_id="m-c").outcome))
    # When a third comes while both run, Then it is held
    deliver(app, a)
    assert nested == [Outcome.HELD, Outcome.SUCCEEDED]  # c held inside b, inside a; b ran
    assert runs[-2:] == [a, b]


def test_a_slot_is_given_back_however_the_run_ends(app, runs, fail, during, clock):
    # Given a sync that fails with a transient error (a retry follows), on a user's key
    user = str(uuid.uuid4())
    first = enqueue(app, user=user)
    fail.append(TransientError("partner down"))
    assert deliver(app, first).outcome is Outcome.RETRY
    # When the next sync of the user arrives at once, Then it runs: the failed run gave its slot back
    second = enqueue(app, user=user)
    assert deliver(app, second).outcome is Outcome.SUCCEEDED
    # And a copy refused its lease (the operation is settled) gives back what it took
    assert deliver(app, second, message_id="m-copy").outcome is Outcome.DUPLICATE
    (key,) = [k for k in app.concurrency_caps.running() if k.key == user] or [None]
    assert key is None


def test_a_crashed_holders_slot_comes_back_when_its_lease_would_have_ended(app, runs, clock):
    # Given a sync whose process died while it ran: its slot taken until its lease's end, never given back
    user = str(uuid.uuid4())
    crashed = enqueue(app, user=user)
    table = ConcurrencyTable(app.settings.markers_table, app.clients.dynamodb)
    assert table.take(SYNC.name, user, crashed, clock.now() + 32, SYNC.limit, clock.now()).taken
    # When the next sync of the user comes ten seconds later
    clock.advance(10)
    waiting = enqueue(app, user=user)
    held = deliver(app, waiting)
    # Then it waits until that slot lapses (sooner than the recheck), listed with the running one
    assert held.outcome is Outcome.HELD and iso(clock.now() + 22) in held.reason
    (running,) = [k for k in app.concurrency_caps.running() if k.key == user]
    assert running.running == (crashed,) and running.full and running.next_free == clock.now() + 22
    # When the slot lapses, Then from that instant it is not shown running: the key has room, its job waits to try
    clock.advance(22)
    (running,) = [k for k in app.concurrency_caps.running() if k.key == user]
    assert (running.running, running.full, running.waiting) == ((), False, 1)
    # And the next delivery takes it back and runs
    assert deliver(app, waiting, message_id="m-2").outcome is Outcome.SUCCEEDED
    assert runs == [waiting]


def test_a_job_held_by_a_slot_about_to_lapse_tries_again_a_second_from_now_at_the_soonest(app, clock):
    # Given a user's key held by a crashed sync whose slot lapses half a second from now
    user = str(uuid.uuid4())
    table = ConcurrencyTable(app.settings.markers_table, app.clients.dynamodb)
    assert table.take(SYNC.name, user, "op-crashed", clock.now() + 0.5, SYNC.limit, clock.now()).taken
    # When the next sync of the user is delivered, Then it waits a second (its message's delay is whole seconds)
    waiting = enqueue(app, user=user)
    assert deliver(app, waiting).outcome is Outcome.HELD
    assert app.operations.require(waiting).state_record.run_at == clock.now() + 1


def test_a_held_jobs_message_carries_the_time_it_tries_again_to_the_millisecond(app, clock):
    # Given a user's key held by a crashed sync, at a moment finer than a millisecond
    clock.advance(0.1234)
    user = str(uuid.uuid4())
    table = ConcurrencyTable(app.settings.markers_table, app.clients.dynamodb)
    assert table.take(SYNC.name, user, "op-crashed", clock.now() + 0.5, SYNC.limit, clock.now()).taken
    waiting = enqueue(app, user=user)
    outbox = sent(app.clients.sqs)
    # When the next sync of the user is held, to try again a second from now
    assert deliver(app, waiting).outcome is Outcome.HELD
    # Then its message is sent again carrying that time, to the millisecond
    (body,) = resent(outbox)
    assert (body["operation_id"], body["held_until"]) == (waiting, 1_800_000_001.123)


def test_a_copy_of_a_running_operation_takes_no_second_slot_and_gives_back_none(app, runs, during, clock):
    # Given a sync that, while it runs, sees a copy of its own message delivered
    user = str(uuid.uuid4())
    first = enqueue(app, user=user)
    other = enqueue(app, user=user)
    meanwhile: list[Outcome] = []

    def copy_then_other() -> None:
        meanwhile.append(deliver(app, first, message_id="m-copy").outcome)
        meanwhile.append(deliver(app, other, message_id="m-other").outcome)

    during.append(copy_then_other)
    # When it runs, Then the copy is refused by its lease (busy), and gave back no slot: the other sync still waits
    deliver(app, first)
    assert meanwhile == [Outcome.BUSY, Outcome.HELD] and runs == [first]
    # And the run, once ended, gave back its own slot (the copy's end forgot only the copy's): the other sync runs at
    # its next try
    assert not [k for k in app.concurrency_caps.running() if k.key == user and k.running]
    clock.advance(SYNC.recheck)
    assert deliver(app, other, message_id="m-other-again").outcome is Outcome.SUCCEEDED and runs == [first, other]


def test_a_paused_keys_job_waits_the_caps_recheck_when_longer_and_at_least_a_second_before_its_expiry(app, fail, clock):
    # Given a user's export key (held exports try again every ten minutes) and sync key, both paused
    user = str(uuid.uuid4())
    caps = app.concurrency_caps
    assert caps.pause(EXPORT.name, user, "ops@example.com") and caps.pause(SYNC.name, user, "ops@example.com")
    # When an export of the user is delivered, Then it tries again after the cap's recheck, not the pause's five minutes
    export = enqueue(app, "partner.export.v1", user=user)
    assert deliver(app, export).outcome is Outcome.HELD
    assert app.operations.require(export).state_record.run_at == clock.now() + 600

    def expiring(in_seconds: float) -> tuple[str, str]:
        operation_id = f"op-{uuid.uuid4().hex[:8]}"
        app.enqueue("partner.sync.v1", operation_id, {"user_id": user}, expires_at=iso(clock.now() + in_seconds))
        return operation_id, app.dispatcher.envelope_for(app.operations.require(operation_id)).to_body()

    # When a sync of the user that expires half a second from now is delivered, Then it comes back a second from now
    # (its message's delay is whole seconds), and expires then
    soon, body = expiring(0.5)
    assert deliver(app, soon, body=body).outcome is Outcome.HELD
    assert app.operations.require(soon).state_record.run_at == clock.now() + 1
    # Given a sync of the user that started before the pause and failed (a retry follows), expiring in a minute
    caps.resume(SYNC.name, user, "ops@example.com")
    started, body = expiring(60)
    fail.append(TransientError("partner down"))
    assert deliver(app, started, body=body).outcome is Outcome.RETRY
    caps.pause(SYNC.name, user, "ops@example.com")
    # When its retry comes at its very expiry, Then it carries on as started work does, and waits as any other job
    clock.advance(60)
    assert deliver(app, started, attempt=2, message_id="m-2", body=body).outcome is Outcome.HELD
    assert app.operations.require(started).state_record.run_at == clock.now() + 300


class Died(BaseException):
    """The process dies while the job runs: not an error the pipeline may classify, and nothing after it runs there."""


def test_a_delivery_whose_process_dies_keeps_its_slot_and_the_one_it_ran_inside_gives_back_only_its_own(
    app, runs, fail, during, clock
):
    # Given a sync of a user whose lease lapses while it works, and another delivery of it that takes over then (its
    # own slot taken) and dies with its process, as the local cloud's takeover runs inside the first
    user = str(uuid.uuid4())
    first = enqueue(app, user=user)
    died: list[BaseException] = []

    def taken_over_then_dies() -> None:
        clock.advance(60)
        fail.append(Died())
        with pytest.raises(Died) as death:
            deliver(app, first, message_id="m-takeover")
        died.append(death.value)

    during.append(taken_over_then_dies)
    # When the first delivery ends
    deliver(app, first)
    # Then the death went on up as it was (nothing given back on the way), and the first gave back nothing of the
    # dead delivery's slot: the user's key stays held by the operation until that delivery's lease would have ended
    assert len(died) == 1 and runs == [first, first]
    (key,) = [k for k in app.concurrency_caps.running() if k.key == user]
    assert (key.running, key.next_free) == ((first,), clock.now() + 30 + 2 + 1)
    second = enqueue(app, user=user)
    assert deliver(app, second, message_id="m-second").outcome is Outcome.HELD


class Unavailable(Extension):
    """Another flow control whose store fails when asked (asked after the cap, which took its slot)."""

    def hold(self, envelope: Any, binding: Any, lease_until: float, accepted_at: float | None = None) -> Hold | None:
        raise RuntimeError("limiter table unavailable")


def test_a_slot_taken_is_given_back_when_a_later_hold_fails(app, runs):
    # Given the cap, and another flow control asked after it whose store fails
    user = str(uuid.uuid4())
    app.pipeline  # noqa: B018 - the runtime's own extensions join first
    app.extensions.add(Unavailable())
    # When a sync is delivered, Then it is not run: back to its queue with the reason, nothing recorded
    first = enqueue(app, user=user)
    result = deliver(app, first)
    assert result.outcome is Outcome.RETRY and "limiter table unavailable" in result.reason and runs == []
    # And the slot the cap took for it was given back: nothing runs under the user's key
    assert [key for key in app.concurrency_caps.running() if key.key == user] == []


def test_a_malformed_cap_or_two_caps_under_one_name_are_refused_when_the_catalogue_loads():
    with pytest.raises(RegistryError, match="limit must be"):
        Concurrency("sync", limit=0)
    with pytest.raises(RegistryError, match="key must name"):
        Concurrency("sync", key="not a field")
    with pytest.raises(RegistryError, match="recheck"):
        Concurrency("sync", recheck=0)
    one = JobBinding("a.b.v1", Notice, object, Queue.CRITICAL, Policy.EFFECT_THEN_CLAIM, concurrency=SYNC)
    other = JobBinding(
        "a.c.v1", Notice, object, Queue.CRITICAL, Policy.EFFECT_THEN_CLAIM, concurrency=Concurrency(SYNC.name, 2)
    )
    with pytest.raises(RegistryError, match="another concurrency cap"):
        Registry([one, other])


LIMIT_REFUSED = "concurrency sync: limit must be a whole number from 1 to 100"
RECHECK_REFUSED = "concurrency sync: recheck must be from 1 to 900 seconds"


def test_a_cap_takes_its_bounds_themselves_and_a_refusal_says_what_is_allowed():
    # Given caps at the edges of what may be declared: a hundred at once, a recheck of one second or of 900
    # Then each is accepted as declared
    assert (Concurrency("edge", limit=100, recheck=1).limit, Concurrency("edge", recheck=1.0).recheck) == (100, 1.0)
    assert Concurrency("edge", recheck=900).recheck == 900
    # When a cap is declared past them (a name not lowercase, a flag for a number, one more than allowed)
    # Then the catalogue refuses it, saying what is allowed
    for fields, refusal in [
        (
            {"name": "Partner Sync"},
            "concurrency name 'Partner Sync' must be lowercase letters, digits and '-' (at most 32)",
        ),
        ({"name": "sync", "limit": True}, LIMIT_REFUSED),
        ({"name": "sync", "limit": 101}, LIMIT_REFUSED),
        ({"name": "sync", "recheck": True}, RECHECK_REFUSED),
        ({"name": "sync", "recheck": 900.5}, RECHECK_REFUSED),
    ]:
        with pytest.raises(RegistryError) as refused:
            Concurrency(**fields)
        assert str(refused.value) == refusal


def test_a_cap_describes_itself_as_the_operator_sees_it_listed():
    # Given caps with and without a key, in each mode
    # Then each reads as `converge limits running` and `converge status` show its limit: how many at once, per
    # which field, and what a request does when the key is full (queue, the default, says nothing)
    assert SYNC.describe() == "1 at once per user_id"
    assert PAIR.describe() == "2 at once"
    assert Concurrency("refresh", key="user_id", mode="skip").describe() == "1 at once per user_id, skip when full"
    assert Concurrency("render", limit=3, mode="replace").describe() == "3 at once, replace when full"
