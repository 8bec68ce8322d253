"""Rate limits: a job over its limiter's pace is not started and not failed; it waits SCHEDULED for its slot.

Over moto: the limiter's items in the markers table, the held job's message read back from the queue, its
listing from the state table's index, the partner's calls counted in the runner.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import boto3
import pytest

from converge.flow.registry import JobBinding, Policy, Queue, Registry
from converge.flow.runner import JobContext
from converge.model.clock import FakeClock, SequentialIds, iso
from converge.model.envelope import Envelope
from converge.model.errors import ConfigurationError, RateLimited, RegistryError, TransientError
from converge.model.limits import SHARED_KEY, KeyState, Limiter, Uses, key_from, key_named
from converge.model.outcomes import Outcome
from converge.model.states import OperationState
from converge.runtime import Converge
from converge.runtime.clients import Clients
from converge.store.state import HELD_FOR

from .conftest import Notice, body_of, deliver, sent

PARTNER = Limiter("partner-api", limit=2, period=10)
"""Two calls every ten seconds: one every five."""
PER_USER = Limiter("per-user", limit=1, period=60, key="user_id")
"""One a minute for each user."""
BURSTY = Limiter("bursty", limit=1, period=1, burst=2)
"""One a second, and two more at once after a quiet spell (used by no binding: `ctx.limit` and operators only)."""


class PartnerCall:
    """Calls the partner once per run; `refuse` makes the partner answer 429 with a retry-after (naming `LIMITER`)."""

    LIMITER = "partner-api"

    def __init__(self, calls: list[str], refuse: list[float]) -> None:
        self.calls = calls
        self.refuse = refuse

    def load(self, message: Notice, ctx: JobContext) -> str:
        return "ready"

    def run(self, message: Notice, loaded: str, ctx: JobContext) -> None:
        if self.refuse:
            raise RateLimited(self.LIMITER, retry_after=self.refuse.pop(0))
        self.calls.append(ctx.operation_id)


class CallsThenFails(PartnerCall):
    """Calls the partner, then fails the first time (its answer lost): its retry calls the partner again."""

    def run(self, message: Notice, loaded: str, ctx: JobContext) -> None:
        self.calls.append(ctx.operation_id)
        if self.calls.count(ctx.operation_id) == 1:
            raise TransientError("the partner's answer was lost")


class UserCall(PartnerCall):
    """Calls a partner paced per user; `refuse` makes it answer 429 with a retry-after."""

    def run(self, message: Notice, loaded: str, ctx: JobContext) -> None:
        if self.refuse:
            raise RateLimited("per-user", retry_after=self.refuse.pop(0))
        self.calls.append(ctx.operation_id)


class StepWithLimit(PartnerCall):
    """Prepares a file, then calls the partner under `ctx.limit`, as its own step."""

    def run(self, message: Notice, loaded: str, ctx: JobContext) -> None:
        ctx.step("prepare", lambda key: self.calls.append(f"prepare:{ctx.operation_id}"), policy="keyed_effect")
        ctx.limit("partner-api")
        ctx.step("call", lambda key: self.calls.append(f"call:{ctx.operation_id}"))


class TwoLimitedCalls(PartnerCall):
    """Calls the partner twice, each call under its own `ctx.limit`, each call its own step."""

    def run(self, message: Notice, loaded: str, ctx: JobContext) -> None:
        ctx.limit("partner-api")
        ctx.step("first", lambda key: self.calls.append(f"first:{ctx.operation_id}"))
        ctx.limit("partner-api")
        ctx.step("second", lambda key: self.calls.append(f"second:{ctx.operation_id}"))


@pytest.fixture
def calls() -> list[str]:
    return []


@pytest.fixture
def refuse() -> list[float]:
    return []


@pytest.fixture
def app(settings, clock, calls, refuse) -> Converge:
    def binding(job_type: str, limits: tuple[Any, ...], runner: type = PartnerCall) -> JobBinding:
        return JobBinding(
            job_type, Notice, lambda: runner(calls, refuse), Queue.CRITICAL, Policy.EFFECT_THEN_CLAIM, limits=limits
        )

    registry = Registry(
        [
            binding("partner.sync.v1", ("partner-api",)),
            binding("partner.heavy.v1", (Uses("partner-api", units=2),)),
            binding("partner.both.v1", ("partner-api", "per-user")),
            binding("partner.flaky.v1", ("partner-api",), CallsThenFails),
            binding("partner.steps.v1", (), StepWithLimit),
            binding("partner.twice.v1", (), TwoLimitedCalls),
            binding("partner.unlisted.v1", ()),
            binding("user.call.v1", ("per-user",), UserCall),
            binding("mail.plain.v1", ()),
        ],
        limiters=[PARTNER, PER_USER, BURSTY],
    )
    clients = Clients(dynamodb=boto3.client("dynamodb"), sqs=boto3.client("sqs"), ssm=boto3.client("ssm"))
    return Converge(settings, registry=registry, clients=clients, clock=clock, ids=SequentialIds("attempt"))


def one_job_enqueued(settings, clock, runner: Any) -> tuple[Converge, str]:
    """A runtime whose catalogue is one job (`mail.x.v1`, run by `runner`) and declares no limiter, and one
    operation of it enqueued."""
    registry = Registry([JobBinding("mail.x.v1", Notice, runner, Queue.CRITICAL, Policy.EFFECT_THEN_CLAIM)])
    clients = Clients(dynamodb=boto3.client("dynamodb"), sqs=boto3.client("sqs"), ssm=boto3.client("ssm"))
    app = Converge(settings, registry=registry, clients=clients, clock=clock, ids=SequentialIds("attempt"))
    operation_id = f"op-{uuid.uuid4().hex[:8]}"
    app.enqueue("mail.x.v1", operation_id, {"user_id": str(uuid.uuid4())})
    return app, operation_id


def enqueue(app: Converge, job_type: str = "partner.sync.v1", user: str | None = None) -> str:
    operation_id = f"op-{uuid.uuid4().hex[:8]}"
    app.enqueue(job_type, operation_id, {"user_id": user or str(uuid.uuid4())})
    return operation_id


@pytest.fixture
def outbox(app: Converge) -> list[tuple[str, dict[str, Any]]]:
    """Every SQS call the runtime makes: the held jobs' messages sent again."""
    return sent(app.clients.sqs)


def queued(outbox: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """The bodies sent since the last look, each with its DelaySeconds (`delay`)."""
    found = []
    for _, params in outbox:
        for entry in params.get("Entries", []):
            found.append({**json.loads(entry["MessageBody"]), "delay": entry.get("DelaySeconds", 0)})
    outbox.clear()
    return found


def test_a_job_within_its_limit_starts_at_once_for_one_write_and_no_read(app, calls):
    # Given a job type limited to two calls every ten seconds, its key at rest
    operation_id = enqueue(app)
    body = body_of(app, operation_id)
    seen = sent(app.clients.dynamodb)
    # When it is delivered
    result = deliver(app, operation_id, body=body)
    # Then it runs at once, and the limit cost one write on the markers table and no read at all
    assert result.outcome is Outcome.SUCCEEDED and calls == [operation_id]
    names = [name for name, _ in seen]
    assert names == ["UpdateItem", "UpdateItem", "UpdateItem"]  # the slot, the lease, the settle
    assert seen[0][1]["TableName"] == app.settings.markers_table


def test_a_job_over_its_limit_waits_scheduled_listed_with_its_start_and_counts_no_attempt(app, outbox, calls, clock):
    # Given two jobs that used the partner's pace just now (one every five seconds)
    first, second = enqueue(app), enqueue(app)
    assert deliver(app, first).outcome is Outcome.SUCCEEDED
    # When a second arrives at the same moment
    result = deliver(app, second)
    # Then it is not run and not failed: held, acknowledged (SQS counts no receive against it)
    assert result.outcome is Outcome.HELD and result.outcome.acknowledged
    assert calls == [first]
    assert "rate limited by partner-api" in result.reason and iso(clock.now() + 5) in result.reason
    # And it waits SCHEDULED until its slot, no attempt counted, listed with its time
    record = app.operations.require(second).state_record
    assert (record.state, record.attempts, record.run_at) == (OperationState.SCHEDULED, 0, clock.now() + 5)
    listed = {row["operation_id"]: row for row in app.operations.listings.iter_attention("SCHEDULED")}
    assert second in listed
    # And its message was sent again for its slot, carrying it
    (body,) = queued(outbox)
    assert (body["operation_id"], body["held_until"], body["delay"]) == (second, clock.now() + 5, 5)


def test_a_hold_that_cannot_be_recorded_goes_back_to_the_queue_with_the_reason(app, counted, monkeypatch):
    # Given the partner's pace used just now, and the state table failing a hold's write
    deliver(app, enqueue(app))
    monkeypatch.setattr(app.operations.state, "hold", lambda *a, **k: (_ for _ in ()).throw(ConnectionError("lost")))
    # When a second job arrives / Then it is retried, saying what could not be recorded, counted for its job
    result = deliver(app, enqueue(app))
    assert (result.outcome, result.reason) == (Outcome.RETRY, "could not record the hold: ConnectionError: lost")
    assert ("retried", "partner.sync.v1", 1) in counted


def test_a_slot_that_cannot_be_taken_goes_back_to_the_queue_with_the_reason(app, counted, monkeypatch):
    # Given the limiter's table failing as a job asks it for a slot
    monkeypatch.setattr(app.rate_limits, "hold", lambda *a, **k: (_ for _ in ()).throw(ConnectionError("lost")))
    # When the job arrives / Then it is retried, saying what it could not do, counted for its job
    result = deliver(app, enqueue(app))
    assert (result.outcome, result.reason) == (
        Outcome.RETRY,
        "could not take a flow control's slot: ConnectionError: lost",
    )
    assert ("retried", "partner.sync.v1", 1) in counted


def test_a_hold_with_no_delayed_dispatch_configured_is_listed_stuck_at_its_limit(app, clock, monkeypatch):
    # Given the partner's pace used just now, and a pipeline with no way to send a message for later
    deliver(app, enqueue(app))
    monkeypatch.setattr(app.pipeline, "resume_later", None)
    # When a second job is held
    operation_id = enqueue(app)
    result = deliver(app, operation_id)
    # Then it is held, saying its message is not sent, and listed under STUCK as waiting at its rate limit
    assert result.outcome is Outcome.HELD
    assert result.reason.endswith("; its message is not sent yet (ConfigurationError: no delayed dispatch configured)")
    stuck = app.operations.state.record(operation_id).stuck_reason or ""
    assert stuck.startswith(f"waiting at 'rate-limit' until {iso(clock.now() + 5)}, and its resumption could not")
    assert "(ConfigurationError: no delayed dispatch configured)" in stuck


def test_a_held_job_come_back_on_its_slot_starts_without_taking_another(app, outbox, calls, clock):
    # Given a job held for its slot five seconds ahead
    first, second = enqueue(app), enqueue(app)
    deliver(app, first)
    assert deliver(app, second).outcome is Outcome.HELD
    (body,) = queued(outbox)
    # When its message comes back at the slot
    clock.advance(5)
    seen = sent(app.clients.dynamodb)
    result = deliver(app, second, body=json.dumps({k: v for k, v in body.items() if k != "delay"}), message_id="m-2")
    # Then it runs, with no new reservation (the lease and the settle only)
    assert result.outcome is Outcome.SUCCEEDED and calls == [first, second]
    assert [params["TableName"] for _, params in seen] == [app.settings.state_table] * 2
    # And the next job of the key waits for the slot after it
    third = enqueue(app)
    held = deliver(app, third)
    assert held.outcome is Outcome.HELD and iso(clock.now() + 5) in held.reason


def test_an_early_copy_of_a_held_job_runs_nothing(app, outbox, calls, clock):
    # Given a held job
    first, second = enqueue(app), enqueue(app)
    deliver(app, first)
    deliver(app, second)
    (body,) = queued(outbox)
    # When a copy of its message arrives before its slot
    result = deliver(app, second, body=json.dumps({k: v for k, v in body.items() if k != "delay"}), message_id="m-2")
    # Then the lease refuses it as early, and nothing ran
    assert result.outcome is Outcome.EARLY and calls == [first]


def test_a_second_copy_of_a_held_job_does_not_put_off_the_first_copys_start(app, outbox, calls, clock):
    # Given a job held for its slot five seconds ahead (the partner's pace: one every five seconds)
    first, second = enqueue(app), enqueue(app)
    deliver(app, first)
    assert deliver(app, second).outcome is Outcome.HELD
    (held,) = queued(outbox)
    # When a second copy of its original message arrives meanwhile (SQS delivers at least once), finding the next
    # slot ten seconds ahead
    copy = deliver(app, second, message_id="m-copy")
    # Then it is done, held by the first copy's hold: its time stands, and nothing is sent again for the copy
    assert copy.outcome is Outcome.HELD and copy.outcome.acknowledged
    assert f"held already until {iso(clock.now() + 5)}" in copy.reason and queued(outbox) == []
    assert app.operations.require(second).state_record.run_at == clock.now() + 5
    # And when the first copy's message comes back on its slot, it runs, once
    clock.advance(5)
    body = json.dumps({k: v for k, v in held.items() if k != "delay"})
    assert deliver(app, second, body=body, message_id="m-2").outcome is Outcome.SUCCEEDED
    assert calls == [first, second]


def test_a_copy_of_a_held_then_cancelled_job_arriving_as_its_hold_comes_due_is_a_duplicate(app, outbox, calls, clock):
    # Given a job held for its slot five seconds ahead, then cancelled by an operator (its hold's time kept)
    first, second = enqueue(app), enqueue(app)
    deliver(app, first)
    assert deliver(app, second).outcome is Outcome.HELD
    app.cancel(second, "no longer wanted")
    record = app.operations.require(second).state_record
    assert (record.state, record.waiting_for, record.run_at) == (OperationState.CANCELLED, HELD_FOR, clock.now() + 5)
    queued(outbox)
    # When, at that slot exactly, a copy of its original message arrives and is held for the next slot
    clock.advance(5)
    copy = deliver(app, second, message_id="m-copy")
    # Then the hold it met is due, not one still ahead: the copy is told the operation is settled, not held by it
    assert (copy.outcome, copy.reason) == (Outcome.DUPLICATE, "already CANCELLED")
    assert app.operations.require(second).state is OperationState.CANCELLED
    assert calls == [first] and queued(outbox) == []


def test_a_held_job_come_back_too_late_takes_a_new_slot(app, outbox, calls, clock):
    # Given a held job whose message comes back long after its slot, with the key busy again meanwhile
    first, second = enqueue(app), enqueue(app)
    deliver(app, first)
    deliver(app, second)
    (body,) = queued(outbox)
    clock.advance(60)
    third = enqueue(app)
    assert deliver(app, third).outcome is Outcome.SUCCEEDED
    # When the late message arrives
    result = deliver(app, second, body=json.dumps({k: v for k, v in body.items() if k != "delay"}), message_id="m-2")
    # Then it does not start on a slot long gone: it is held again for a new one
    assert result.outcome is Outcome.HELD and calls == [first, third]
    assert app.operations.require(second).state_record.state is OperationState.SCHEDULED


def test_weighted_units_take_more_of_the_pace(app, clock):
    # Given a heavy job of two units (ten seconds of a pace of one unit every five)
    heavy, light = enqueue(app, "partner.heavy.v1"), enqueue(app)
    assert deliver(app, heavy).outcome is Outcome.SUCCEEDED
    # When a light job of the same limiter follows
    result = deliver(app, light)
    # Then it waits the heavy job's ten seconds: job types naming one limiter share its pace
    assert result.outcome is Outcome.HELD and iso(clock.now() + 10) in result.reason


def test_each_key_is_paced_apart_and_the_stricter_limiter_applies(app, clock):
    # Given a job type under the partner's limit and a per-user limit of one a minute
    user = str(uuid.uuid4())
    first = enqueue(app, "partner.both.v1", user)
    assert deliver(app, first).outcome is Outcome.SUCCEEDED
    # When the same user's next job comes ten seconds later (the partner's pace has room)
    clock.advance(10)
    again = deliver(app, enqueue(app, "partner.both.v1", user))
    # Then the stricter of the two holds it: the user's, fifty seconds on
    assert again.outcome is Outcome.HELD and "per-user (key " in again.reason
    assert iso(clock.now() + 50) in again.reason
    # And another user's job, once the partner's pace has room, is not held by the first user's pace
    clock.advance(10)
    other = deliver(app, enqueue(app, "partner.both.v1"))
    assert other.outcome is Outcome.SUCCEEDED


def test_a_burst_lets_that_many_more_start_at_once_after_a_quiet_spell(settings, clock, calls, refuse):
    # Given a limiter of one a second with a burst of two
    registry = Registry(
        [
            JobBinding(
                "mail.burst.v1",
                Notice,
                lambda: PartnerCall(calls, refuse),
                Queue.CRITICAL,
                Policy.EFFECT_THEN_CLAIM,
                limits=("bursty",),
            )
        ],
        limiters=[Limiter("bursty", limit=1, period=1, burst=2)],
    )
    clients = Clients(dynamodb=boto3.client("dynamodb"), sqs=boto3.client("sqs"), ssm=boto3.client("ssm"))
    app = Converge(settings, registry=registry, clients=clients, clock=clock, ids=SequentialIds("attempt"))
    # When four arrive at once
    outcomes = [deliver(app, enqueue(app, "mail.burst.v1")).outcome for _ in range(4)]
    # Then three start (one and its burst of two), the fourth waits
    assert outcomes == [Outcome.SUCCEEDED] * 3 + [Outcome.HELD]


def test_a_held_job_past_its_expires_at_expires_as_any_unstarted_job(app, outbox, calls, clock):
    # Given a held job with an expires_at before its slot comes back
    first = enqueue(app)
    deliver(app, first)
    second = f"op-{uuid.uuid4().hex[:8]}"
    app.enqueue("partner.sync.v1", second, {"user_id": str(uuid.uuid4())}, expires_at=iso(clock.now() + 3))
    operation = app.operations.require(second)
    envelope = Envelope(
        operation_id=second, job_type="partner.sync.v1", payload=operation.payload, expires_at=iso(clock.now() + 3)
    )
    assert deliver(app, second, body=envelope.to_body()).outcome is Outcome.HELD
    (body,) = queued(outbox)
    # When it comes back at its slot, past its expires_at
    clock.advance(5)
    result = deliver(app, second, body=json.dumps({k: v for k, v in body.items() if k != "delay"}), message_id="m-2")
    # Then it ends EXPIRED, never run, never failed
    assert result.outcome is Outcome.EXPIRED and calls == [first]


def test_an_upstream_429_pushes_the_key_back_and_waits_without_spending_an_attempt(app, outbox, calls, refuse, clock):
    # Given the partner answers the first call with 429 and a retry-after of 30 seconds
    refuse.append(30.0)
    operation_id = enqueue(app)
    # When the job runs
    result = deliver(app, operation_id, attempt=3)
    # Then it waits SCHEDULED for the retry-after, its message sent again (a fresh one: no receive counted)
    assert result.outcome is Outcome.WAITING and result.outcome.acknowledged
    record = app.operations.require(operation_id).state_record
    assert (record.state, record.run_at, record.last_error) == (OperationState.SCHEDULED, clock.now() + 30, None)
    # And every other job of the key waits past it, behind it: the key is paused, the first slot after is its own
    other = deliver(app, enqueue(app))
    assert other.outcome is Outcome.HELD and iso(clock.now() + 35) in other.reason
    # When the time comes, Then it runs on its resumed message, on the slot it holds
    clock.advance(30)
    (body,) = [body for body in queued(outbox) if body["operation_id"] == operation_id]
    assert (
        deliver(
            app, operation_id, body=json.dumps({k: v for k, v in body.items() if k != "delay"}), message_id="m-2"
        ).outcome
        is Outcome.SUCCEEDED
    )
    assert calls == [operation_id]


def test_ctx_limit_waits_for_its_slot_between_steps_and_the_resumed_run_passes_on_it(app, calls, clock):
    # Given the partner's pace used just now
    deliver(app, enqueue(app))
    # When a job of steps limits its call to the partner
    operation_id = enqueue(app, "partner.steps.v1")
    result = deliver(app, operation_id)
    # Then its first step ran and it waits for its slot between the steps, listed SCHEDULED
    assert result.outcome is Outcome.WAITING
    assert calls[-1] == f"prepare:{operation_id}"
    record = app.operations.require(operation_id).state_record
    assert (record.state, record.waiting, record.run_at) == (
        OperationState.SCHEDULED,
        "limit-partner-api-1",
        clock.now() + 5,
    )
    # When it resumes on its slot, Then it makes the call without preparing again or taking another slot
    clock.advance(5)
    body = body_of(app, operation_id)
    seen = sent(app.clients.dynamodb)
    assert deliver(app, operation_id, body=body, message_id="m-2").outcome is Outcome.SUCCEEDED
    assert calls.count(f"prepare:{operation_id}") == 1 and calls.count(f"call:{operation_id}") == 1
    assert not [
        params
        for name, params in seen
        if params.get("TableName") == app.settings.markers_table and name == "UpdateItem"
    ]


def step_names(app: Converge, operation_id: str) -> list[str]:
    """The steps an operation's markers record, in the order of their keys."""
    items = boto3.client("dynamodb").query(
        TableName=app.settings.markers_table,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": f"operation#{operation_id}"}},
    )["Items"]
    return sorted(item["sk"]["S"].removeprefix("step#") for item in items if item["sk"]["S"].startswith("step#"))


def test_ctx_limit_on_a_free_pace_passes_at_once_and_records_no_wait(app, calls):
    # Given a partner whose pace nobody used
    operation_id = enqueue(app, "partner.steps.v1")
    # When a job of steps limits its call to the partner / Then it runs through, its slot taken now
    assert deliver(app, operation_id).outcome is Outcome.SUCCEEDED
    assert calls == [f"prepare:{operation_id}", f"call:{operation_id}"]
    # And only its two steps are recorded: a slot taken at once is waited for by nothing
    assert step_names(app, operation_id) == ["call", "prepare"]


def test_each_ctx_limit_of_a_run_waits_for_a_slot_of_its_own(app, calls, clock):
    # Given the partner's pace used just now, and a job that calls the partner twice, each call limited
    deliver(app, enqueue(app))
    operation_id = enqueue(app, "partner.twice.v1")
    # When it runs / Then its first call waits for the first slot
    assert deliver(app, operation_id).outcome is Outcome.WAITING
    record = app.operations.require(operation_id).state_record
    assert (record.waiting, record.run_at) == ("limit-partner-api-1", clock.now() + 5)
    # When it resumes on that slot / Then it makes the first call, and the second waits for a slot of its own
    clock.advance(5)
    assert deliver(app, operation_id, message_id="m-2").outcome is Outcome.WAITING
    record = app.operations.require(operation_id).state_record
    assert (record.waiting, record.run_at) == ("limit-partner-api-2", clock.now() + 5)
    assert calls[-1] == f"first:{operation_id}"
    # When it resumes again / Then it makes the second call, each call made once
    clock.advance(5)
    assert deliver(app, operation_id, message_id="m-3").outcome is Outcome.SUCCEEDED
    assert calls.count(f"first:{operation_id}") == 1 and calls.count(f"second:{operation_id}") == 1
    assert step_names(app, operation_id) == ["first", "limit-partner-api-1", "limit-partner-api-2", "second"]


def test_an_undeclared_limiter_or_a_malformed_one_is_refused_when_the_catalogue_loads():
    # Given a binding naming a limiter the catalogue does not declare, Then the registry refuses it
    binding = JobBinding("mail.x.v1", Notice, object, Queue.CRITICAL, Policy.EFFECT_THEN_CLAIM, limits=("nowhere",))
    with pytest.raises(RegistryError, match="declared nowhere"):
        Registry([binding])
    # And so is a second declaration under a name taken
    other = Limiter("partner-api", limit=3, period=10)
    taken = JobBinding("mail.y.v1", Notice, object, Queue.CRITICAL, Policy.EFFECT_THEN_CLAIM, limits=(other,))
    with pytest.raises(RegistryError, match="one per name"):
        Registry([taken], limiters=[PARTNER])
    # And malformed declarations are refused with the reason
    with pytest.raises(RegistryError, match="limit must be"):
        Limiter("partner", limit=0, period=1)
    with pytest.raises(RegistryError, match="key must name"):
        Limiter("partner", limit=1, period=1, key="not a field")
    with pytest.raises(RegistryError, match="units"):
        Uses("partner", units=0)
    with pytest.raises(RegistryError, match="each limiter once"):
        JobBinding("mail.x.v1", Notice, object, Queue.CRITICAL, Policy.EFFECT_THEN_CLAIM, limits=("a", "a"))


def test_a_429_naming_an_undeclared_limiter_still_waits_its_retry_after(settings, clock, calls):
    # Given a runtime whose catalogue declares no limiter, and a runner that raises RateLimited all the same
    app, operation_id = one_job_enqueued(settings, clock, lambda: PartnerCall(calls, [20.0]))
    # When it runs, Then it is not failed: it waits the time its upstream asked for, nothing pushed back
    assert deliver(app, operation_id).outcome is Outcome.WAITING
    record = app.operations.require(operation_id).state_record
    assert (record.state, record.run_at) == (OperationState.SCHEDULED, clock.now() + 20)


@pytest.mark.parametrize("named", [None, "", "acct-1", "k" * 300, 42])
def test_a_key_an_operator_names_is_the_key_a_payload_with_that_value_is_kept_under(named: Any) -> None:
    # Given a key as an operator or a runner names it (none, empty, short, longer than a key is kept, a number)
    # When it is read as flow control keeps keys, Then it is the key a job whose payload holds that value counts under
    assert key_named(named) == key_from({"account_id": named}, "account_id")
    assert key_named(named) == (SHARED_KEY if named in (None, "") else str(named)[:200])


YEAR = 366 * 24 * 3600


@pytest.mark.parametrize(
    ("declared", "refusal"),
    [
        ({"name": 5}, "limiter name 5 must be lowercase letters, digits and '-' (at most 32)"),
        ({"name": "Partner"}, "limiter name 'Partner' must be lowercase letters, digits and '-' (at most 32)"),
        ({"name": "p" * 33}, f"limiter name {'p' * 33!r} must be lowercase letters, digits and '-' (at most 32)"),
        ({"limit": 0}, "limiter partner: limit must be a whole number of at least 1, not 0"),
        ({"limit": True}, "limiter partner: limit must be a whole number of at least 1, not True"),
        ({"limit": "5"}, "limiter partner: limit must be a whole number of at least 1, not '5'"),
        ({"period": 0}, "limiter partner: period must be a number of seconds (at least 0.001)"),
        ({"period": 0.0009}, "limiter partner: period must be a number of seconds (at least 0.001)"),
        ({"period": True}, "limiter partner: period must be a number of seconds (at least 0.001)"),
        ({"period": "60"}, "limiter partner: period must be a number of seconds (at least 0.001)"),
        ({"period": YEAR + 1}, "limiter partner: period must be at most a year"),
        ({"burst": -1}, "limiter partner: burst must be a whole number of at least 0"),
        ({"burst": True}, "limiter partner: burst must be a whole number of at least 0"),
        ({"burst": 1.5}, "limiter partner: burst must be a whole number of at least 0"),
        ({"key": "tenant id"}, "limiter partner: key must name a payload field, not 'tenant id'"),
        ({"key": 5}, "limiter partner: key must name a payload field, not 5"),
        ({"shards": 0}, "limiter partner: shards must be a whole number from 1 to 100"),
        ({"limit": 2, "shards": 3}, "limiter partner: shards (3) must not exceed the limit (2)"),
    ],
)
def test_a_malformed_limiter_is_refused_with_its_reason(declared: dict[str, Any], refusal: str) -> None:
    # Given a limiter declared with one thing wrong / When the catalogue declares it / Then it is refused, saying what
    with pytest.raises(RegistryError) as refused:
        Limiter(**{"name": "partner", "limit": 10, "period": 60, **declared})
    assert str(refused.value) == refusal


def test_a_limiter_at_the_edges_of_what_is_allowed_is_declared_as_written() -> None:
    # Given the smallest and the largest of each setting / When declared / Then each is taken as written
    smallest = Limiter("a", limit=1, period=0.001)
    largest = Limiter("a" * 32, limit=1000, period=YEAR, burst=0, key="tenant_id", shards=100)
    as_many_shards_as_its_limit = Limiter("even", limit=2, period=1, shards=2)
    assert (smallest.limit, smallest.period, smallest.burst, smallest.shards) == (1, 0.001, 0, 1)
    assert (largest.period, largest.shards, largest.key) == (YEAR, 100, "tenant_id")
    assert as_many_shards_as_its_limit.items_of("k") == ["k~0", "k~1"]


def test_a_limiter_describes_its_pace_as_the_operator_reads_it() -> None:
    # Given limiters of each kind / Then each says its limit, period, and only the burst, key and shards it has
    assert PARTNER.describe() == "2 per 10 s"
    assert PER_USER.describe() == "1 per 60 s per user_id"
    assert (
        Limiter("mail", limit=10, period=1, burst=9, key="tenant_id").describe() == "10 per 1 s, burst 9 per tenant_id"
    )
    assert Limiter("two", limit=4, period=0.5, shards=2).describe() == "4 per 0.5 s, over 2 items"


def test_units_take_that_many_intervals_of_the_pace() -> None:
    # Given a limiter of four every ten seconds (one every 2.5 s) / Then a unit costs 2.5 s, three of them 7.5 s
    limiter = Limiter("partner", limit=4, period=10)
    assert (limiter.cost(), limiter.cost(3)) == (2.5, 7.5)


@pytest.mark.parametrize(
    ("payload", "field", "key"),
    [
        ({"user_id": "u-1"}, "user_id", "u-1"),
        ({"user_id": 7}, "user_id", "7"),
        ({"user_id": "u-1"}, None, SHARED_KEY),
        ({"other": "u-1"}, "user_id", SHARED_KEY),
        ({"user_id": None}, "user_id", SHARED_KEY),
        ({"user_id": ""}, "user_id", SHARED_KEY),
        (["u-1"], "user_id", SHARED_KEY),
        (None, "user_id", SHARED_KEY),
    ],
)
def test_a_payload_is_counted_under_its_fields_value_or_else_the_shared_key(payload: Any, field: Any, key: str) -> None:
    # Given a payload and the field a flow control names / Then its key is the field's value, or the shared key when
    # it names none or the payload has no value there (or is no object at all)
    assert key_from(payload, field) == key


@pytest.mark.parametrize(
    ("uses", "refusal"),
    [
        ({"limiter": 5}, "a limit names a Limiter or its name, not 5"),
        ({"limiter": "Partner API"}, "a limit names a Limiter or its name, not 'Partner API'"),
        ({"limiter": "partner-api", "units": 0}, "limiter partner-api: units must be a whole number from 1 to 1000"),
        ({"limiter": "partner-api", "units": 1001}, "limiter partner-api: units must be a whole number from 1 to 1000"),
        ({"limiter": "partner-api", "units": True}, "limiter partner-api: units must be a whole number from 1 to 1000"),
        ({"limiter": PARTNER, "units": 2.5}, "limiter partner-api: units must be a whole number from 1 to 1000"),
    ],
)
def test_a_malformed_use_of_a_limiter_is_refused_with_its_reason(uses: dict[str, Any], refusal: str) -> None:
    # Given a binding's use of a limiter with one thing wrong / When declared / Then it is refused, saying what
    with pytest.raises(RegistryError) as refused:
        Uses(**uses)
    assert str(refused.value) == refusal


def test_a_use_names_its_limiter_by_declaration_or_by_name_and_weighs_one_to_a_thousand_units() -> None:
    # Given uses of a limiter by its declaration and by its name, at the edges of their weight
    by_declaration, by_name = Uses(PARTNER), Uses("partner-api", units=1000)
    # Then both name the limiter, with the units as written
    assert (by_declaration.name, by_declaration.units) == ("partner-api", 1)
    assert (by_name.name, by_name.units) == ("partner-api", 1000)


def test_a_keys_queue_counts_the_units_reserved_after_the_next_free_one() -> None:
    # Given a limiter of one unit every 0.3 s, its key's next unit free 0.9 s from now (three units reserved ahead)
    limiter = Limiter("partner", limit=10, period=3)
    now = 1_800_000_000.0
    busy = KeyState("partner", "k", 1_800_000_000_900 / 1000)  # as the table keeps it: whole milliseconds
    # Then a job arriving now waits, behind two queued units (the first of the three starts now)
    assert busy.waiting(limiter, now) and busy.queued(limiter, now) == 2
    # And a key free one unit ahead has no queue, and a key free now none to wait for
    assert KeyState("partner", "k", now + 0.3).queued(limiter, now) == 0
    at_rest = KeyState("partner", "k", now)
    assert not at_rest.waiting(limiter, now) and at_rest.queued(limiter, now) == 0
    # And a key free between two of its pace's starts (1.0 s ahead: units reserved from 0.1, 0.4 and 0.7 s) queues
    # each unit that starts later than now, the part of a unit counted as one
    assert KeyState("partner", "k", 1_800_000_001_000 / 1000).queued(limiter, now) == 3


def test_a_keys_burst_starts_ahead_of_its_queue() -> None:
    # Given a limiter of one every 0.3 s with a burst of two (0.6 s of its pace may start ahead)
    limiter = Limiter("partner", limit=10, period=3, burst=2)
    now = 1_800_000_000.0
    # Then a key free 0.6 s ahead lets a job start now, and one free 1.5 s ahead queues two behind the next start
    assert not KeyState("partner", "k", now + 0.6).waiting(limiter, now)
    busy = KeyState("partner", "k", 1_800_000_001_500 / 1000)
    assert busy.waiting(limiter, now) and busy.queued(limiter, now) == 2


# -- a held job's reason, its slot's grace, and a 429's push back -------------------------------------------------


def sent_again(body: dict[str, Any]) -> str:
    """A message sent again, as it comes back from the queue."""
    return json.dumps({k: v for k, v in body.items() if k != "delay"})


def metrics(text: str, name: str) -> list[tuple[str, list[float]]]:
    """The embedded-metric documents of one count in a captured stdout: (job type, values)."""
    documents = [json.loads(line) for line in text.splitlines() if line.startswith("{") and '"_aws"' in line]
    return [(document["job_type"], document[name]) for document in documents if name in document]


def logged(text: str, message: str) -> list[dict[str, Any]]:
    """The log lines with this message in a captured stdout."""
    lines = [json.loads(line) for line in text.splitlines() if line.startswith("{") and '"message"' in line]
    return [line for line in lines if line["message"] == message]


def test_a_held_jobs_reason_names_its_limiter_its_key_and_its_pace_and_each_hold_is_counted(app, clock, capsys):
    # Given a user's pace used ten seconds ago, and the partner's pace used just now
    user = str(uuid.uuid4())
    assert deliver(app, enqueue(app, "partner.both.v1", user)).outcome is Outcome.SUCCEEDED
    clock.advance(10)
    assert deliver(app, enqueue(app)).outcome is Outcome.SUCCEEDED
    capsys.readouterr()
    # When a job of the shared partner pace and one of the user's come
    shared = deliver(app, enqueue(app))
    keyed = deliver(app, enqueue(app, "partner.both.v1", user))
    # Then each is held, its reason naming the limiter, the key (shared, or the user's) and the pace, and its start
    assert shared.reason == f"rate limited by partner-api (shared: 2 per 10 s); starts at {iso(clock.now() + 5)}"
    assert (
        keyed.reason
        == f"rate limited by per-user (key {user}: 1 per 60 s per user_id); starts at {iso(clock.now() + 50)}"
    )
    # And each hold is counted for its job type
    assert metrics(capsys.readouterr().out, "rate_limited") == [("partner.sync.v1", [1.0]), ("partner.both.v1", [1.0])]


def test_a_held_job_come_back_late_but_within_its_limiters_grace_starts_on_its_slot(app, outbox, calls, clock):
    # Given a job held for its slot five seconds ahead, and another held behind it
    first, second, third = enqueue(app), enqueue(app), enqueue(app)
    deliver(app, first)
    assert deliver(app, second).outcome is Outcome.HELD
    (body,) = queued(outbox)
    assert deliver(app, third).outcome is Outcome.HELD
    # When its message comes back as late as its limiter's grace allows (one interval, five seconds, past its slot)
    clock.advance(10)
    result = deliver(app, second, body=sent_again(body), message_id="m-2")
    # Then it starts on the slot it holds, not behind the job held after it
    assert result.outcome is Outcome.SUCCEEDED and calls == [first, second]


def test_a_job_resumed_after_a_429_on_one_limiter_still_takes_its_units_on_the_others(
    app, outbox, calls, refuse, clock
):
    # Given a job under the partner's pace and its user's (one a minute), whose partner answers 429 for 30 s
    refuse.append(30.0)
    operation_id = enqueue(app, "partner.both.v1")
    assert deliver(app, operation_id).outcome is Outcome.WAITING
    (body,) = queued(outbox)
    assert body["held_by"] == "partner-api"
    # When it comes back after the pause, holding the partner's slot
    clock.advance(30)
    result = deliver(app, operation_id, body=sent_again(body), message_id="m-2")
    # Then its user's pace still applies to the call it makes again: it waits for the user's next unit
    assert result.outcome is Outcome.HELD and calls == []
    assert result.reason.startswith("rate limited by per-user") and iso(clock.now() + 30) in result.reason


def test_a_job_held_by_one_limiter_is_charged_once_on_the_other_when_it_starts(app, outbox, calls, clock):
    # Given the partner's pace used just now, and a job under the partner's pace and its user's (one a minute), held
    # by the partner's for five seconds
    user = str(uuid.uuid4())
    deliver(app, enqueue(app))
    operation_id = enqueue(app, "partner.both.v1", user)
    held = deliver(app, operation_id)
    assert held.outcome is Outcome.HELD and held.reason.startswith("rate limited by partner-api")
    (body,) = queued(outbox)
    # When it comes back on its slot
    clock.advance(5)
    result = deliver(app, operation_id, body=sent_again(body), message_id="m-2")
    # Then it starts: the unit its user's pace gave it while it was held was given back, not charged a second time
    assert result.outcome is Outcome.SUCCEEDED and calls[-1] == operation_id
    # And its user's key holds its one unit, taken as it started: none queued, the next a minute after its start
    (waiting,) = [key for key in app.rate_limits.waiting() if key.limiter.name == "per-user"]
    assert (waiting.key, waiting.queued, waiting.next_start) == (user, 0, clock.now() + 60)


def held_then_failed_on_its_slot(app, outbox, clock) -> tuple[str, str, dict]:
    """A job held for its slot five seconds ahead (the partner's pace: one every five seconds) behind a first one,
    whose call on that slot failed after the partner saw it: (the first, the failed one, its message's body)."""
    first, flaky = enqueue(app), enqueue(app, "partner.flaky.v1")
    deliver(app, first)
    assert deliver(app, flaky).outcome is Outcome.HELD
    (body,) = queued(outbox)
    clock.advance(5)
    assert deliver(app, flaky, body=sent_again(body), message_id="m-2").outcome is Outcome.RETRY
    return first, flaky, body


def test_a_held_job_retried_after_it_started_on_its_slot_takes_a_new_slot_for_its_retry(app, outbox, calls, clock):
    # Given a job held for its slot five seconds ahead, whose call on that slot fails after the partner saw it
    first, flaky, body = held_then_failed_on_its_slot(app, outbox, clock)
    # When the same message comes back a second later (received again: the retry)
    clock.advance(1)
    retried = deliver(app, flaky, attempt=2, body=sent_again(body), message_id="m-2")
    # Then it does not call again on the slot it called on already: it is held for the pace's next slot
    assert retried.outcome is Outcome.HELD and calls == [first, flaky]
    assert iso(clock.now() + 4) in retried.reason
    # And at that slot its retry's message (sent for it, received once) starts on it, the partner's second call
    (again,) = queued(outbox)
    clock.advance(4)
    assert deliver(app, flaky, body=sent_again(again), message_id="m-3").outcome is Outcome.SUCCEEDED
    assert calls == [first, flaky, flaky]


def test_a_held_jobs_retry_received_at_the_very_time_of_its_slot_takes_a_new_slot_too(app, outbox, calls, clock):
    # Given a job held for its slot five seconds ahead, whose call on that slot fails after the partner saw it
    first, flaky, body = held_then_failed_on_its_slot(app, outbox, clock)
    # When its retry is received at that same instant (the slot's time, not after it)
    retried = deliver(app, flaky, attempt=2, body=sent_again(body), message_id="m-2")
    # Then the slot counts as spent all the same: it is held for the pace's next slot, without calling again
    assert retried.outcome is Outcome.HELD and calls == [first, flaky]
    assert iso(clock.now() + 5) in retried.reason


def test_a_copy_come_back_on_a_slot_its_first_copy_ran_on_never_gives_that_slot_back(app, outbox, calls, clock):
    # Given a job under the partner's pace and its user's, held by the partner's for five seconds, whose message came
    # back on its slot and ran
    deliver(app, enqueue(app))
    operation_id = enqueue(app, "partner.both.v1")
    assert deliver(app, operation_id).outcome is Outcome.HELD
    (body,) = queued(outbox)
    clock.advance(5)
    assert deliver(app, operation_id, body=sent_again(body), message_id="m-2").outcome is Outcome.SUCCEEDED
    # When a copy of that message comes back on the same slot (SQS delivers at least once), its user's pace holding it
    copy = deliver(app, operation_id, body=sent_again(body), message_id="m-3")
    # Then it runs nothing, and the partner's slot the first copy ran on stays taken: the partner's next job waits
    assert copy.outcome is not Outcome.SUCCEEDED and calls.count(operation_id) == 1
    held = deliver(app, enqueue(app))
    assert held.outcome is Outcome.HELD and iso(clock.now() + 5) in held.reason


class TickingClock(FakeClock):
    """A clock that moves a millisecond every time it is read, as a real one moves between two reads."""

    def now(self) -> float:
        moment = super().now()
        self.advance(0.001)
        return moment


def test_a_job_within_its_limit_starts_at_once_while_the_clock_moves_between_reads(settings, calls, refuse):
    # Given a worker whose clock moves between each of its reads, and a key at rest
    registry = Registry(
        [
            JobBinding(
                "partner.sync.v1",
                Notice,
                lambda: PartnerCall(calls, refuse),
                Queue.CRITICAL,
                Policy.EFFECT_THEN_CLAIM,
                limits=("partner-api",),
            )
        ],
        limiters=[PARTNER],
    )
    clients = Clients(dynamodb=boto3.client("dynamodb"), sqs=boto3.client("sqs"), ssm=boto3.client("ssm"))
    app = Converge(settings, registry=registry, clients=clients, clock=TickingClock(), ids=SequentialIds("attempt"))
    operation_id = enqueue(app)
    # When its job comes, Then it starts now: its slot is the moment it was checked, not held a moment later
    assert deliver(app, operation_id).outcome is Outcome.SUCCEEDED and calls == [operation_id]


def test_a_429_pauses_only_its_jobs_key_which_waits_holding_the_first_slot_after_it(app, outbox, refuse, clock, capsys):
    # Given a user's job whose partner answers 429 for 90 s (past the user's own next unit, a minute on)
    user = str(uuid.uuid4())
    refuse.append(90.0)
    operation_id = enqueue(app, "user.call.v1", user)
    capsys.readouterr()
    # When it runs
    assert deliver(app, operation_id).outcome is Outcome.WAITING
    # Then it waits for the pause, its message sent again holding the first slot after it, and the push back counted
    (body,) = queued(outbox)
    assert (body["held_until"], body["held_by"]) == (clock.now() + 90, "per-user")
    assert metrics(capsys.readouterr().out, "rate_limit_pushed_back") == [("user.call.v1", [1.0])]
    # And the user's next job waits behind it, a unit after the pause, while another user's starts at once
    held = deliver(app, enqueue(app, "user.call.v1", user))
    assert held.outcome is Outcome.HELD and iso(clock.now() + 150) in held.reason
    assert deliver(app, enqueue(app, "user.call.v1")).outcome is Outcome.SUCCEEDED


def test_a_429_on_a_key_busy_past_its_retry_after_holds_no_slot_and_takes_one_on_return(
    app, outbox, calls, refuse, clock
):
    # Given a job that took the partner's pace for five seconds, and whose partner answers 429 for 0.1234 s
    refuse.append(0.1234)
    operation_id = enqueue(app)
    # When it runs
    assert deliver(app, operation_id).outcome is Outcome.WAITING
    # Then it waits the time asked (its message sent again for then, to the millisecond), holding no slot: the key
    # was already busy past the pause
    record = app.operations.require(operation_id).state_record
    assert (record.state, record.run_at) == (OperationState.SCHEDULED, 1_800_000_000.123)
    (body,) = queued(outbox)
    assert body["held_until"] == 1_800_000_000.123 and "held_by" not in body
    # And when it comes back, it takes the key's next slot, five seconds after its first
    clock.advance(0.1234)
    result = deliver(app, operation_id, body=sent_again(body), message_id="m-2")
    assert result.outcome is Outcome.HELD and calls == []
    assert iso(clock.now() - 0.1234 + 5) in result.reason


def test_a_429_from_a_limiter_its_binding_does_not_name_pushes_the_key_back_by_one_unit(app, outbox, refuse, clock):
    # Given a job type that names no limiter, whose runner's partner (paced by partner-api) answers 429 for 30 s
    refuse.append(30.0)
    operation_id = enqueue(app, "partner.unlisted.v1")
    # When it runs, Then it waits for the pause, holding the first slot after it
    assert deliver(app, operation_id).outcome is Outcome.WAITING
    (body,) = queued(outbox)
    assert (body["held_until"], body["held_by"]) == (clock.now() + 30, "partner-api")
    # And a job of the partner's pace waits one unit (five seconds) past the pause, behind it
    held = deliver(app, enqueue(app))
    assert held.outcome is Outcome.HELD and iso(clock.now() + 35) in held.reason


def test_a_429_naming_an_undeclared_limiter_waits_however_short_under_a_wait_name_cut_as_any(settings, clock, calls):
    # Given a catalogue without limiters, and a runner that raises RateLimited for 0.25 s naming a long limiter
    name = "a-partner-nobody-declared-with-a-name-longer-than-a-wait-name"

    class Refused(PartnerCall):
        def run(self, message: Notice, loaded: str, ctx: JobContext) -> None:
            raise RateLimited(name, retry_after=0.25)

    app, operation_id = one_job_enqueued(settings, clock, lambda: Refused(calls, []))
    # When it runs, Then it waits the quarter second asked, at a wait named for the limiter, cut to 48 characters
    assert deliver(app, operation_id).outcome is Outcome.WAITING
    record = app.operations.require(operation_id).state_record
    assert (record.run_at, record.waiting) == (clock.now() + 0.25, f"{name}-retry-after"[:48])


# -- what an operator does: pause, release, and the keys jobs wait on ---------------------------------------------


def test_an_operator_pauses_one_key_until_then_and_is_logged(app, clock, capsys):
    # Given a user's key, and another user's
    user, other = str(uuid.uuid4()), str(uuid.uuid4())
    # When an operator pauses the user's key for 30 s
    assert app.rate_limits.pause("per-user", user, 30, operator="ops@example.com") == clock.now() + 30
    # Then the user's next job waits until then, and another user's starts at once
    held = deliver(app, enqueue(app, "user.call.v1", user))
    assert held.outcome is Outcome.HELD and f"starts at {iso(clock.now() + 30)}" in held.reason
    assert deliver(app, enqueue(app, "user.call.v1", other)).outcome is Outcome.SUCCEEDED
    # And the pause is logged with the key and the operator
    (line,) = logged(capsys.readouterr().out, "limiter key paused by an operator")
    assert (line["limiter"], line["key"], line["until"], line["operator"]) == (
        "per-user",
        user,
        iso(clock.now() + 30),
        "ops@example.com",
    )


def test_a_paused_keys_burst_is_spent_when_the_pause_ends(app, clock, capsys):
    # Given a key of one a second with a burst of two, paused for ten seconds by a caller who names no operator
    assert app.rate_limits.pause("bursty", None, 10) == clock.now() + 10
    # When calls come at the end of the pause, Then one starts then and the next a whole interval later: the pause
    # spent the burst too
    clock.advance(10)
    assert [app.rate_limits.slot("bursty", None, 1) for _ in range(2)] == [clock.now(), clock.now() + 1]
    # And the pause was logged as an unnamed operator's
    (line,) = logged(capsys.readouterr().out, "limiter key paused by an operator")
    assert (line["key"], line["operator"]) == (SHARED_KEY, "unnamed")


def test_a_pause_of_less_than_a_second_ends_then_and_a_negative_one_ends_now(app, clock):
    # Given a key paused for half a second / Then the next call may be made then, not a whole second on
    assert app.rate_limits.pause("partner-api", None, 0.5) == clock.now() + 0.5
    assert app.rate_limits.slot("partner-api", None, 1) == clock.now() + 0.5
    # Given a key paused for a negative time / Then it is not paused: the next call may be made now
    assert app.rate_limits.pause("bursty", None, -5) == clock.now()
    assert app.rate_limits.slot("bursty", None, 1) == clock.now()


def test_an_operator_releases_a_key_its_next_job_starts_at_once_and_it_is_logged(app, clock, capsys):
    # Given a user's key busy for a minute
    user = str(uuid.uuid4())
    assert deliver(app, enqueue(app, "user.call.v1", user)).outcome is Outcome.SUCCEEDED
    capsys.readouterr()
    # When an operator releases it, Then its pace is forgotten: True, and nothing left to forget a second time
    assert app.rate_limits.release("per-user", user, operator="ops@example.com")
    assert not app.rate_limits.release("per-user", user)
    # And the user's next job starts at once
    assert deliver(app, enqueue(app, "user.call.v1", user)).outcome is Outcome.SUCCEEDED
    # And each release is logged with the key, whether there was a pace to forget, and the operator
    lines = logged(capsys.readouterr().out, "limiter key released by an operator")
    assert [(line["limiter"], line["key"], line["released"], line["operator"]) for line in lines] == [
        ("per-user", user, True, "ops@example.com"),
        ("per-user", user, False, "unnamed"),
    ]


def test_an_operator_naming_an_undeclared_limiter_is_told_so(app):
    # When an operator pauses a limiter the catalogue does not declare, Then they are told which name is not declared
    with pytest.raises(ConfigurationError) as refused:
        app.rate_limits.pause("nowhere", None, 30)
    assert str(refused.value) == "no limiter named 'nowhere' is declared in the catalogue's LIMITERS"


def test_the_keys_jobs_wait_on_are_listed_by_limiter_then_longest_queue_with_their_next_start(app, clock):
    # Given calls that took the partner's pace three units ahead, one user's four units ahead and another's two
    for _ in range(3):
        app.rate_limits.slot("partner-api", None, 1)
    for _ in range(4):
        app.rate_limits.slot("per-user", "u-b", 1)
    for _ in range(2):
        app.rate_limits.slot("per-user", "u-a", 1)
    # When an operator looks, Then each key is listed once, by limiter, its longest queue first, with the units
    # queued behind the next start and when that is
    listed = [(w.limiter.name, w.key, w.queued, w.next_start) for w in app.rate_limits.waiting()]
    assert listed == [
        ("partner-api", SHARED_KEY, 2, clock.now() + 15),
        ("per-user", "u-b", 3, clock.now() + 240),
        ("per-user", "u-a", 1, clock.now() + 120),
    ]


def test_units_reserved_at_a_given_time_start_from_that_time_not_from_the_clock(app, clock):
    # Given a key of one a second with a burst of two, quiet since long before
    limiter = app.rate_limits.limiter("bursty")
    later = clock.now() + 100
    # When units are reserved as of a time ahead of the clock (a status or a caller that reserves many at one
    # instant passes it), Then they start from that time: the burst's at once, the next a whole interval on
    starts = [app.rate_limits.reserve(limiter, SHARED_KEY, 1, later) for _ in range(4)]
    assert starts == [later, later, later, later + 1]
