"""A concurrency cap's modes (over moto): in skip mode a request while the key is full ends NOOP naming its holders;
in replace mode the newest request waits and each older one ends NOOP "replaced by" the newer; an operator pauses a
key (none of its jobs starts) and releases it, or frees a slot left behind."""

from __future__ import annotations

import json
import uuid
from typing import Any

import boto3
import pytest

import converge.flow.concurrency as concurrency_module
from converge.flow.concurrency import WAITER_GRACE_SECONDS
from converge.flow.registry import JobBinding, Policy, Queue, Registry
from converge.flow.runner import Delivery, JobContext
from converge.model.clock import SequentialIds, iso
from converge.model.concurrency import Concurrency
from converge.model.errors import ConfigurationError, RegistryError
from converge.model.outcomes import Outcome, Result
from converge.model.records import HistoryEntry, StateRecord
from converge.model.states import OperationState
from converge.runtime import Converge
from converge.runtime.clients import Clients
from converge.store.concurrency import ConcurrencyTable, Taken

from .conftest import Notice, Racing, body_of, sent, tables_called, throttle

ONCE = Concurrency("refresh", limit=1, key="user_id", mode="skip")
"""A refresh of a user while one runs is not needed: it ends NOOP."""
LATEST = Concurrency("render", limit=1, key="user_id", mode="replace", recheck=20)
"""A render of a user while one runs: only the newest request waits."""
DIGESTS = Concurrency("digest", limit=2, mode="skip")
"""Two digests at once, all users shared: a third while both run is not needed."""


class Recorded:
    """Records each run; `during` is called while it runs (another delivery meanwhile)."""

    def __init__(self, runs: list[str], during: list[Any]) -> None:
        self.runs, self.during = runs, during

    def load(self, message: Notice, ctx: JobContext) -> str:
        return "ready"

    def run(self, message: Notice, loaded: str, ctx: JobContext) -> None:
        self.runs.append(ctx.operation_id)
        while self.during:
            self.during.pop(0)()


@pytest.fixture
def runs() -> list[str]:
    return []


@pytest.fixture
def during() -> list[Any]:
    return []


@pytest.fixture
def app(settings, clock, runs, during) -> Converge:
    def binding(job_type: str, cap: Concurrency) -> JobBinding:
        runner = Recorded(runs, during)
        return JobBinding(job_type, Notice, lambda: runner, Queue.CRITICAL, Policy.EFFECT_THEN_CLAIM, concurrency=cap)

    registry = Registry(
        [binding("user.refresh.v1", ONCE), binding("user.render.v1", LATEST), binding("user.digest.v1", DIGESTS)]
    )
    clients = Clients(dynamodb=boto3.client("dynamodb"), sqs=boto3.client("sqs"), ssm=boto3.client("ssm"))
    return Converge(settings, registry=registry, clients=clients, clock=clock, ids=SequentialIds("attempt"))


def enqueue(app: Converge, job_type: str, user: str) -> str:
    operation_id = f"op-{uuid.uuid4().hex[:8]}"
    app.enqueue(job_type, operation_id, {"user_id": user})
    return operation_id


def deliver(
    app: Converge, operation_id: str, accepted: float | None, message_id: str = "m-1", body: str = ""
) -> Result:
    """An operation's message as the relay sends it, with when its request was accepted (None: a message sent again,
    which carries no acceptance)."""
    delivery = Delivery(
        message_id, 1, app.settings.max_receive_count, lambda: 30_000, iso(accepted) if accepted else None
    )
    return app.pipeline.process(body or body_of(app, operation_id), delivery)


def ended(app: Converge, operation_id: str) -> tuple[OperationState, str]:
    operation = app.operations.require(operation_id)
    return operation.state, operation.history[-1].reason


def test_a_cap_refuses_a_mode_it_does_not_know():
    with pytest.raises(RegistryError, match="mode must be one of queue, skip, replace"):
        Concurrency("x", mode="latest")


def test_in_skip_mode_a_request_while_the_key_runs_ends_noop_naming_the_holder(app, runs, during, clock):
    # Given a refresh of a user that, while it runs, sees a second refresh of the same user delivered
    user = str(uuid.uuid4())
    first, second = enqueue(app, "user.refresh.v1", user), enqueue(app, "user.refresh.v1", user)
    meanwhile: list[Result] = []
    during.append(lambda: meanwhile.append(deliver(app, second, clock.now(), "m-2")))
    # When the first runs
    assert deliver(app, first, clock.now()).outcome is Outcome.SUCCEEDED
    # Then the second was not run and did not wait: it ended NOOP with its reason, naming what held the key
    (skipped,) = meanwhile
    assert skipped.outcome is Outcome.NOOP and runs == [first]
    state, reason = ended(app, second)
    assert state is OperationState.NOOP and reason.startswith("skipped: concurrency refresh")
    assert f"held by {first}" in reason
    # And a copy of it delivered again finds it settled; the next refresh, with the key free, runs
    assert deliver(app, second, clock.now(), "m-copy").outcome is Outcome.DUPLICATE
    third = enqueue(app, "user.refresh.v1", user)
    assert deliver(app, third, clock.now()).outcome is Outcome.SUCCEEDED and runs == [first, third]


def test_in_skip_mode_a_request_while_the_key_is_full_names_every_holder(app, runs, during, clock):
    # Given two digests running at once (the second delivered while the first runs) under a shared cap of two
    first, second, third = (enqueue(app, "user.digest.v1", str(uuid.uuid4())) for _ in range(3))
    during.append(lambda: deliver(app, second, clock.now(), "m-2"))
    # When a third is delivered while both run
    during.append(lambda: deliver(app, third, clock.now(), "m-3"))
    deliver(app, first, clock.now())
    # Then it ended NOOP, its reason naming both holders in order
    holders = ", ".join(sorted([first, second]))
    reason = f"skipped: concurrency digest (shared: 2 of 2 running) is held by {holders}"
    assert ended(app, third) == (OperationState.NOOP, reason) and runs == [first, second]


def test_in_skip_mode_a_request_refused_with_no_live_holder_to_name_says_another_operation_holds_the_key(
    app, runs, clock, monkeypatch
):
    # Given a refresh whose take is refused with no live holder left to name (its tries all lost to other writers,
    # whose slots lapsed since)
    user = str(uuid.uuid4())
    refused = enqueue(app, "user.refresh.v1", user)
    monkeypatch.setattr(app.concurrency_caps._table, "take", lambda *args, **kwargs: Taken(False))
    # When it is delivered, Then it ends NOOP, its reason saying another operation holds the key
    assert deliver(app, refused, clock.now()).outcome is Outcome.NOOP and runs == []
    reason = f"skipped: concurrency refresh (key {user}: 0 of 1 running) is held by another operation"
    assert ended(app, refused) == (OperationState.NOOP, reason)


def test_a_held_job_forgets_the_keys_waiters_whose_try_is_over_a_minute_past_and_keeps_the_others(
    app, clock, monkeypatch
):
    # Given a render key full, on which three jobs were noted waiting: one due 61 s ago, one exactly a minute ago,
    # one in five seconds
    now = clock.now()
    waiting = {"long-gone": now - WAITER_GRACE_SECONDS - 1, "a-minute-ago": now - WAITER_GRACE_SECONDS, "soon": now + 5}
    refused = Taken(False, holders={"holder": now + 100}, waiting=waiting)
    monkeypatch.setattr(app.concurrency_caps._table, "take", lambda *args, **kwargs: refused)
    noted: list[tuple[str, list[str]]] = []
    monkeypatch.setattr(
        app.concurrency_caps._table, "note_waiting", lambda cap, key, op, until, stale: noted.append((op, stale))
    )
    held = enqueue(app, "user.render.v1", str(uuid.uuid4()))
    # When another job of the key is held
    assert deliver(app, held, now).outcome is Outcome.HELD
    # Then noting it on the key forgets only the one whose try is more than a minute past
    assert noted == [(held, ["long-gone"])]


def test_in_skip_mode_a_request_that_loses_its_keys_first_use_to_another_runs_in_the_slot_left(app, runs, clock):
    # Given a digest under a shared cap of two never used, and a digest of another process taking the key's first
    # slot (and running on) just before this one's delivery makes the key's item
    digest = enqueue(app, "user.digest.v1", str(uuid.uuid4()))
    table = app.concurrency_caps._table
    elsewhere = ConcurrencyTable(table._table, boto3.client("dynamodb"))

    def other_first() -> None:
        assert elsewhere.take("digest", DIGESTS.key_of({}), "op-elsewhere", clock.now() + 60, 2, clock.now()).taken

    table._client = Racing(table._client, "SET #h = :holders", other_first)
    # When it is delivered
    result = deliver(app, digest, clock.now())
    # Then it ran in the slot left, once, and ended SUCCEEDED: one of two was running, it was not skipped
    assert (result.outcome, runs) == (Outcome.SUCCEEDED, [digest])
    assert ended(app, digest)[0] is OperationState.SUCCEEDED
    # And it gave its slot back: the other holds the key alone
    (key,) = app.concurrency_caps.running()
    assert key.running == ("op-elsewhere",)


def test_in_replace_mode_only_the_newest_waits_and_the_one_it_displaced_ends_noop(app, runs, during, clock):
    # Given a render of a user that, while it runs, sees two more renders of the user arrive, accepted in order
    user = str(uuid.uuid4())
    t0 = clock.now()
    first, older, newer = (enqueue(app, "user.render.v1", user) for _ in range(3))
    bodies = {op: body_of(app, op) for op in (older, newer)}
    outbox = sent(app.clients.sqs)
    meanwhile: list[Result] = []
    during.append(lambda: meanwhile.append(deliver(app, older, t0 + 1, "m-older")))
    during.append(lambda: meanwhile.append(deliver(app, newer, t0 + 2, "m-newer")))
    # When the first runs
    assert deliver(app, first, t0).outcome is Outcome.SUCCEEDED
    # Then both others waited (held): the newer is the key's newest, the older displaced
    assert [r.outcome for r in meanwhile] == [Outcome.HELD, Outcome.HELD]
    # And the key's item holds the newest as the module says: its id, and when it was accepted in milliseconds
    items = app.clients.dynamodb.scan(TableName=app.settings.markers_table)["Items"]
    assert [item["newest"]["M"] for item in items if "newest" in item] == [
        {"id": {"S": newer}, "at": {"N": str(round((t0 + 2) * 1000))}}
    ]
    resent_ops = [json.loads(e["MessageBody"])["operation_id"] for _, p in outbox for e in p.get("Entries", [])]
    assert resent_ops == [older, newer]
    # When their messages come back (sent again: no acceptance on them), the older one first
    clock.advance(20)
    assert deliver(app, older, None, "m-older-2", bodies[older]).outcome is Outcome.NOOP
    assert deliver(app, newer, None, "m-newer-2", bodies[newer]).outcome is Outcome.SUCCEEDED
    # Then the older ended NOOP "replaced by" the newer, and only the newer ran after the first
    assert ended(app, older) == (OperationState.NOOP, f"replaced by {newer} (concurrency render, key {user})")
    assert runs == [first, newer]


def test_in_replace_mode_a_request_sent_again_takes_its_place_from_its_record_not_as_the_oldest(app, runs, clock):
    from .conftest import set_toggle

    # Given the newer of two renders of a user (accepted a second after the other) delivered while renders are
    # switched off: PAUSED, its record keeping when it was accepted
    user = str(uuid.uuid4())
    t0 = clock.now()
    older, newer = (enqueue(app, "user.render.v1", user) for _ in range(2))
    toggle = app.registry.get("user.render.v1").toggle_key
    set_toggle(toggle, "off")
    assert deliver(app, newer, t0 + 2, "m-newer").outcome is Outcome.PAUSED
    set_toggle(toggle, "on")
    # And the older then delivered with its acceptance, and run: the key's newest so far
    assert deliver(app, older, t0 + 1, "m-older").outcome is Outcome.SUCCEEDED
    # When the newer one's message comes back sent again (resumed after the switch: no acceptance on it)
    result = deliver(app, newer, None, "m-newer-again")
    # Then it is not replaced by the older one: its record says it is newer, and it runs after it
    assert result.outcome is Outcome.SUCCEEDED and runs == [older, newer]


def test_a_request_sent_again_whose_record_cannot_be_read_takes_the_unknown_place_and_passes_only_as_newest(
    app, runs, clock, monkeypatch
):
    # Given an older render run (the key's newest), and a newer one whose record cannot be read
    user = str(uuid.uuid4())
    t0 = clock.now()
    older, newer = (enqueue(app, "user.render.v1", user) for _ in range(2))
    assert deliver(app, older, t0 + 1, "m-older").outcome is Outcome.SUCCEEDED

    def unreadable(operation_id: str) -> float | None:
        raise TimeoutError("the state table did not answer")

    monkeypatch.setattr(app.concurrency_caps, "_accepted", unreadable)
    # When the newer one's message comes back sent again (no acceptance on it)
    result = deliver(app, newer, None, "m-newer-again")
    # Then its place is unknown, older than any: the key's newest replaces it (logged, not failed)
    assert result.outcome is Outcome.NOOP and result.reason.startswith(f"replaced by {older}") and runs == [older]


def test_requests_whose_places_are_both_unknown_neither_replaces_the_other(app, runs, clock, monkeypatch):
    # Given two renders of a user sent again (no acceptance on them) whose records cannot be read: no place in the
    # key's order for either (the one with the later id delivered first, so that ids alone would order them)
    user = str(uuid.uuid4())
    later_id, earlier_id = sorted((enqueue(app, "user.render.v1", user) for _ in range(2)), reverse=True)

    def unreadable(operation_id: str) -> float | None:
        raise TimeoutError("the state table did not answer")

    monkeypatch.setattr(app.concurrency_caps, "_accepted", unreadable)
    # When one runs, and then the other is delivered
    assert deliver(app, later_id, None, "m-later").outcome is Outcome.SUCCEEDED
    result = deliver(app, earlier_id, None, "m-earlier")
    # Then the other runs too: a request of unknown place never became the key's newest, so it replaces nothing
    assert result.outcome is Outcome.SUCCEEDED and runs == [later_id, earlier_id]
    items = app.clients.dynamodb.scan(TableName=app.settings.markers_table)["Items"]
    assert [item for item in items if "newest" in item] == []


def test_a_record_keeps_an_acceptance_only_when_it_began_with_one():
    # Given records begun by an acceptance, by an operator's cancel before the relay ran, and none at all
    accepted = HistoryEntry(OperationState.ACCEPTED, "2026-01-01T00:00:00.000Z", "accepted")
    cancelled = HistoryEntry(OperationState.CANCELLED, "2026-01-01T00:01:00.000Z", "cancelled by cli:alice")
    began_accepted = StateRecord("op-1", OperationState.CANCELLED, history=(accepted, cancelled))
    began_cancelled = StateRecord("op-2", OperationState.CANCELLED, history=(cancelled,))
    # Then only the first says when it was accepted; each says when its record began
    assert began_accepted.accepted_at == accepted.at and began_accepted.created_at == accepted.at
    assert began_cancelled.accepted_at is None and began_cancelled.created_at == cancelled.at
    assert StateRecord.absent("op-3").accepted_at is None


def test_a_request_cancelled_before_it_was_accepted_and_sent_again_never_replaces_a_newer_one(app, runs, clock):
    # Given two renders of a user, the older cancelled by an operator before the relay accepted it (its record
    # begins CANCELLED, at the time of the cancel, a while after both were written)
    user = str(uuid.uuid4())
    t0 = clock.now()
    older, newer = (enqueue(app, "user.render.v1", user) for _ in range(2))
    clock.advance(60)
    assert app.operator("cli:alice").cancel(older, "no longer wanted").applied
    # When a copy of the older one's message comes (sent again: no acceptance on it), then the newer one's
    deliver(app, older, None, "m-older-again")
    result = deliver(app, newer, t0 + 2, "m-newer")
    # Then the cancel's time is not taken for the older one's acceptance: the newer one runs, replaced by nothing
    assert result.outcome is Outcome.SUCCEEDED and runs == [newer]
    assert ended(app, older)[0] is OperationState.CANCELLED


@pytest.mark.parametrize("cancelled", ["before it was accepted", "while it waited as the newest"])
def test_a_newer_request_cancelled_before_it_ran_replaces_nothing_and_the_older_one_runs(
    app, runs, during, clock, cancelled
):
    # Given a render of a user running, and two more renders of the user, the newer cancelled by an operator (before
    # the relay accepted it, or while it waited as the key's newest), delivered while the first runs
    user = str(uuid.uuid4())
    t0 = clock.now()
    first, older, newer = (enqueue(app, "user.render.v1", user) for _ in range(3))
    operator = app.operator("cli:alice")
    if cancelled == "before it was accepted":
        assert operator.cancel(newer, "no longer wanted").applied
    meanwhile: list[Result] = []
    during.append(lambda: meanwhile.append(deliver(app, newer, t0 + 2, "m-newer")))
    assert deliver(app, first, t0, "m-first").outcome is Outcome.SUCCEEDED
    items = app.clients.dynamodb.scan(TableName=app.settings.markers_table)["Items"]
    assert [item["newest"]["M"]["id"]["S"] for item in items if "newest" in item] == [newer]  # it became the newest
    if cancelled == "while it waited as the newest":
        assert meanwhile[0].outcome is Outcome.HELD and operator.cancel(newer, "no longer wanted").applied
    # When the older one is delivered (accepted before the newer)
    result = deliver(app, older, t0 + 1, "m-older")
    # Then the cancelled one replaces nothing, as it never runs: the older one runs, not NOOP "replaced by" it, and the
    # key names the older one as its newest now, not the cancelled one
    assert result.outcome is Outcome.SUCCEEDED and runs == [first, older]
    assert ended(app, newer)[0] is OperationState.CANCELLED
    items = app.clients.dynamodb.scan(TableName=app.settings.markers_table)["Items"]
    assert [item["newest"]["M"]["id"]["S"] for item in items if "newest" in item] == [older]


def test_in_replace_mode_an_older_request_never_replaces_a_newer_one(app, runs, during, clock):
    # Given a render running, and while it runs the newer of two requests arrives first (SQS does not keep order)
    user = str(uuid.uuid4())
    t0 = clock.now()
    first, older, newer = (enqueue(app, "user.render.v1", user) for _ in range(3))
    meanwhile: list[Result] = []
    during.append(lambda: meanwhile.append(deliver(app, newer, t0 + 2, "m-newer")))
    during.append(lambda: meanwhile.append(deliver(app, older, t0 + 1, "m-older")))
    deliver(app, first, t0)
    # Then the newer waits and the older, arriving after it, ends NOOP at once: it does not displace the newer
    assert [r.outcome for r in meanwhile] == [Outcome.HELD, Outcome.NOOP]
    assert ended(app, older)[1].startswith(f"replaced by {newer}")
    assert app.operations.require(newer).state is OperationState.SCHEDULED
    # And a request accepted before one that ran ends NOOP too, even with the key free
    late = enqueue(app, "user.render.v1", user)
    assert deliver(app, late, t0 + 1.5, "m-late").outcome is Outcome.NOOP
    assert ended(app, late)[1].startswith(f"replaced by {newer}")
    assert runs == [first]


def test_the_operator_sees_a_key_with_what_runs_the_newest_waiting_and_when_it_tries_until_a_minute_past(
    app, runs, during, clock
):
    # Given a render of a user that, while it runs, is looked at, then sees a newer render of the user arrive, then is
    # looked at again
    user = str(uuid.uuid4())
    t0 = clock.now()
    first, newer = (enqueue(app, "user.render.v1", user) for _ in range(2))

    def shown() -> list[tuple[Any, ...]]:
        return [
            (k.running, k.full, k.newest, k.waiting, k.next_start)
            for k in app.concurrency_caps.running()
            if k.key == user
        ]

    views: list[list[tuple[Any, ...]]] = []
    during.append(lambda: views.append(shown()))
    during.append(lambda: deliver(app, newer, t0 + 1, "m-newer"))
    during.append(lambda: views.append(shown()))
    # When the first runs
    assert deliver(app, first, t0).outcome is Outcome.SUCCEEDED
    # Then alone, the key showed it running and full, nothing waiting, and no newest apart from it (it runs)
    assert views[0] == [((first,), True, None, 0, None)]
    # And then the newer request waiting as the key's newest, to try again at the cap's recheck
    assert views[1] == [((first,), True, newer, 1, t0 + 20)]
    # When the first has ended, Then the key is still shown for its waiting request, a minute past its try included
    assert shown() == [((), False, newer, 1, t0 + 20)]
    clock.advance(20 + 60)
    assert shown() == [((), False, newer, 1, t0 + 20)]
    # And no longer after that minute (it ran, ended or moved on)
    clock.advance(1)
    assert shown() == []


def test_each_job_a_cap_holds_back_is_counted_by_what_became_of_it_for_its_job_type(app, during, clock, monkeypatch):
    # Given the counts the caps publish (CloudWatch metrics, per job type), observed
    counted: list[tuple[str, str | None]] = []
    monkeypatch.setattr(
        concurrency_module, "count", lambda name, job_type=None, value=1: counted.append((name, job_type))
    )
    user = str(uuid.uuid4())
    t0 = clock.now()
    # When a refresh of a user runs while another comes (skipped), and a render runs while a newer one comes (held),
    # then an older one (replaced)
    running, skipped = enqueue(app, "user.refresh.v1", user), enqueue(app, "user.refresh.v1", user)
    during.append(lambda: deliver(app, skipped, t0, "m-skipped"))
    deliver(app, running, t0)
    render, older, newer = (enqueue(app, "user.render.v1", user) for _ in range(3))
    during.append(lambda: deliver(app, newer, t0 + 2, "m-newer"))
    during.append(lambda: deliver(app, older, t0 + 1, "m-older"))
    deliver(app, render, t0)
    # Then each was counted once, by name, for its job type; the ones that ran were not
    assert counted == [
        ("concurrency_skipped", "user.refresh.v1"),
        ("concurrency_held", "user.render.v1"),
        ("concurrency_replaced", "user.render.v1"),
    ]


def test_a_paused_key_starts_none_of_its_jobs_until_an_operator_releases_it(app, runs, clock):
    # Given a user's render key paused by an operator
    user = str(uuid.uuid4())
    caps = app.concurrency_caps
    assert caps.pause("render", user, "ops@example.com") and not caps.pause("render", user, "someone-else")
    # Then the key is listed paused at once, full, with nothing running or waiting on it yet
    (key,) = [k for k in caps.running() if k.key == user]
    assert (key.paused_by, key.full, key.running, key.waiting, key.next_start) == ("ops@example.com", True, (), 0, None)
    # When a render of the user is delivered
    waiting = enqueue(app, "user.render.v1", user)
    held = deliver(app, waiting, clock.now())
    # Then it waits SCHEDULED, listed, with who paused the key, trying again in five minutes; nothing ran or failed
    assert held.outcome is Outcome.HELD and "paused by ops@example.com" in held.reason and runs == []
    record = app.operations.require(waiting).state_record
    assert (record.state, record.attempts, record.run_at) == (OperationState.SCHEDULED, 0, clock.now() + 300)
    (key,) = [k for k in caps.running() if k.key == user]
    assert (key.paused_by, key.full, key.newest) == ("ops@example.com", True, waiting)
    assert (key.waiting, key.next_start) == (1, clock.now() + 300)
    # When the operator releases the key and the job comes back, Then it runs
    assert caps.resume("render", user, "ops@example.com").released
    assert not caps.resume("render", user, "ops@example.com").released
    clock.advance(300)
    assert deliver(app, waiting, None, "m-2").outcome is Outcome.SUCCEEDED and runs == [waiting]


def test_a_render_sent_again_on_a_key_paused_before_any_request_waits_on_the_pause(app, runs, clock):
    # Given a user's render key paused by an operator before any render came (the key has no newest), and every
    # write to the markers table counted
    user = str(uuid.uuid4())
    caps = app.concurrency_caps
    assert caps.pause("render", user, "ops@example.com")
    calls = sent(app.clients.dynamodb)
    # When a render of the user is delivered by a message sent again (no acceptance: resumed after its kill switch)
    waiting = enqueue(app, "user.render.v1", user)
    held = deliver(app, waiting, None)
    # Then it waits SCHEDULED on the pause, naming who paused the key, trying again in five minutes; nothing ran
    assert held.outcome is Outcome.HELD and "paused by ops@example.com" in held.reason and runs == []
    record = app.operations.require(waiting).state_record
    assert (record.state, record.attempts, record.run_at) == (OperationState.SCHEDULED, 0, clock.now() + 300)
    # And it cost its one refused take and its note on the key (the key's first waiter: two writes), and is listed
    # waiting there
    markers = app.settings.markers_table
    assert [name for name, table in tables_called(calls) if table == markers] == ["UpdateItem"] * 3
    (key,) = [k for k in caps.running() if k.key == user]
    assert (key.paused_by, key.waiting, key.next_start) == ("ops@example.com", 1, clock.now() + 300)
    assert key.newest is None  # its acceptance unknown, it is never made the key's newest
    # When the operator releases the key, Then the woken render runs
    assert caps.resume("render", user, "ops@example.com").woken == (waiting,)
    assert deliver(app, waiting, None, "m-2").outcome is Outcome.SUCCEEDED and runs == [waiting]


def test_an_operator_frees_a_slot_left_behind(app, runs, clock):
    # Given a refresh whose holder died with the slot (its lease far off), so the next is skipped
    user = str(uuid.uuid4())
    table = app.concurrency_caps._table
    assert table.take("refresh", user, "op-dead", clock.now() + 900, 1, clock.now()).taken
    caps = app.concurrency_caps
    # When an operator frees it, Then the next refresh runs; freeing it again finds nothing
    assert caps.release_slot("refresh", user, "op-dead", "ops@example.com")
    assert not caps.release_slot("refresh", user, "op-dead", "ops@example.com")
    nxt = enqueue(app, "user.refresh.v1", user)
    assert deliver(app, nxt, clock.now()).outcome is Outcome.SUCCEEDED and runs == [nxt]


def test_an_operator_naming_a_cap_the_catalogue_does_not_declare_is_told_so_and_nothing_is_written(app):
    # Given the catalogue's caps, and every call to the markers table counted
    calls = sent(app.clients.dynamodb)
    # When an operator pauses, releases or frees a slot of a cap it does not declare
    for action in (
        lambda caps: caps.pause("randers", None, "ops@example.com"),
        lambda caps: caps.resume("randers", None, "ops@example.com"),
        lambda caps: caps.release_slot("randers", None, "op-1", "ops@example.com"),
    ):
        # Then each is refused, naming the cap
        with pytest.raises(ConfigurationError) as refused:
            action(app.concurrency_caps)
        assert str(refused.value) == "no concurrency cap named 'randers' is declared in the catalogue"
    # And nothing was written
    assert calls == []


def test_a_job_held_again_and_again_keeps_a_bounded_history_its_last_hold_last(app, clock):
    # Given a user's render key paused, and a render of the user
    user = str(uuid.uuid4())
    app.concurrency_caps.pause("render", user, "ops@example.com")
    waiting = enqueue(app, "user.render.v1", user)
    body = body_of(app, waiting)
    # When it comes back thirty times, each at its next try, held each time (nothing that knows its record writes
    # between)
    for n in range(30):
        last = clock.now()
        assert deliver(app, waiting, None if n else last, f"m-{n}", body).outcome is Outcome.HELD
        clock.advance(app.operations.require(waiting).state_record.run_at - last)
    # Then its history holds at most the limit and one, accepted first and the latest hold last
    history = app.operations.require(waiting).history
    assert len(history) <= 11 and history[0].state == "ACCEPTED"
    assert history[-1].state == "SCHEDULED" and history[-1].at == iso(last)


def test_a_paused_keys_jobs_try_again_less_often_the_longer_it_is_paused_and_none_past_its_expiry(app, runs, clock):
    # Given a user's refresh key paused by an operator two hours ago
    user = str(uuid.uuid4())
    caps = app.concurrency_caps
    assert caps.pause("refresh", user, "ops@example.com")
    clock.advance(2 * 3600)
    waiting = enqueue(app, "user.refresh.v1", user)
    # When its refresh is delivered / Then it waits, and tries again in two hours: as long as the key has been paused
    assert deliver(app, waiting, clock.now()).outcome is Outcome.HELD
    assert app.operations.require(waiting).state_record.run_at == clock.now() + 2 * 3600
    # When it comes back with the key paused for three days / Then it tries again in a day, at most
    clock.advance(3 * 24 * 3600)
    assert deliver(app, waiting, None, "m-2").outcome is Outcome.HELD
    assert app.operations.require(waiting).state_record.run_at == clock.now() + 24 * 3600
    # And a job that expires sooner comes back at its expiry, and then ends EXPIRED, never started
    expiring = f"op-{uuid.uuid4().hex[:8]}"
    app.enqueue("user.refresh.v1", expiring, {"user_id": user}, expires_at=iso(clock.now() + 600))
    body = app.dispatcher.envelope_for(app.operations.require(expiring)).to_body()  # (its expires_at with it)
    assert deliver(app, expiring, clock.now(), "m-3", body).outcome is Outcome.HELD
    assert app.operations.require(expiring).state_record.run_at == clock.now() + 600
    clock.advance(600)
    assert deliver(app, expiring, None, "m-4", body).outcome is Outcome.EXPIRED and runs == []


def test_a_release_wakes_the_jobs_held_on_the_key_at_once_and_each_runs_once(app, runs, clock):
    # Given two refreshes of a user held on its paused key, each to try again in five minutes
    user = str(uuid.uuid4())
    caps = app.concurrency_caps
    caps.pause("refresh", user, "ops@example.com")
    first, second = enqueue(app, "user.refresh.v1", user), enqueue(app, "user.refresh.v1", user)
    assert [deliver(app, op, clock.now(), f"m-{op}").outcome for op in (first, second)] == [Outcome.HELD] * 2
    calls = sent(app.clients.sqs)
    # When an operator releases the key
    freed = caps.resume("refresh", user, "ops@example.com")
    # Then both are woken now: due now, and each one's message sent once, nothing else
    assert (freed.released, sorted(freed.woken), freed.unsent) == (True, sorted([first, second]), ())
    bodies = [json.loads(p["MessageBody"]) for name, p in calls if name == "SendMessage"]
    bodies += [json.loads(e["MessageBody"]) for name, p in calls if name == "SendMessageBatch" for e in p["Entries"]]
    assert sorted(body["operation_id"] for body in bodies) == sorted([first, second])
    assert [app.operations.require(op).state_record.run_at for op in (first, second)] == [clock.now()] * 2
    # And delivered, each runs once; the release again wakes none
    for body in bodies:
        assert deliver(app, body["operation_id"], None, "m-woken", json.dumps(body)).outcome is Outcome.SUCCEEDED
    assert sorted(runs) == sorted([first, second])
    assert caps.resume("refresh", user, "ops@example.com") == type(freed)(False)


def test_a_release_wakes_the_held_jobs_earliest_try_first_and_leaves_those_it_cannot_wake_to_their_own_try(
    app, clock, monkeypatch
):
    # Given a user's refresh key paused, and four refreshes held on it one after another (their ids in the opposite
    # order), each to try again later than the one before: the first's try due already when the key is released
    user = str(uuid.uuid4())
    caps = app.concurrency_caps
    caps.pause("refresh", user, "ops@example.com")
    due, failing, earlier, later = (f"op-{n}-{user}" for n in (4, 3, 2, 1))
    tries = {}
    for operation_id, then in ((due, 200), (failing, 150), (earlier, 10), (later, 0)):
        app.enqueue("user.refresh.v1", operation_id, {"user_id": user})
        assert deliver(app, operation_id, clock.now(), f"m-{operation_id}").outcome is Outcome.HELD
        tries[operation_id] = app.operations.require(operation_id).state_record.run_at
        clock.advance(then)
    assert sorted(tries, key=tries.__getitem__) == [due, failing, earlier, later] and tries[due] < clock.now()
    # And the write that would bring one of them forward failing (throttled)
    wake_held = app.operations.state.wake_held

    def throttled(operation_id: str) -> bool:
        if operation_id == failing:
            throttle()
        return wake_held(operation_id)

    monkeypatch.setattr(app.operations.state, "wake_held", throttled)
    # When an operator releases the key
    freed = caps.resume("refresh", user, "ops@example.com")
    # Then the others are woken, the earliest try first, due now; the one whose write failed is missed and the one
    # already due is left as it was: each of those starts when it next tries
    assert (freed.released, freed.woken, freed.unsent, freed.missed) == (True, (earlier, later), (), (failing,))
    run_at = {op: app.operations.require(op).state_record.run_at for op in tries}
    assert run_at == {due: tries[due], failing: tries[failing], earlier: clock.now(), later: clock.now()}


def test_a_woken_job_whose_record_cannot_be_read_is_left_due_now_for_the_reconciler(app, runs, clock, monkeypatch):
    # Given a refresh held on a paused key, and its record unreadable when the release has woken it (throttled)
    user = str(uuid.uuid4())
    caps = app.concurrency_caps
    caps.pause("refresh", user, "ops@example.com")
    held = enqueue(app, "user.refresh.v1", user)
    assert deliver(app, held, clock.now()).outcome is Outcome.HELD
    calls = sent(app.clients.sqs)
    monkeypatch.setattr(app.operations, "get", lambda *_: throttle())
    # When an operator releases the key
    freed = caps.resume("refresh", user, "ops@example.com")
    # Then it is woken but its message was not sent: unsent, due now, so the reconciler finds it overdue and sends it
    assert (freed.woken, freed.unsent, freed.missed) == ((), (held,), ())
    assert not [name for name, _ in calls if name.startswith("SendMessage")]
    monkeypatch.undo()
    assert app.operations.require(held).state_record.run_at == clock.now()
    assert held in [op for op, _ in app.operations.listings.overdue(clock.now() + 1, 10)]


def test_a_woken_job_whose_message_cannot_be_sent_is_listed_under_stuck_for_the_reconciler(
    app, runs, clock, monkeypatch
):
    # Given a refresh held on a paused key, and the work queue refusing sends
    user = str(uuid.uuid4())
    caps = app.concurrency_caps
    caps.pause("refresh", user, "ops@example.com")
    held = enqueue(app, "user.refresh.v1", user)
    assert deliver(app, held, clock.now()).outcome is Outcome.HELD

    def refused(*_: Any, **__: Any) -> None:
        raise RuntimeError("the queue is unavailable")

    monkeypatch.setattr(app.dispatcher, "send_one", refused)
    # When an operator releases the key / Then it is woken, listed under STUCK with why, nothing lost
    freed = caps.resume("refresh", user, "ops@example.com")
    assert (freed.woken, freed.unsent) == ((), (held,))
    record = app.operations.require(held).state_record
    assert (record.state, record.stuck_kind, record.run_at) == (OperationState.SCHEDULED, "undispatched", clock.now())
    assert "woken by ops@example.com's release of concurrency refresh" in (record.stuck_reason or "")
    assert runs == []
