"""Debounce: a burst of requests for one key becomes one run with the newest payload; every other request ends NOOP
naming it.

Over moto: the key's item in the markers table, each held request's message read back from the queue, its listing
from the state table's index. "Newest" is the payload's `version`, which the producer sets.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import replace
from decimal import Decimal
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from converge.flow.debounce import HELD_BY, Debouncing, WaitingBurst
from converge.flow.extensions import Hold, Skip
from converge.flow.registry import JobBinding, Policy, Queue, Registry
from converge.model.clock import SequentialIds
from converge.model.debounce import OLDEST, Action, Burst, Debounce, newer
from converge.model.envelope import Envelope
from converge.model.errors import RegistryError, TransientError
from converge.model.limits import Limiter
from converge.model.outcomes import Outcome, Result
from converge.model.states import OperationState
from converge.runtime import Converge
from converge.runtime.clients import Clients
from converge.store.debounce import DebounceTable, Moved, Request

from .conftest import deliver, sent
from .debounce_jobs import RERENDER, Edited, Render


@pytest.fixture
def runs() -> list[tuple[str, int]]:
    return []


@pytest.fixture
def fail() -> list[Exception]:
    return []


@pytest.fixture
def app(settings, clock, runs, fail) -> Converge:
    binding = JobBinding(
        "profile.rerender.v1",
        Edited,
        lambda: Render(runs, fail),
        Queue.DEFAULT,
        Policy.EFFECT_THEN_CLAIM,
        debounce=RERENDER,
    )
    clients = Clients(dynamodb=boto3.client("dynamodb"), sqs=boto3.client("sqs"), ssm=boto3.client("ssm"))
    return Converge(settings, registry=Registry([binding]), clients=clients, clock=clock, ids=SequentialIds("attempt"))


@pytest.fixture
def limited_app(settings, clock, runs, fail) -> Converge:
    """The debounced render, also under a rate limit of one a minute (`renderer`)."""
    binding = JobBinding(
        "profile.rerender.v1",
        Edited,
        lambda: Render(runs, fail),
        Queue.DEFAULT,
        Policy.EFFECT_THEN_CLAIM,
        limits=(Limiter("renderer", limit=1, period=60),),
        debounce=RERENDER,
    )
    clients = Clients(dynamodb=boto3.client("dynamodb"), sqs=boto3.client("sqs"), ssm=boto3.client("ssm"))
    return Converge(settings, registry=Registry([binding]), clients=clients, clock=clock, ids=SequentialIds("attempt"))


class Producer:
    """Edits of profiles, each enqueued as a re-render request, and their messages as the relay sends them."""

    def __init__(self, app: Converge, job_type: str = "profile.rerender.v1") -> None:
        self.app, self.job_type = app, job_type
        self.outbox = sent(app.clients.sqs)

    def edit(self, profile: str, version: int) -> str:
        operation_id = f"op-{version}-{uuid.uuid4().hex[:6]}"
        self.app.enqueue(self.job_type, operation_id, {"profile_id": profile, "version": version})
        return operation_id

    def deliver(self, operation_id: str, body: str | None = None, message_id: str = "m-1") -> Result:
        return deliver(self.app, operation_id, body=body, message_id=message_id)

    def resent(self) -> dict[str, dict[str, Any]]:
        """The messages sent back since the last look, by operation id (their DelaySeconds under `delay`)."""
        found = {}
        for _, params in self.outbox:
            for entry in params.get("Entries", []):
                body = json.loads(entry["MessageBody"])
                found[body["operation_id"]] = {**body, "delay": entry.get("DelaySeconds", 0)}
        self.outbox.clear()
        return found


def emf_counts(text: str, name: str) -> list[tuple[str, list[float]]]:
    """The metric `name` as published in the output (CloudWatch's embedded metric format), by job type."""
    lines = [json.loads(line) for line in text.splitlines() if line.startswith("{") and '"_aws"' in line]
    return [(line.get("job_type"), line[name]) for line in lines if name in line]


def body(message: dict[str, Any]) -> str:
    return json.dumps({k: v for k, v in message.items() if k != "delay"})


def state_of(app: Converge, operation_id: str) -> OperationState:
    return app.operations.require(operation_id).state_record.state


def test_a_burst_of_edits_becomes_one_run_with_the_newest_payload_and_the_others_name_it(app, runs, clock):
    # Given three edits of one profile, two seconds apart, whose messages the relay meets out of order
    producer, profile = Producer(app), f"p-{uuid.uuid4().hex[:6]}"
    one, two, three = (producer.edit(profile, version) for version in (1, 2, 3))
    first_seen = clock.now()
    held = {}
    for operation_id in (two, three, one):
        held[operation_id] = producer.deliver(operation_id)
        clock.advance(2)
    # Then none ran yet: each waits SCHEDULED (listed, no attempt) with the reason and its start
    assert runs == [] and {r.outcome for r in held.values()} == {Outcome.HELD}
    assert "debounced (key " in held[one].reason and "newest " + three in held[one].reason
    listed = {row["operation_id"] for row in app.operations.listings.iter_attention("SCHEDULED")}
    assert {one, two, three} <= listed
    assert app.operations.require(one).state_record.attempts == 0
    # And each message went back for the burst's start as it stood: the last arrival (4 s after the first) plus 10 s
    messages = producer.resent()
    assert messages[one]["held_by"] == HELD_BY and messages[one]["delay"] == 10
    # When they come back at the burst's start, oldest first
    clock.advance(14 - (clock.now() - first_seen))
    outcomes = {op: producer.deliver(op, body(messages[op]), "m-2").outcome for op in (one, two, three)}
    # Then one run, with the newest payload (version 3), and the other two NOOP naming it
    assert runs == [(three, 3)]
    assert outcomes == {one: Outcome.NOOP, two: Outcome.NOOP, three: Outcome.SUCCEEDED}
    for older in (one, two):
        record = app.operations.require(older).state_record
        assert record.state is OperationState.NOOP and record.history[-1].reason == f"debounced into {three}"
        assert record.attempts == 0


def test_an_older_request_never_runs_after_a_newer_one_whatever_order_they_come_in(app, runs, clock):
    # Given a burst whose run (version 5) has started and settled
    producer, profile = Producer(app), f"p-{uuid.uuid4().hex[:6]}"
    newer = producer.edit(profile, 5)
    assert producer.deliver(newer).outcome is Outcome.HELD
    clock.advance(10)
    assert producer.deliver(newer, body(producer.resent()[newer]), "m-2").outcome is Outcome.SUCCEEDED
    # When an older edit (version 4) arrives late, the relay having met it after, and a copy of the run's message
    older = producer.edit(profile, 4)
    late = producer.deliver(older)
    copy = producer.deliver(newer, message_id="m-copy")
    # Then the older ends NOOP at once, into the run that had the newer payload; the copy is a duplicate
    assert (late.outcome, late.reason) == (Outcome.NOOP, f"debounced into {newer}")
    assert copy.outcome is Outcome.DUPLICATE
    assert runs == [(newer, 5)]
    # And a newer edit after the run opens a new burst: the run then is a second one, with its payload
    newest = producer.edit(profile, 6)
    assert producer.deliver(newest).outcome is Outcome.HELD
    clock.advance(10)
    assert producer.deliver(newest, body(producer.resent()[newest]), "m-3").outcome is Outcome.SUCCEEDED
    assert runs == [(newer, 5), (newest, 6)]


def test_a_steady_stream_of_edits_runs_at_max_wait_after_the_first(app, runs, clock):
    # Given edits of one profile every 5 s (never quiet for the 10 s period), for 80 s
    producer, profile = Producer(app), f"p-{uuid.uuid4().hex[:6]}"
    start = clock.now()
    pending: dict[str, str] = {}
    started_at: list[float] = []
    version = 0
    while clock.now() - start < 80:
        version += 1
        operation_id = producer.edit(profile, version)
        producer.deliver(operation_id)
        pending.update({op: body(m) for op, m in producer.resent().items()})
        clock.advance(5)
        # every message due by now comes back (the queue's delay)
        for op, message in list(pending.items()):
            if json.loads(message)["held_until"] <= clock.now():
                del pending[op]
                before = len(runs)
                producer.deliver(op, message, f"m-{version}")
                pending.update({o: body(m) for o, m in producer.resent().items()})
                if len(runs) > before:
                    started_at.append(clock.now())
    # Then the first burst ran once, no later than 60 s after its first edit (and within a delivery's step of it)
    assert (runs and runs[0][0] in pending) or runs
    assert started_at[0] - start <= 60 + 5
    assert len({version for _, version in runs}) == len(runs)  # each run a newer payload than the last
    assert [v for _, v in runs] == sorted(v for _, v in runs)


def test_a_failing_run_retries_as_any_job_and_the_others_still_name_it(app, runs, fail, clock):
    # Given a burst of two edits whose run fails once (a transient error)
    producer, profile = Producer(app), f"p-{uuid.uuid4().hex[:6]}"
    old, new = producer.edit(profile, 1), producer.edit(profile, 2)
    producer.deliver(old)
    producer.deliver(new)
    messages = producer.resent()
    clock.advance(10)
    fail.append(TransientError("renderer down"))
    # When the run comes back first and fails, and a newer edit's burst opens meanwhile
    assert producer.deliver(new, body(messages[new]), "m-2").outcome is Outcome.RETRY
    newest = producer.edit(profile, 3)
    assert producer.deliver(newest).outcome is Outcome.HELD
    # Then its retry still runs (a started run carries on), and the older request names it
    assert producer.deliver(new, body(messages[new]), "m-3").outcome is Outcome.SUCCEEDED
    noop = producer.deliver(old, body(messages[old]), "m-4")
    assert (noop.outcome, noop.reason) == (Outcome.NOOP, f"debounced into {new}")
    assert runs == [(new, 2)]


def test_a_cancelled_waiting_request_and_a_crash_between_the_writes_lose_nothing(app, runs, clock):
    # Given a burst of two edits, the older cancelled by an operator while it waits
    producer, profile = Producer(app), f"p-{uuid.uuid4().hex[:6]}"
    old, new = producer.edit(profile, 1), producer.edit(profile, 2)
    producer.deliver(old)
    producer.deliver(new)
    messages = producer.resent()
    app.cancel(old, "no longer wanted")
    clock.advance(10)
    # When the older comes back first: it closes the burst, and its NOOP is refused (it is cancelled: a duplicate)
    assert producer.deliver(old, body(messages[old]), "m-2").outcome is Outcome.DUPLICATE
    assert state_of(app, old) is OperationState.CANCELLED
    # And the run's first delivery dies right after closing the burst (before its lease), then comes back
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(app.pipeline.state, "acquire", _crash)
        with pytest.raises(SystemExit):
            producer.deliver(new, body(messages[new]), "m-3")
    # Then the copy that comes back runs it, once
    assert producer.deliver(new, body(messages[new]), "m-4").outcome is Outcome.SUCCEEDED
    assert runs == [(new, 2)]


def _crash(*_: Any, **__: Any) -> None:
    raise SystemExit("the process died")


def test_requests_cost_one_write_on_their_key_and_a_run_one_more(app, runs, clock):
    # Given a burst of three edits
    producer, profile = Producer(app), f"p-{uuid.uuid4().hex[:6]}"
    ops = [producer.edit(profile, v) for v in (1, 2, 3)]
    calls = sent(app.clients.dynamodb)
    for op in ops:
        producer.deliver(op)
    markers = [(name, p.get("ConsistentRead")) for name, p in calls if p.get("TableName") == app.settings.markers_table]
    # Then each arrival wrote its key once, reading nothing (this process's last sight guessed the write)
    assert markers == [("UpdateItem", None)] * 3
    messages = producer.resent()
    calls.clear()
    clock.advance(10)
    for op in ops:
        producer.deliver(op, body(messages[op]), "m-2")
    markers = [(name, p.get("ConsistentRead")) for name, p in calls if p.get("TableName") == app.settings.markers_table]
    # And coming back, each read its key once (strongly consistent), and the first closed the burst with one write
    assert markers == [("GetItem", True), ("UpdateItem", None), ("GetItem", True), ("GetItem", True)]
    # And a newer edit after the run opens the next burst with one write, guessed from what this worker saw last
    calls.clear()
    assert producer.deliver(producer.edit(profile, 4)).outcome is Outcome.HELD
    assert [name for name, p in calls if p.get("TableName") == app.settings.markers_table] == ["UpdateItem"]


def test_a_huge_burst_keeps_one_bounded_item(app, runs, clock):
    # Given a key as long as an identifier may be, and forty edits of it met newest first
    producer = Producer(app)
    profile = "x" * 128
    ops = [producer.edit(profile, v) for v in range(40)]
    for op in reversed(ops):
        assert producer.deliver(op).outcome is Outcome.HELD
    # Then its key is one item, naming the newest (never the burst's members)
    (key, burst), *others = app.debouncing._table.keys("profile.rerender.v1")
    assert not others and key == profile and burst.newest == ops[-1] and burst.open
    clock.advance(10)
    messages = producer.resent()
    outcomes = [producer.deliver(op, body(messages[op]), "m-2").outcome for op in ops]
    assert outcomes.count(Outcome.SUCCEEDED) == 1 and outcomes.count(Outcome.NOOP) == 39
    assert runs == [(ops[-1], 39)]
    assert list(app.debouncing.waiting()) == []  # the burst closed: nothing waits


def test_the_kill_switch_pauses_a_request_before_its_burst_and_once_on_it_joins(app, runs, clock):
    from .conftest import set_toggle

    # Given the re-render's kill switch off
    producer, profile = Producer(app), f"p-{uuid.uuid4().hex[:6]}"
    op = producer.edit(profile, 1)
    toggle = app.registry.get("profile.rerender.v1").toggle_key
    set_toggle(toggle, "off")
    # When a request arrives, Then it is PAUSED, its key untouched (it joins no burst while it cannot run)
    assert producer.deliver(op).outcome is Outcome.PAUSED
    assert not [k for k, _ in app.debouncing._table.keys("profile.rerender.v1") if k == profile]
    # When the switch is on again and the resumer sends it again, Then it opens its burst and waits for it
    set_toggle(toggle, "on")
    assert app.resumer.handle({})["resumed"] == 1
    resumed = producer.resent()[op]
    assert producer.deliver(op, body(resumed), "m-2").outcome is Outcome.HELD
    clock.advance(10)
    assert producer.deliver(op, body(producer.resent()[op]), "m-3").outcome is Outcome.SUCCEEDED
    assert runs == [(op, 1)]


def test_a_request_back_a_millisecond_before_its_bursts_start_waits_until_the_start(app, runs, clock):
    # Given a burst of one request, which starts 10 s after it
    producer, profile = Producer(app), f"p-{uuid.uuid4().hex[:6]}"
    op = producer.edit(profile, 1)
    producer.deliver(op)
    message = producer.resent()[op]
    # When its message comes back a millisecond early
    clock.advance(9.999)
    early = producer.deliver(op, body(message), "m-2")
    # Then it waits again, until the start to the millisecond
    assert early.outcome is Outcome.HELD and early.reason.endswith("starts by 2027-01-15T08:00:10.000Z")
    again = producer.resent()[op]
    assert (again["held_until"], again["held_by"]) == (1_800_000_010.0, HELD_BY)
    # And back at the start, it runs
    clock.advance(0.001)
    assert producer.deliver(op, body(again), "m-3").outcome is Outcome.SUCCEEDED
    assert runs == [(op, 1)]


DIGEST = Debounce(newest_by="version", period=10, max_wait=60)
"""A debounce with no key: every request of its job type is one burst."""


@pytest.fixture
def digest_app(settings, clock, runs, fail) -> Converge:
    """A catalogue of a job type without a debounce, listed first (by name), and one debounced with no key."""
    bindings = [
        JobBinding("profile.alert.v1", Edited, lambda: Render(runs, fail), Queue.DEFAULT, Policy.EFFECT_THEN_CLAIM),
        JobBinding(
            "profile.digest.v1",
            Edited,
            lambda: Render(runs, fail),
            Queue.DEFAULT,
            Policy.EFFECT_THEN_CLAIM,
            debounce=DIGEST,
        ),
    ]
    clients = Clients(dynamodb=boto3.client("dynamodb"), sqs=boto3.client("sqs"), ssm=boto3.client("ssm"))
    return Converge(settings, registry=Registry(bindings), clients=clients, clock=clock, ids=SequentialIds("attempt"))


def test_a_debounce_without_a_key_makes_one_burst_of_all_requests_shown_and_listed_as_the_shared_key(
    digest_app, runs, clock, capsys
):
    # Given a request of a job type with no debounce
    plain = Producer(digest_app, "profile.alert.v1")
    notice = plain.edit("p-1", 7)
    # And two of the debounced one, for different profiles, 2.5 s apart
    producer = Producer(digest_app, "profile.digest.v1")
    first, second = producer.edit("p-1", 1), producer.edit("p-2", 2)
    held = [producer.deliver(first)]
    clock.advance(2.5)
    held.append(producer.deliver(second))
    # Then the plain one runs at once
    assert plain.deliver(notice).outcome is Outcome.SUCCEEDED and runs == [(notice, 7)]
    # And the two wait as one burst of the shared key, each with its reason, until a period after the latest
    since = "debounced (shared key: a burst since 2027-01-15T08:00:00.000Z"
    assert [(h.outcome, h.reason) for h in held] == [
        (Outcome.HELD, f"{since}, newest {first}); starts by 2027-01-15T08:00:10.000Z"),
        (Outcome.HELD, f"{since}, newest {second}); starts by 2027-01-15T08:00:12.500Z"),
    ]
    messages = producer.resent()
    assert {op: (m["held_until"], m["held_by"]) for op, m in messages.items()} == {
        first: (1_800_000_010.0, HELD_BY),
        second: (1_800_000_012.5, HELD_BY),
    }
    # And the operator sees the burst waiting: its key, its newest, since when, and when it starts at the latest
    assert list(digest_app.debouncing.waiting()) == [
        WaitingBurst("profile.digest.v1", DIGEST, "*", second, 1_800_000_000.0, 1_800_000_012.5)
    ]
    # When the older comes back at the start it was sent for, which the newer moved on
    clock.advance(7.5)
    back = producer.deliver(first, body(messages[first]), "m-2")
    # Then it waits for the burst's deadline (60 s after its first request), when the burst has surely closed
    assert (back.outcome, back.reason) == (
        Outcome.HELD,
        f"{since}, newest {second}); starts by 2027-01-15T08:01:00.000Z",
    )
    resent = producer.resent()
    # When the newer comes back at the start, Then it runs
    clock.advance(2.5)
    assert producer.deliver(second, body(messages[second]), "m-3").outcome is Outcome.SUCCEEDED
    # And the older, back at the deadline, ends NOOP into it, counted as debounced for its job type
    clock.advance(47.5)
    capsys.readouterr()
    noop = producer.deliver(first, body(resent[first]), "m-4")
    assert (noop.outcome, noop.reason) == (Outcome.NOOP, f"debounced into {second}")
    assert emf_counts(capsys.readouterr().out, "debounced") == [("profile.digest.v1", [1.0])]
    assert runs == [(notice, 7), (second, 2)] and list(digest_app.debouncing.waiting()) == []


def test_a_worker_remembers_the_keys_it_saw_up_to_its_bound_and_then_forgets_them_all(app, tables, clock, monkeypatch):
    # Given a worker that remembers at most two keys (10,000 as deployed), and its writes on the markers table counted
    monkeypatch.setattr("converge.flow.debounce._SEEN_LIMIT", 2)
    client = boto3.client("dynamodb")
    debouncing = Debouncing(app.registry, DebounceTable(tables["markers"], client), clock)
    binding = app.registry.get("profile.rerender.v1")
    calls = sent(client)

    def writes_of(profile: str, version: int) -> int:
        calls.clear()
        payload = {"profile_id": profile, "version": version}
        envelope = Envelope(operation_id=f"{profile}-{version}", job_type=binding.job_type, payload=payload)
        assert isinstance(debouncing.hold(envelope, binding, 0), Hold)
        return [name for name, _ in calls].count("UpdateItem")

    # When requests of two profiles open their bursts, and newer ones of the first join its burst
    assert [writes_of("a", 1), writes_of("b", 1), writes_of("a", 2)] == [1, 1, 1]
    # Then each costs one write: the worker guesses it from the key as it saw it last
    # When a third profile's request comes, Then the worker forgets the two it knew (the third is one write)
    assert writes_of("c", 1) == 1
    # And the first profile's next request guesses a key at rest: its refused opening costs a second write
    assert writes_of("a", 3) == 2


def test_a_request_held_for_its_burst_takes_no_rate_limit_unit_so_the_run_starts_on_time(limited_app, clock, runs):
    # Given a debounced job type that also names a rate limit of one a minute
    producer = Producer(limited_app)
    # When two edits of one profile arrive at once
    old, new = producer.edit("p-1", 1), producer.edit("p-1", 2)
    held = [producer.deliver(old), producer.deliver(new)]
    # Then both wait for the burst only (neither took the minute's unit)
    assert [h.reason for h in held] == [
        f"debounced (key p-1: a burst since 2027-01-15T08:00:00.000Z, newest {op}); starts by 2027-01-15T08:00:10.000Z"
        for op in (old, new)
    ]
    # And at the burst's start, the run takes the unit and runs; the other ends NOOP
    messages = producer.resent()
    clock.advance(10)
    assert producer.deliver(new, body(messages[new]), "m-2").outcome is Outcome.SUCCEEDED
    assert producer.deliver(old, body(messages[old]), "m-2").outcome is Outcome.NOOP
    assert runs == [(new, 2)]


def test_two_workers_on_one_key_each_act_on_the_key_as_a_refused_write_returns_it(app, tables, clock):
    # Given three workers, and their calls to the markers table counted
    client = boto3.client("dynamodb")
    one, two, three = (Debouncing(app.registry, DebounceTable(tables["markers"], client), clock) for _ in range(3))
    binding = app.registry.get("profile.rerender.v1")
    calls = sent(client)

    def request(worker: Debouncing, version: int, back_for: float | None = None) -> Hold | Skip | None:
        calls.clear()
        envelope = Envelope(
            operation_id=f"op-{version}",
            job_type=binding.job_type,
            payload={"profile_id": "p-1", "version": version},
            held_until=back_for,
            held_by=HELD_BY if back_for else None,
        )
        return worker.hold(envelope, binding, 0)

    def called() -> list[str]:
        return [name for name, _ in calls]

    since = "debounced (key p-1: a burst since 2027-01-15T08:00:00.000Z"
    # Given an edit whose request opened its profile's burst at worker one
    assert request(one, 5) == Hold(
        1_800_000_010.0, f"{since}, newest op-5); starts by 2027-01-15T08:00:10.000Z", HELD_BY, True
    )
    # When a newer edit comes to worker two, 2 s later, which never saw the key
    clock.advance(2)
    held = request(two, 6)
    # Then its opening is refused, and it joins the burst as the refusal returned it: two writes, no read
    assert held == Hold(1_800_000_012.0, f"{since}, newest op-6); starts by 2027-01-15T08:00:12.000Z", HELD_BY, True)
    assert called() == ["UpdateItem", "UpdateItem"]
    # When an older edit comes to worker one, which saw the burst with op-5 its newest
    held = request(one, 4)
    # Then its move of the quiet period is refused (the burst has a newer newest), and it waits for the burst as it
    # stands, moving nothing again: one write
    assert held == Hold(1_800_000_012.0, f"{since}, newest op-6); starts by 2027-01-15T08:00:12.000Z", HELD_BY, True)
    assert called() == ["UpdateItem"]
    # When an older edit comes to worker three 1 s later, which never saw the key
    clock.advance(1)
    held = request(three, 3)
    # Then its opening is refused, and it moves the quiet period of the burst the refusal returned on: two writes
    assert held == Hold(1_800_000_013.0, f"{since}, newest op-6); starts by 2027-01-15T08:00:13.000Z", HELD_BY, True)
    assert called() == ["UpdateItem", "UpdateItem"]
    # When the newest comes back to worker two at the start, Then it closes the burst and starts
    clock.advance(10)
    assert request(two, 6, back_for=1_800_000_012.0) is None
    # When another older edit comes to worker one, which last saw the burst open
    assert request(one, 2) == Skip("debounced into op-6")
    # Then its close is refused, and the key the refusal returned ends it, debounced into the run: one write, no read
    assert called() == ["UpdateItem"]


class Rivals(DebounceTable):
    """The markers table, with other workers that write a key just before each write this one makes on it: they open
    a burst when none is open, and close the one open, each with a request older than any here."""

    def __init__(self, table_name: str, client: Any) -> None:
        super().__init__(table_name, client)
        self.busy, self.writes = True, []

    def write(self, job_type: str, key: str, action: Action, seen: Burst, request: Request) -> Burst:
        if self.busy:
            now = self.read(job_type, key)
            rival = replace(request, operation_id=f"rival-{len(self.writes)}", order=0)
            super().write(job_type, key, Action.CLOSE if now.open else Action.OPEN, now, rival)
        self.writes.append(action)
        return super().write(job_type, key, action, seen, request)


def test_a_request_whose_key_other_workers_keep_moving_waits_a_second_after_a_handful_of_writes(
    app, tables, clock, capsys
):
    # Given a key that other workers move before each of this worker's writes
    table = Rivals(tables["markers"], boto3.client("dynamodb"))
    debouncing = Debouncing(app.registry, table, clock)
    binding = app.registry.get("profile.rerender.v1")
    capsys.readouterr()

    def arrival(operation_id: str) -> Hold | None:
        payload = {"profile_id": "p-busy", "version": 1}
        return debouncing.hold(
            Envelope(operation_id=operation_id, job_type=binding.job_type, payload=payload), binding, 0
        )

    # When a request arrives
    held = arrival("op-1")
    # Then it gives up after six writes, each refused, and tries again in a second: counted as contended
    assert held == Hold(1_800_000_001.0, "debounced: its key is busy; tries again in a second", HELD_BY, alone=True)
    assert table.writes == [Action.OPEN, Action.JOIN] * 3
    assert emf_counts(capsys.readouterr().out, "debounce_contended") == [("profile.rerender.v1", [1.0])]
    # When the others stop, and another request arrives
    table.busy, table.writes = False, []
    held = arrival("op-2")
    # Then it opens the next burst (the others closed theirs last) in one write, guessed from what this worker saw
    assert isinstance(held, Hold) and "newest op-2" in held.reason
    assert table.writes == [Action.OPEN]


def test_an_older_request_at_its_bursts_deadline_waits_with_one_refused_write(app, runs, clock):
    # Given a burst kept going past its max_wait's reach: its quiet period is its deadline now
    producer, profile = Producer(app), f"p-{uuid.uuid4().hex[:6]}"
    newest = producer.edit(profile, 9)
    producer.deliver(newest)
    for version in (1, 2, 3, 4, 5, 6):
        clock.advance(9)
        producer.deliver(producer.edit(profile, version))
    calls = sent(app.clients.dynamodb)
    # When an older request arrives (its quiet period would not move: it is at the deadline)
    clock.advance(1)
    late = producer.deliver(producer.edit(profile, 7))
    # Then it waits for the burst's start, the deadline, after one refused write: never the busy key's retry
    assert late.outcome is Outcome.HELD and "starts by 2027-01-15T08:01:00.000Z" in late.reason
    markers = [name for name, p in calls if p.get("TableName") == app.settings.markers_table]
    assert markers == ["UpdateItem"]


# -- the decision table, alone -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("burst", "operation", "order", "returning", "action"),
    [
        (Burst(), "a", 1, False, Action.OPEN),
        (Burst(ran="a", ran_order=1), "a", 1, False, Action.START),
        (Burst(ran="b", ran_order=2), "a", 1, False, Action.SKIP),
        (Burst(ran="b", ran_order=1), "a", 1, False, Action.SKIP),  # equal orders: the larger id is the newer
        (Burst(ran="a", ran_order=1), "b", 1, False, Action.OPEN),
        (Burst("a", 0, 10_000, 60_000, "a", 1), "a", 1, False, Action.HOLD),
        (Burst("a", 0, 10_000, 60_000, "a", 1), "b", 2, False, Action.JOIN),
        (Burst("a", 0, 10_000, 60_000, "b", 2), "a", 1, False, Action.EXTEND),
        (Burst("a", 0, 10_000, 60_000, "b", 2), "a", 1, True, Action.HOLD),
        (Burst("a", 0, 10_000, 60_000, "b", 2), "c", 2, False, Action.JOIN),  # equal orders: the larger id is newer
        (Burst("a", 0, 10_000, 60_000, "b", 2), "a", 2, False, Action.EXTEND),
        (Burst("a", 0, 10_000, 60_000, "a", 1), "a", 1, True, Action.HOLD),
        (Burst("a", 0, 4_000, 60_000, "b", 2), "c", 3, False, Action.CLOSE),
        (Burst("a", 0, 90_000, 5_000, "b", 2), "a", 1, True, Action.CLOSE),
    ],
)
def test_what_a_request_does_with_its_key(burst, operation, order, returning, action):
    assert burst.decide(operation, order, 5_000, returning) is action
    if not returning:  # a request is an arrival unless it says it comes back
        assert burst.decide(operation, order, 5_000) is action


def test_a_request_is_newer_by_its_order_then_by_its_operation_id_and_never_newer_than_itself():
    # Given requests ordered by their newest_by value, Then the larger order is the newer whatever the ids
    assert newer(2, "a", 1, "b") and not newer(1, "b", 2, "a")
    # And between equal orders the larger id is the newer
    assert newer(1, "b", 1, "a") and not newer(1, "a", 1, "b")
    # And a request (or a copy of it) is not newer than itself
    assert not newer(1, "a", 1, "a")


def test_a_debounce_declaration_is_checked_and_the_order_read_from_numbers_and_times():
    with pytest.raises(RegistryError, match="max_wait"):
        Debounce(newest_by="version", period=10, max_wait=5)
    with pytest.raises(RegistryError, match="period"):
        Debounce(newest_by="version", period=0, max_wait=5)
    with pytest.raises(RegistryError, match="newest_by"):
        Debounce(newest_by="not a field", period=1, max_wait=5)
    with pytest.raises(RegistryError, match="is not a field"):
        JobBinding(
            "profile.x.v1",
            Edited,
            Render,
            Queue.DEFAULT,
            Policy.EFFECT_THEN_CLAIM,
            debounce=Debounce(newest_by="edited_at", period=1, max_wait=5),
        )
    assert RERENDER.order_of({"version": 7}) == 7
    assert RERENDER.order_of({"version": True}) == OLDEST
    assert RERENDER.order_of({}) == OLDEST
    timed = Debounce(newest_by="at", period=1, max_wait=5)
    assert timed.order_of({"at": "2027-01-15T08:00:00Z"}) < timed.order_of({"at": "2027-01-15T08:00:00.001Z"})
    assert timed.order_of({"at": "2027-01-15T08:00:00"}) == OLDEST  # no zone: no moment
    assert RERENDER.key_of({"profile_id": ""}) == "*"


@pytest.mark.parametrize(
    ("declared", "reason"),
    [
        ({"key": "profile id"}, "debounce: key must name a payload field, not 'profile id'"),
        ({"key": 7}, "debounce: key must name a payload field, not 7"),
        ({"newest_by": "edited at"}, "debounce: newest_by must name a payload field, not 'edited at'"),
        ({"period": 0.999}, "debounce: period must be from 1 to 3600 seconds"),
        ({"period": 3600.001, "max_wait": 7200}, "debounce: period must be from 1 to 3600 seconds"),
        ({"period": True}, "debounce: period must be from 1 to 3600 seconds"),
        ({"period": "10"}, "debounce: period must be from 1 to 3600 seconds"),
        ({"period": float("nan")}, "debounce: period must be from 1 to 3600 seconds"),
        ({"period": 10, "max_wait": 9.999}, "debounce: max_wait must be from its period to 43200 seconds"),
        ({"max_wait": 43200.001}, "debounce: max_wait must be from its period to 43200 seconds"),
        ({"max_wait": "60"}, "debounce: max_wait must be from its period to 43200 seconds"),
        ({"max_wait": float("inf")}, "debounce: max_wait must be from its period to 43200 seconds"),
    ],
)
def test_a_debounce_declaration_out_of_its_bounds_is_refused_with_the_reason(declared, reason):
    # Given a declaration with one field out of bounds (the others as the re-render's)
    fields = {"newest_by": "version", "period": 10, "max_wait": 60, **declared}
    # When it is made, Then it is refused with the reason the catalogue's author reads
    with pytest.raises(RegistryError) as refused:
        Debounce(**fields)
    assert str(refused.value) == reason


def test_a_debounce_declaration_at_its_bounds_is_accepted_and_described():
    # Given the shortest period and a max_wait equal to it, with no key
    shortest = Debounce(newest_by="version", period=1, max_wait=1)
    # And the longest period and max_wait, per profile
    longest = Debounce(newest_by="edited_at", period=3600, max_wait=43200, key="profile_id")
    # Then both are accepted, and each says what it does (as `converge limits bursts` shows it)
    assert shortest.describe() == "1 s quiet, at most 1 s, newest by version"
    assert longest.describe() == "3600 s quiet, at most 43200 s per profile_id, newest by edited_at"


def test_a_requests_key_is_its_key_fields_value_cut_to_200_characters_or_the_shared_key():
    # Given payloads of a debounce keyed by profile_id, Then each is kept under its profile, cut to 200 characters
    assert RERENDER.key_of({"profile_id": "p-1", "version": 2}) == "p-1"
    assert RERENDER.key_of({"profile_id": "p" * 300}) == "p" * 200
    # And a payload without one, and every payload of a debounce with no key, under the shared key
    assert RERENDER.key_of({"version": 2}) == "*"
    assert Debounce(newest_by="version", period=1, max_wait=5).key_of({"profile_id": "p-1"}) == "*"


def test_a_requests_order_is_its_number_or_its_zoned_time_in_epoch_ms_and_anything_else_is_oldest():
    timed = Debounce(newest_by="at", period=1, max_wait=5)
    # Given numbers: each is its own order, up to (not including) 1e100 either way
    assert [RERENDER.order_of({"version": v}) for v in (7, -3, 7.5, 9.9e99)] == [7.0, -3.0, 7.5, 9.9e99]
    for unreadable in (1e100, -1e100, float("inf"), float("nan"), True, None, "7", [7], {"v": 7}):
        assert RERENDER.order_of({"version": unreadable}) == OLDEST, unreadable
    # And payloads that are no object at all
    assert RERENDER.order_of(None) == OLDEST and RERENDER.order_of([7]) == OLDEST
    # Given ISO-8601 times with their zone: each is its moment in epoch milliseconds, whatever the zone says it in
    assert timed.order_of({"at": "2027-01-15T08:00:00.500Z"}) == 1_800_000_000_500
    assert timed.order_of({"at": "2027-01-15T09:00:00.500+01:00"}) == 1_800_000_000_500
    # And a time written in up to 40 characters is read, in more it is not
    assert timed.order_of({"at": "2027-01-15T08:00:00.50000000000000+00:00"}) == 1_800_000_000_500
    assert timed.order_of({"at": "2027-01-15T08:00:00.500000000000000+00:00"}) == OLDEST
    # And text that is no ISO-8601 time with a zone is unreadable: oldest
    for text in ("2027-01-15T08:00:00.500z", "2027-01-15T08:00:00", "yesterday"):
        assert timed.order_of({"at": text}) == OLDEST, text


def test_a_time_with_its_z_out_of_place_is_unreadable_and_counts_as_oldest():
    timed = Debounce(newest_by="at", period=1, max_wait=5)
    # Given a time whose Z (its zone) is written where no zone goes, and other garbage around a Z
    misplaced = ("2027-01-15T08Z:00:00", "2027-01-15T08:00Z:00", "2027-01-15T08:00:00.5Z:00", "2027-01-15Z")
    # When each is read as a request's order / Then none is a moment: each is oldest, behind any readable time
    for text in misplaced:
        assert timed.order_of({"at": text}) == OLDEST, text
    # And a Z where it belongs, at the end, is read as UTC
    assert timed.order_of({"at": "2027-01-15T08:00Z"}) == 1_800_000_000_000


# -- the key's item, alone -----------------------------------------------------------------------------------------

JOB = "profile.rerender.v1"
T0_MS = 1_800_000_000_000  # 2027-01-15T08:00:00Z
KEPT = 400 * 24 * 3600  # a key's item lives 400 days past its last write


@pytest.fixture
def keys(tables) -> DebounceTable:
    return DebounceTable(tables["markers"], boto3.client("dynamodb"))


def arriving(operation_id: str, order: float, at_ms: int) -> Request:
    """A request of the re-render's debounce (10 s quiet, at most 60 s) arriving at `at_ms`."""
    return Request(operation_id, order, at_ms, 10_000, 60_000)


def stored(tables, key: str) -> dict[str, Any]:
    """The key's item as the markers table holds it, each attribute's value plain (numbers exact)."""
    item = boto3.client("dynamodb").get_item(
        TableName=tables["markers"], Key={"pk": {"S": "debounce#" + JOB}, "sk": {"S": "key#" + key}}
    )["Item"]
    return {name: value["S"] if "S" in value else Decimal(value["N"]) for name, value in item.items()}


def test_a_keys_item_holds_its_open_burst_and_then_only_its_run(keys, tables):
    # Given a key never used
    # When a request opens a burst (at 999 ms past a second)
    opened = keys.write(JOB, "p-1", Action.OPEN, Burst(), arriving("op-1", 1, T0_MS + 999))
    # Then the burst is open: quiet a period later, due by max_wait after it, the opener its newest
    assert opened == Burst("op-1", T0_MS + 999, T0_MS + 10_999, T0_MS + 60_999, "op-1", 1)
    # And that is what the item holds, kept 400 days past the burst's deadline (in whole seconds)
    assert stored(tables, "p-1") == {
        "pk": "debounce#" + JOB,
        "sk": "key#p-1",
        "opened": "op-1",
        "first": T0_MS + 999,
        "quiet": T0_MS + 10_999,
        "deadline": T0_MS + 60_999,
        "newest": "op-1",
        "newest_order": 1,
        "expires_at": 1_800_000_060 + KEPT,
    }
    # When a newer request joins it 2 s later (its order an epoch time with a fraction)
    joined = keys.write(JOB, "p-1", Action.JOIN, opened, arriving("op-2", 1_800_000_000_500.25, T0_MS + 2_999))
    # Then it is the burst's newest, every digit of its order kept, and the quiet period is a period from now
    assert joined == replace(opened, quiet=T0_MS + 12_999, newest="op-2", order=1_800_000_000_500.25)
    # And the item is kept 400 days past its deadline plus max_wait (a request may still come that long after)
    assert stored(tables, "p-1")["newest_order"] == Decimal("1800000000500.25")
    assert stored(tables, "p-1")["expires_at"] == 1_800_000_120 + KEPT
    # When an older request comes 2 s later, Then only the quiet period moves
    extended = keys.write(JOB, "p-1", Action.EXTEND, joined, arriving("op-0", 0.5, T0_MS + 4_999))
    assert extended == replace(joined, quiet=T0_MS + 14_999)
    # When the burst is closed (by a request back after its deadline)
    closed = keys.write(JOB, "p-1", Action.CLOSE, extended, arriving("op-0", 0.5, T0_MS + 70_500))
    # Then the key holds only its run, the newest, kept 400 days past now plus max_wait
    assert closed == Burst(ran="op-2", ran_order=1_800_000_000_500.25)
    assert stored(tables, "p-1") == {
        "pk": "debounce#" + JOB,
        "sk": "key#p-1",
        "ran": "op-2",
        "ran_order": Decimal("1800000000500.25"),
        "expires_at": 1_800_000_130 + KEPT,
    }
    # And that is what a request coming back reads, and what the job type's keys list
    assert keys.read(JOB, "p-1") == closed
    assert keys.keys(JOB) == [("p-1", closed)]


def test_a_request_within_a_period_of_its_bursts_deadline_moves_the_quiet_period_to_the_deadline_only(keys):
    # Given a burst of a debounce of 10 s quiet, at most 12 s, opened at T0
    opened = keys.write(JOB, "p-2", Action.OPEN, Burst(), Request("op-1", 1, T0_MS, 10_000, 12_000))
    assert (opened.quiet, opened.deadline) == (T0_MS + 10_000, T0_MS + 12_000)
    # When a newer request joins 5 s later, and an older one comes 1 s after it
    joined = keys.write(JOB, "p-2", Action.JOIN, opened, Request("op-2", 2, T0_MS + 5_000, 10_000, 12_000))
    # Then the quiet period ends at the deadline, not a period later
    assert joined == replace(opened, quiet=T0_MS + 12_000, newest="op-2", order=2)
    # And the older request, which would move it no further, is refused
    with pytest.raises(Moved):
        keys.write(JOB, "p-2", Action.EXTEND, joined, Request("op-0", 0, T0_MS + 6_000, 10_000, 12_000))


def test_a_write_on_a_key_that_moved_is_refused_with_the_key_as_it_stands(keys):
    # Given a key whose burst a request opened
    opened = keys.write(JOB, "p-1", Action.OPEN, Burst(), arriving("op-1", 1, T0_MS))
    # When another opens it too, from a sight of the key at rest, Then it is refused with the burst as it stands
    with pytest.raises(Moved) as moved:
        keys.write(JOB, "p-1", Action.OPEN, Burst(), arriving("op-2", 2, T0_MS))
    assert (moved.value.burst, str(moved.value)) == (opened, "the debounced key moved")
    # When one joins a burst it saw with another newest, or once the quiet period is over, Then it is refused
    for seen, at_ms in ((replace(opened, newest="op-9"), T0_MS + 1), (opened, T0_MS + 10_000)):
        with pytest.raises(Moved) as moved:
            keys.write(JOB, "p-1", Action.JOIN, seen, arriving("op-2", 2, at_ms))
        assert moved.value.burst == opened
    # And one a millisecond before the quiet period's end joins
    joined = keys.write(JOB, "p-1", Action.JOIN, opened, arriving("op-2", 2, T0_MS + 9_999))
    # When an older request would move the quiet period no later, Then it is refused: the period stands
    with pytest.raises(Moved) as moved:
        keys.write(JOB, "p-1", Action.EXTEND, joined, arriving("op-0", 0, T0_MS + 9_999))
    assert moved.value.burst == joined
    # When a request closes a burst it saw opened by another, Then it is refused
    with pytest.raises(Moved) as moved:
        keys.write(JOB, "p-1", Action.CLOSE, replace(joined, opened="op-9"), arriving("op-0", 0, T0_MS + 20_000))
    assert moved.value.burst == joined
    closed = keys.write(JOB, "p-1", Action.CLOSE, joined, arriving("op-0", 0, T0_MS + 20_000))
    # When a request opens the next burst from a sight of no run, or of another run, Then it is refused
    for seen in (Burst(), Burst(ran="op-1", ran_order=1)):
        with pytest.raises(Moved) as moved:
            keys.write(JOB, "p-1", Action.OPEN, seen, arriving("op-3", 3, T0_MS + 21_000))
        assert moved.value.burst == closed
    # And from a sight of the run, it opens it
    assert keys.write(JOB, "p-1", Action.OPEN, closed, arriving("op-3", 3, T0_MS + 21_000)).opened == "op-3"


class DropsTheItem:
    """A DynamoDB client as some emulators are: a refused write's error carries no item."""

    def __init__(self, client: Any) -> None:
        self._client = client

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def update_item(self, **params: Any) -> Any:
        try:
            return self._client.update_item(**params)
        except ClientError as exc:
            exc.response.pop("Item", None)
            raise


def test_a_refused_write_whose_answer_lacks_the_item_reads_the_key_as_it_stands(keys, tables):
    # Given a burst opened, and a worker whose emulator answers a refused write without the item
    opened = keys.write(JOB, "p-1", Action.OPEN, Burst(), arriving("op-1", 1, T0_MS))
    dropping = DebounceTable(tables["markers"], DropsTheItem(boto3.client("dynamodb")))
    # When that worker joins the burst from a stale sight of it
    with pytest.raises(Moved) as moved:
        dropping.write(JOB, "p-1", Action.JOIN, replace(opened, newest="op-9"), arriving("op-2", 2, T0_MS + 1))
    # Then it is refused with the burst as it stands, read
    assert moved.value.burst == opened


def test_a_write_on_a_key_with_no_item_is_refused_with_the_key_at_rest_and_a_hold_writes_nothing(keys):
    # Given a key with no item (never used, or gone a year after its last use), seen with a burst open
    seen = Burst("op-1", T0_MS, T0_MS + 10_000, T0_MS + 60_000, "op-1", 1)
    # When a request joins, extends or closes it, Then it is refused with the key at rest
    for action in (Action.JOIN, Action.EXTEND, Action.CLOSE):
        with pytest.raises(Moved) as moved:
            keys.write(JOB, "p-1", action, seen, arriving("op-2", 2, T0_MS + 1_000))
        assert moved.value.burst == Burst()
    # And an action that writes nothing is no write
    with pytest.raises(ValueError) as refused:
        keys.write(JOB, "p-1", Action.HOLD, seen, arriving("op-2", 2, T0_MS + 1_000))
    assert str(refused.value) == "hold writes nothing"


def test_a_started_run_whose_key_ran_a_newer_burst_since_carries_on_under_the_rate_limit(
    limited_app, clock, runs, fail
):
    # Given a debounced job type that also names a rate limit of one a minute
    producer = Producer(limited_app)
    # And a burst of two edits whose run takes the minute's unit and fails once
    old, new = producer.edit("p-1", 1), producer.edit("p-1", 2)
    producer.deliver(old)
    producer.deliver(new)
    messages = producer.resent()
    clock.advance(10)
    fail.append(TransientError("renderer down"))
    assert producer.deliver(new, body(messages[new]), "m-2").outcome is Outcome.RETRY
    # When a newer edit's burst runs, at the next minute's unit
    newest = producer.edit("p-1", 3)
    assert producer.deliver(newest).outcome is Outcome.HELD
    clock.advance(10)
    limited = producer.deliver(newest, body(producer.resent()[newest]), "m-3")
    assert limited.outcome is Outcome.HELD
    clock.advance(50)
    assert producer.deliver(newest, body(producer.resent()[newest]), "m-4").outcome is Outcome.SUCCEEDED
    # And the failed run's retry comes back within that minute (its key has moved on: debounced, but started)
    retried = producer.deliver(new, body(messages[new]), "m-5")
    # Then it carries on, held by the rate limit like any request, not run at once
    assert retried.outcome is Outcome.HELD, retried
    assert retried.reason == "rate limited by renderer (shared: 1 per 60 s); starts at 2027-01-15T08:02:10.000Z"
    assert runs == [(newest, 3)]
