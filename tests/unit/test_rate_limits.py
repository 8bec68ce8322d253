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
from converge.model.clock import SequentialIds, iso
from converge.model.envelope import Envelope
from converge.model.errors import RateLimited, RegistryError
from converge.model.limits import SHARED_KEY, Limiter, Uses, key_from, key_named
from converge.model.outcomes import Outcome
from converge.model.states import OperationState
from converge.runtime import Converge
from converge.runtime.clients import Clients

from .conftest import Notice, body_of, deliver, sent

PARTNER = Limiter("partner-api", limit=2, period=10)
"""Two calls every ten seconds: one every five."""
PER_USER = Limiter("per-user", limit=1, period=60, key="user_id")
"""One a minute for each user."""


class PartnerCall:
    """Calls the partner once per run; `refuse` makes the partner answer 429 with a retry-after."""

    def __init__(self, calls: list[str], refuse: list[float]) -> None:
        self.calls = calls
        self.refuse = refuse

    def load(self, message: Notice, ctx: JobContext) -> str:
        return "ready"

    def run(self, message: Notice, loaded: str, ctx: JobContext) -> None:
        if self.refuse:
            raise RateLimited("partner-api", retry_after=self.refuse.pop(0))
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
            binding("partner.steps.v1", (), StepWithLimit),
            binding("partner.twice.v1", (), TwoLimitedCalls),
            binding("mail.plain.v1", ()),
        ],
        limiters=[PARTNER, PER_USER],
    )
    clients = Clients(dynamodb=boto3.client("dynamodb"), sqs=boto3.client("sqs"), ssm=boto3.client("ssm"))
    return Converge(settings, registry=registry, clients=clients, clock=clock, ids=SequentialIds("attempt"))


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
    registry = Registry(
        [JobBinding("mail.x.v1", Notice, lambda: PartnerCall(calls, [20.0]), Queue.CRITICAL, Policy.EFFECT_THEN_CLAIM)]
    )
    clients = Clients(dynamodb=boto3.client("dynamodb"), sqs=boto3.client("sqs"), ssm=boto3.client("ssm"))
    app = Converge(settings, registry=registry, clients=clients, clock=clock, ids=SequentialIds("attempt"))
    operation_id = f"op-{uuid.uuid4().hex[:8]}"
    app.enqueue("mail.x.v1", operation_id, {"user_id": str(uuid.uuid4())})
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
