"""Waits between steps: the delivery ends, the operation waits SCHEDULED holding nothing, and resumes after its wait.

The job renders a document, waits ten minutes (a cooling-off period), then e-mails it. Over moto: effects
counted in the fake world, the resumption read from the queue, the listing from the state table's index.
"""

from __future__ import annotations

import uuid
from typing import Any

import boto3
import pytest

from converge.flow.registry import JobBinding, Policy, Queue, Registry
from converge.flow.runner import JobContext
from converge.model.clock import SequentialIds, iso
from converge.model.concurrency import Concurrency
from converge.model.errors import SendFailed
from converge.model.outcomes import Outcome
from converge.model.states import OperationState
from converge.runtime import Converge
from converge.runtime.clients import Clients

from .conftest import Notice, deliver, sent


class Crash(BaseException):
    """The worker's process dies here."""


class RenderWaitMail:
    def __init__(self, effects: list[str], wait: dict[str, Any]) -> None:
        self.effects = effects
        self.wait = wait

    def load(self, message: Notice, ctx: JobContext) -> str:
        return "ready"

    def run(self, message: Notice, loaded: str, ctx: JobContext) -> None:
        ctx.step("render", lambda key: self.effects.append("render"), policy="keyed_effect")
        ctx.wait("cool-off", **self.wait)
        ctx.step("mail", lambda key: self.effects.append("mail"))


@pytest.fixture
def effects() -> list[str]:
    return []


@pytest.fixture
def wait() -> dict[str, Any]:
    return {"seconds": 600}


@pytest.fixture
def app(settings, clock, effects, wait) -> Converge:
    registry = Registry(
        [
            JobBinding(
                "cv.remind.v1", Notice, lambda: RenderWaitMail(effects, wait), Queue.CRITICAL, Policy.EFFECT_THEN_CLAIM
            )
        ]
    )
    clients = Clients(dynamodb=boto3.client("dynamodb"), sqs=boto3.client("sqs"), ssm=boto3.client("ssm"))
    return Converge(settings, registry=registry, clients=clients, clock=clock, ids=SequentialIds("attempt"))


def enqueue(app: Converge) -> str:
    operation_id = f"op-{uuid.uuid4().hex[:8]}"
    app.enqueue("cv.remind.v1", operation_id, {"user_id": str(uuid.uuid4())})
    return operation_id


def test_a_wait_ends_the_delivery_and_the_operation_waits_listed_holding_nothing(app, effects, clock):
    # Given a job that renders, waits ten minutes, then e-mails
    operation_id = enqueue(app)
    # When it is delivered
    result = deliver(app, operation_id)
    # Then it rendered, and waits: acknowledged, SCHEDULED with its time and the wait it is at, no lease
    assert result.outcome is Outcome.WAITING and result.outcome.acknowledged
    assert effects == ["render"]
    operation = app.operations.require(operation_id, steps=True)
    view = operation.to_json()
    assert (view["state"], view["waiting"], view["run_at"], view["lease"]) == (
        "SCHEDULED",
        "cool-off",
        iso(clock.now() + 600),
        None,
    )
    assert [(s["name"], s["policy"]) for s in view["steps"]] == [("render", "keyed_effect"), ("cool-off", "wait")]
    # And it is listed among the SCHEDULED operations
    listed = [row["operation_id"] for row in app.operations.listings.iter_attention("SCHEDULED")]
    assert operation_id in listed


def test_a_copy_before_the_time_runs_nothing_and_the_resumed_run_skips_what_ran(app, effects, clock):
    # Given an operation waiting ten minutes
    operation_id = enqueue(app)
    assert deliver(app, operation_id).outcome is Outcome.WAITING
    # When a copy arrives early, Then nothing runs and it comes back at the wait's end
    early = deliver(app, operation_id, attempt=2)
    assert early.outcome is Outcome.EARLY and early.retry_after == pytest.approx(600, abs=1)
    # When the wait is over and it is delivered
    clock.advance(600)
    assert deliver(app, operation_id, attempt=1, message_id="m-2").outcome is Outcome.SUCCEEDED
    # Then the render is not made again, the e-mail is sent once, and it no longer waits
    assert effects == ["render", "mail"]
    record = app.operations.require(operation_id).state_record
    assert (record.state, record.waiting) == (OperationState.SUCCEEDED, None)


def test_the_resumption_is_sent_with_the_delay_of_the_wait(app, clock):
    # Given a wait of ten minutes (within SQS's 900 s)
    operation_id = enqueue(app)
    # When the operation starts waiting
    assert deliver(app, operation_id).outcome is Outcome.WAITING
    # Then its message was sent again, delayed by the wait
    attributes = boto3.client("sqs").get_queue_attributes(QueueUrl=app.settings.queue_url, AttributeNames=["All"])[
        "Attributes"
    ]
    assert int(attributes["ApproximateNumberOfMessagesDelayed"]) == 1


def test_a_crash_while_starting_to_wait_waits_until_the_time_first_recorded(app, effects, clock, monkeypatch):
    # Given a delivery that dies after recording the wait, before the operation is SCHEDULED
    operation_id = enqueue(app)
    first_until = clock.now() + 600
    real_wait = app.operations.state.wait
    deaths = [Crash("died")]

    def wait_then_die(*args: Any, **kwargs: Any) -> Any:
        if deaths:
            raise deaths.pop()
        return real_wait(*args, **kwargs)

    monkeypatch.setattr(app.operations.state, "wait", wait_then_die)
    with pytest.raises(Crash):
        deliver(app, operation_id)
    # When the message comes back five minutes later (the lease expired)
    clock.advance(300)
    assert deliver(app, operation_id, attempt=2).outcome is Outcome.WAITING
    # Then the wait is not started again: it ends when first recorded, and nothing ran twice
    assert app.operations.require(operation_id).state_record.run_at == pytest.approx(first_until)
    assert effects == ["render"]


def test_a_cancel_while_waiting_stops_every_later_step(app, effects, clock):
    # Given an operation waiting between its two steps
    operation_id = enqueue(app)
    assert deliver(app, operation_id).outcome is Outcome.WAITING
    # When an operator cancels it
    done = app.operator("cli:alice").cancel(operation_id, "the user withdrew")
    # Then it is CANCELLED, and its receipt says it was waiting (the steps before the wait ran)
    assert done.applied and done.after == "CANCELLED"
    assert "while waiting at 'cool-off'" in app.operations.require(operation_id).history[-1].reason
    # And its resumption, arriving at the time, runs nothing: no step after the cancel
    clock.advance(600)
    assert deliver(app, operation_id, message_id="m-2").outcome is Outcome.DUPLICATE
    assert effects == ["render"]


def test_a_running_step_is_never_cancelled(app, effects):
    # Given an operation a delivery holds (a step in flight)
    operation_id = enqueue(app)
    from .sqs_deliveries import hold_lease

    hold_lease(app, operation_id)
    # When an operator cancels it, Then it is too late
    done = app.operator("cli:alice").cancel(operation_id, "too late")
    assert not done.applied and "IN_PROGRESS" in done.message


@pytest.mark.parametrize("wait", [{"seconds": 400 * 24 * 3600}, {"seconds": -1}, {}])
def test_a_wait_out_of_bounds_is_refused_with_the_reason(app, effects, wait):
    # Given a wait of more than a year, a negative one, or neither a duration nor a time
    operation_id = enqueue(app)
    # When the job runs, Then the wait is refused (retried, visibly) and nothing after it runs
    result = deliver(app, operation_id)
    assert result.outcome is Outcome.RETRY and "wait 'cool-off'" in result.reason
    assert effects == ["render"]


def test_a_wait_nothing_resumed_is_sent_again_by_the_reconciler_and_listed_with_the_reason(app, effects, clock):
    # Given an operation waiting ten minutes whose resumption message is lost
    operation_id = enqueue(app)
    assert deliver(app, operation_id).outcome is Outcome.WAITING
    boto3.client("sqs").purge_queue(QueueUrl=app.settings.queue_url)
    # When the reconciler runs long after its time
    clock.advance(600 + 2 * 3600)
    summary = app.reconciler.run().to_json()
    # Then it is sent again and listed under STUCK with the wait it is at
    assert summary["overdue_redispatched"] == 1
    record = app.operations.require(operation_id).state_record
    assert record.stuck_kind == "overdue" and "waiting at 'cool-off'" in (record.stuck_reason or "")
    # And its delivery resumes after the wait: the e-mail, once
    assert deliver(app, operation_id, message_id="m-3").outcome is Outcome.SUCCEEDED
    assert effects == ["render", "mail"]


def test_a_wait_whose_resumption_cannot_be_sent_is_listed_stuck_until_the_reconciler_sends_it(
    app, effects, clock, monkeypatch, counted
):
    # Given SQS refusing the resumption's message (twice), as it refuses a send after its inline retries
    real_send = app.delays.send
    refusals = [SendFailed("SQS did not take the message"), SendFailed("SQS did not take the message")]

    def send_unless_refused(*args: Any, **kwargs: Any) -> Any:
        if refusals:
            raise refusals.pop()
        return real_send(*args, **kwargs)

    monkeypatch.setattr(app.delays, "send", send_unless_refused)
    operation_id = enqueue(app)
    # When the operation starts waiting
    result = deliver(app, operation_id)
    # Then the delivery ends (acknowledged), and the operation waits listed under STUCK with the error, not SCHEDULED
    assert result.outcome is Outcome.WAITING and "its resumption is not sent yet" in result.reason
    record = app.operations.require(operation_id).state_record
    assert (record.state, record.waiting, record.stuck_kind) == (OperationState.SCHEDULED, "cool-off", "undispatched")
    assert "could not be sent" in (record.stuck_reason or "") and "SQS did not take" in (record.stuck_reason or "")
    stuck = app.operations.listings.iter_attention("STUCK", "cv.remind.v1")  # listed under its job type
    assert operation_id in [row["operation_id"] for row in stuck]
    assert operation_id not in [row["operation_id"] for row in app.operations.listings.iter_attention("SCHEDULED")]
    assert ("stuck", "cv.remind.v1", 1) in counted  # the job's STUCK count, for its alarm
    assert delayed_messages(app) == 0
    # When the reconciler runs while SQS still refuses, Then it stays listed so, and nothing is counted as sent
    assert app.reconciler.run().resumptions_sent == 0
    assert app.operations.require(operation_id).state_record.stuck_kind == "undispatched"
    # When it runs again with SQS back
    summary = app.reconciler.run()
    # Then the resumption is sent for the wait's time, and the operation is listed under SCHEDULED again
    assert summary.resumptions_sent == 1
    assert delayed_messages(app) == 1
    record = app.operations.require(operation_id).state_record
    assert (record.state, record.stuck_kind, record.run_at) == (OperationState.SCHEDULED, None, clock.now() + 600)
    assert operation_id in [row["operation_id"] for row in app.operations.listings.iter_attention("SCHEDULED")]
    # And a later run sends nothing more
    assert app.reconciler.run().resumptions_sent == 0
    # And at its time it resumes: the render is not made again, the e-mail is sent once
    clock.advance(600)
    assert deliver(app, operation_id, message_id="m-2").outcome is Outcome.SUCCEEDED
    assert effects == ["render", "mail"]


def delayed_messages(app: Converge) -> int:
    attributes = boto3.client("sqs").get_queue_attributes(
        QueueUrl=app.settings.queue_url, AttributeNames=["ApproximateNumberOfMessagesDelayed"]
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessagesDelayed"])


def test_a_wait_under_a_claim_then_effect_binding_is_refused_before_anything_is_recorded(app, clock):
    # Given the steps of a delivery of a job bound claim_then_effect (whose confirm answers for the whole job)
    from converge.flow.steps import Steps

    steps = Steps(app.operations.markers, "op-c", "owner", True, Policy.CLAIM_THEN_EFFECT, clock)
    # When it waits, Then it is refused with the reason, and no marker was written
    with pytest.raises(Exception, match="binds effect_then_claim or keyed_effect"):
        steps.wait("pause", clock.now() + 60)
    assert app.operations.markers.steps("op-c") == {}


def test_a_delivery_taken_over_while_it_starts_to_wait_gives_way_and_says_so(app, effects, clock, counted):
    # Given a delivery whose lease runs out while its runner reaches the wait, another delivery taking it over
    operation_id = enqueue(app)
    real_wait = app.operations.state.wait

    def taken_over_first(*args: Any, **kwargs: Any) -> Any:
        from .sqs_deliveries import hold_lease

        clock.advance(3600)
        hold_lease(app, operation_id, "another-delivery")
        return real_wait(*args, **kwargs)

    app.operations.state.wait = taken_over_first  # type: ignore[method-assign]
    # When the first delivery tries to wait
    result = deliver(app, operation_id)
    # Then it gives way: a duplicate, counted for its job, and the other delivery holds the operation
    assert (result.outcome, result.reason) == (
        Outcome.DUPLICATE,
        "taken over by another delivery while starting to wait",
    )
    assert ("duplicate_skipped", "cv.remind.v1", 1) in counted
    assert not [name for name, *_ in counted if name == "waiting"]
    record = app.operations.state.record(operation_id)
    assert (record.state, record.lease_owner, record.waiting) == (OperationState.IN_PROGRESS, "another-delivery", None)


def test_a_wait_that_cannot_be_recorded_goes_back_to_the_queue_with_the_reason(app, counted, monkeypatch):
    # Given the state table failing the wait's write
    operation_id = enqueue(app)
    monkeypatch.setattr(app.operations.state, "wait", lambda *a, **k: (_ for _ in ()).throw(ConnectionError("lost")))
    # When the delivery reaches the wait / Then it is retried, saying what could not be recorded, for its job
    result = deliver(app, operation_id)
    assert result.outcome is Outcome.RETRY
    assert result.reason == "could not record the wait: ConnectionError: lost"
    assert ("retried", "cv.remind.v1", 1) in counted


def test_a_wait_with_no_delayed_dispatch_configured_is_listed_stuck_saying_so(app, counted, monkeypatch):
    # Given a pipeline with no way to send a message for later
    operation_id = enqueue(app)
    monkeypatch.setattr(app.pipeline, "resume_later", None)
    # When the operation waits
    result = deliver(app, operation_id)
    # Then it waits, counted for its job, listed under STUCK with the reason its resumption is not sent
    assert result.outcome is Outcome.WAITING
    assert result.reason.endswith(
        "; its resumption is not sent yet (ConfigurationError: no delayed dispatch configured)"
    )
    assert ("waiting", "cv.remind.v1", 1) in counted
    assert "no delayed dispatch configured" in (app.operations.state.record(operation_id).stuck_reason or "")


def test_a_wait_records_its_time_to_the_millisecond_and_a_resumed_run_reads_it_back(app, clock):
    # Given the steps of a first delivery, at a time with a fraction of a millisecond
    from converge.flow.steps import Steps, Waiting

    clock.advance(0.1234567)
    steps = Steps(app.operations.markers, "op-w", "owner", True, Policy.EFFECT_THEN_CLAIM, clock)
    until = clock.now() + 60
    # When it waits a minute
    with pytest.raises(Waiting) as waiting:
        steps.wait("cool-off", until)
    # Then the wait's marker holds its time (to the millisecond, and as text), noted as waiting
    marker = app.operations.markers.steps("op-w")["cool-off"]
    assert marker.result == {"until": round(until, 3), "at": iso(until)} and marker.note == "waiting"
    assert round(until, 3) != round(until, 4)
    assert str(waiting.value) == f"waiting at 'cool-off' until {iso(until)}"
    # When a resumed delivery, a second later, reaches the same wait
    clock.advance(1)
    resumed = Steps(app.operations.markers, "op-w", "owner-2", False, Policy.EFFECT_THEN_CLAIM, clock)
    calls = sent(app.clients.dynamodb)
    with pytest.raises(Waiting) as again:
        resumed.wait("cool-off", clock.now() + 60)
    # Then it waits until the time first recorded, read back (no second write)
    assert again.value.until == round(until, 3)
    assert "PutItem" not in [name for name, _ in calls]


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("Cool Off", "wait name 'Cool Off' must be lowercase letters, digits and '-' (at most 48)"),
        (7, "wait name 7 must be lowercase letters, digits and '-' (at most 48)"),
    ],
)
def test_a_wait_name_out_of_form_is_refused_with_the_form(app, clock, name, says):
    from converge.flow.steps import Steps
    from converge.model.errors import ConfigurationError

    steps = Steps(app.operations.markers, "op-n", "owner", True, Policy.EFFECT_THEN_CLAIM, clock)
    with pytest.raises(ConfigurationError) as refused:
        steps.wait(name, clock.now() + 60)
    assert str(refused.value) == says


def test_a_wait_run_twice_in_one_delivery_is_refused(app, clock):
    from converge.flow.steps import Steps
    from converge.model.errors import ConfigurationError

    steps = Steps(app.operations.markers, "op-t", "owner", True, Policy.EFFECT_THEN_CLAIM, clock)
    steps.wait("cool-off", clock.now())  # its time has come: passed
    with pytest.raises(ConfigurationError) as refused:
        steps.wait("cool-off", clock.now())
    assert str(refused.value) == "'cool-off' is run twice in one delivery; each step and wait needs its own name"


def test_the_refusal_of_a_wait_under_claim_then_effect_says_what_to_bind(app, clock):
    from converge.flow.steps import Steps
    from converge.model.errors import ConfigurationError

    steps = Steps(app.operations.markers, "op-c2", "owner", True, Policy.CLAIM_THEN_EFFECT, clock)
    with pytest.raises(ConfigurationError) as refused:
        steps.wait("pause", clock.now() + 60)
    assert str(refused.value) == "a job that waits binds effect_then_claim or keyed_effect, with its effects as steps"


def test_an_early_copy_of_a_capped_waiting_job_whose_key_is_full_leaves_the_wait_as_it_was(
    settings, clock, effects, wait
):
    # Given the job capped at one per user, waiting its ten minutes after the render, and its user's key full (a
    # second job of the user running)
    cap = Concurrency("remind", limit=1, key="user_id")
    job = JobBinding(
        "cv.remind.v1",
        Notice,
        lambda: RenderWaitMail(effects, wait),
        Queue.CRITICAL,
        Policy.EFFECT_THEN_CLAIM,
        concurrency=cap,
    )
    clients = Clients(dynamodb=boto3.client("dynamodb"), sqs=boto3.client("sqs"), ssm=boto3.client("ssm"))
    app = Converge(settings, registry=Registry([job]), clients=clients, clock=clock, ids=SequentialIds("attempt"))
    operation_id = enqueue(app)
    assert deliver(app, operation_id).outcome is Outcome.WAITING and effects == ["render"]
    user = app.operations.require(operation_id).payload["user_id"]
    assert app.concurrency_caps._table.take("remind", user, "op-other", clock.now() + 900, 1, clock.now()).taken
    # When an early copy of its message arrives (a replayed dispatch)
    early = deliver(app, operation_id, attempt=2, message_id="m-copy")
    # Then it is refused as early, not held: the wait's time stands, it still waits at the wait, nothing ran
    assert early.outcome is Outcome.EARLY and early.retry_after == pytest.approx(600, abs=1)
    record = app.operations.require(operation_id).state_record
    assert (record.state, record.waiting, record.run_at) == (OperationState.SCHEDULED, "cool-off", clock.now() + 600)
    assert effects == ["render"]
    # And the copy gave its slot back: the key holds only the other job's
    assert set(app.concurrency_caps._table.keys("remind")[0].holders) == {"op-other"}
