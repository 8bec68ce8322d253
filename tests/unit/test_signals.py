"""Signals: a step waits for a named signal with a timeout; the signal is kept once, in any order, and either it
or the timeout resumes the wait, never both.

The job asks for a partner credit's approval, waits for the signal `approval` (a timeout), then credits
or not. Over moto: effects counted in the fake world, messages read from the queue, receipts from the tables.
"""

from __future__ import annotations

import uuid
from typing import Any

import boto3
import pytest

from converge.flow.registry import JobBinding, Policy, Queue, Registry
from converge.flow.runner import JobContext
from converge.flow.steps import Steps
from converge.model.clock import SequentialIds, iso
from converge.model.errors import ConfigurationError, InvalidMessage
from converge.model.outcomes import Outcome
from converge.model.signals import SignalAnswer, SignalKind, SignalRecord, WaitResult
from converge.model.states import OperationState
from converge.model.submission import SignalSubmission
from converge.runtime import Converge
from converge.runtime.clients import Clients

from .conftest import Notice, deliver, sent

TIMEOUT = 800
"""Within SQS's message delay: these settings have no schedule group (the local cloud's tests cover a long one)."""


class Crash(BaseException):
    """The process dies here."""


class ApproveThenCredit:
    """Ask, wait for the approval (or its timeout), then credit when approved; the outcome is what each run saw
    (and what `wait_for` returned, in `waits` when given)."""

    def __init__(self, effects: list[str], waits: list[WaitResult] | None = None, timeout: float = TIMEOUT) -> None:
        self.effects = effects
        self.waits = waits
        self.timeout = timeout

    def load(self, message: Notice, ctx: JobContext) -> str:
        return "ready"

    def run(self, message: Notice, loaded: str, ctx: JobContext) -> None:
        ctx.step("ask", lambda key: self.effects.append("ask"))
        approval = ctx.wait_for("approval", timeout=self.timeout)
        if self.waits is not None:
            self.waits.append(approval)
        if approval.timed_out:
            ctx.step("tell-expired", lambda key: self.effects.append("expired"))
        elif approval.payload.get("decision") == "approved":
            ctx.step("credit", lambda key: self.effects.append(f"credit by {approval.payload.get('operator_id')}"))
        else:
            ctx.step("tell-rejected", lambda key: self.effects.append("rejected"))


@pytest.fixture
def effects() -> list[str]:
    return []


def approving(
    settings, clock, effects: list[str], waits: list[WaitResult] | None = None, timeout: float = TIMEOUT
) -> Converge:
    """A converge over moto whose one job is `ApproveThenCredit`, recording its effects in `effects`."""
    binding = JobBinding(
        "ledger.approve-credit.v1",
        Notice,
        lambda: ApproveThenCredit(effects, waits, timeout),
        Queue.CRITICAL,
        Policy.EFFECT_THEN_CLAIM,
    )
    clients = Clients(dynamodb=boto3.client("dynamodb"), sqs=boto3.client("sqs"), ssm=boto3.client("ssm"))
    return Converge(settings, registry=Registry([binding]), clients=clients, clock=clock, ids=SequentialIds("attempt"))


@pytest.fixture
def app(settings, clock, effects) -> Converge:
    return approving(settings, clock, effects)


def enqueue(app: Converge) -> str:
    operation_id = f"op-{uuid.uuid4().hex[:8]}"
    app.enqueue("ledger.approve-credit.v1", operation_id, {"user_id": str(uuid.uuid4())})
    return operation_id


def queued(app: Converge) -> int:
    """Messages on the queue now (visible), as SQS counts them."""
    attributes = boto3.client("sqs").get_queue_attributes(
        QueueUrl=app.settings.queue_url, AttributeNames=["ApproximateNumberOfMessages"]
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"])


APPROVED = {"decision": "approved", "operator_id": "op-7"}


def test_a_wait_for_a_signal_is_scheduled_and_listed_with_what_it_waits_for_and_until_when(app, effects, clock):
    # Given a job that asks, then waits for its approval
    operation_id = enqueue(app)
    # When it is delivered
    result = deliver(app, operation_id)
    # Then it asked, and waits: SCHEDULED until its timeout, for the signal, holding no lease
    assert result.outcome is Outcome.WAITING and "waiting for signal 'approval'" in result.reason
    assert effects == ["ask"]
    view = app.operations.require(operation_id, steps=True).to_json()
    assert (view["state"], view["waiting"], view["waiting_for"], view["run_at"], view["lease"]) == (
        "SCHEDULED",
        "approval",
        "signal",
        iso(clock.now() + TIMEOUT),
        None,
    )
    assert [(step["name"], step["policy"], step["state"]) for step in view["steps"]] == [
        ("ask", "effect_then_claim", "done"),
        ("approval", "wait_for", "claimed"),
    ]
    assert view["signals"] == []
    assert operation_id in [row["operation_id"] for row in app.operations.listings.iter_attention("SCHEDULED")]


def test_a_signal_during_the_wait_wakes_it_now_and_the_run_resumes_with_its_payload(app, effects, clock):
    # Given an operation waiting for its approval
    operation_id = enqueue(app)
    assert deliver(app, operation_id).outcome is Outcome.WAITING
    before = queued(app)
    # When an operator approves it
    receipt = app.signals.send(SignalSubmission(operation_id, "approval", APPROVED, "approval-1", sent_by="cli:alice"))
    # Then the signal is kept and the operation woken: its message is on the queue now, not in three days
    assert (receipt.answer, receipt.woke) == (SignalAnswer.ACCEPTED, True)
    assert queued(app) == before + 1
    record = app.operations.require(operation_id).state_record
    assert record.state is OperationState.SCHEDULED and record.run_at == pytest.approx(clock.now(), abs=0.01)
    # And its delivery resumes with the payload: credited once, by the operator the signal names
    assert deliver(app, operation_id, message_id="m-2").outcome is Outcome.SUCCEEDED
    assert effects == ["ask", "credit by op-7"]
    view = app.operations.require(operation_id, steps=True).to_json()
    assert (view["waiting"], view["waiting_for"]) == (None, None)  # waiting no more
    approval = next(step for step in view["steps"] if step["name"] == "approval")
    assert (approval["state"], approval["note"]) == ("done", "resumed by signal 'approval-1'")
    assert [(s["signal_id"], s["kind"], s["sent_by"], s["payload"]) for s in view["signals"]] == [
        ("approval-1", "signal", "cli:alice", APPROVED)
    ]


def test_a_signal_before_the_wait_is_kept_and_passed_at_once_when_the_run_gets_there(app, effects):
    # Given an operation not started yet
    operation_id = enqueue(app)
    # When its approval comes first
    receipt = app.signal(operation_id, "approval", APPROVED, signal_id="early-1")
    assert (receipt.answer, receipt.woke) == (SignalAnswer.ACCEPTED, False)
    # Then its first delivery passes the wait at once, with the payload: nothing waits
    assert deliver(app, operation_id).outcome is Outcome.SUCCEEDED
    assert effects == ["ask", "credit by op-7"]


def test_the_same_signal_id_twice_is_one_signal(app, effects):
    # Given an operation waiting, and its approval received
    operation_id = enqueue(app)
    deliver(app, operation_id)
    assert app.signal(operation_id, "approval", APPROVED, signal_id="a-1").answer is SignalAnswer.ACCEPTED
    # When the sender retries the same signal (its answer was lost)
    again = app.signal(operation_id, "approval", APPROVED, signal_id="a-1")
    # Then it is the same signal: told so, nothing refused, one item
    assert again.answer is SignalAnswer.DUPLICATE and again.kept
    signals = app.operations.require(operation_id, steps=True).signals or ()
    assert [(s.signal_id, s.refused) for s in signals] == [("a-1", ())]


def test_the_same_signal_id_with_another_payload_is_the_same_signal_and_its_first_payload_stands(app, effects):
    # Given an operation waiting, and its approval received
    operation_id = enqueue(app)
    deliver(app, operation_id)
    assert app.signal(operation_id, "approval", APPROVED, signal_id="a-1").answer is SignalAnswer.ACCEPTED
    # When a sender sends the same signal id with another payload
    other = app.signal(operation_id, "approval", {"decision": "rejected", "operator_id": "op-8"}, signal_id="a-1")
    # Then it is the same signal (duplicate, not refused): the first payload stands, nothing listed as refused
    assert other.answer is SignalAnswer.DUPLICATE and other.kept
    [kept] = app.operations.require(operation_id, steps=True).signals or ()
    assert (dict(kept.payload), kept.refused, kept.refused_dropped) == (APPROVED, (), 0)
    # And the operation resumes with the first payload
    assert deliver(app, operation_id, message_id="m-2").outcome is Outcome.SUCCEEDED
    assert effects == ["ask", "credit by op-7"]


def test_a_signal_without_an_id_is_named_by_its_content_so_a_retried_call_is_one_signal(app):
    operation_id = enqueue(app)
    first = app.signal(operation_id, "approval", APPROVED)
    again = app.signal(operation_id, "approval", dict(APPROVED))
    other = app.signal(operation_id, "approval", {"decision": "rejected", "operator_id": "op-8"})
    assert (first.answer, again.answer, other.answer) == (
        SignalAnswer.ACCEPTED,
        SignalAnswer.DUPLICATE,
        SignalAnswer.REFUSED,
    )
    assert first.signal_id == again.signal_id != other.signal_id


def test_another_signal_for_a_wait_already_satisfied_is_refused_and_listed(app, effects):
    # Given an operation approved and credited
    operation_id = enqueue(app)
    deliver(app, operation_id)
    app.signal(operation_id, "approval", APPROVED, signal_id="a-1")
    # When a second operator rejects it, with another id, before the run resumed
    late = app.signals.send(
        SignalSubmission(operation_id, "approval", {"decision": "rejected"}, "r-1", sent_by="cli:bob")
    )
    # Then it is refused, saying what the wait has, and listed on the operation: never silently dropped
    assert late.answer is SignalAnswer.REFUSED and "has signal 'a-1' already" in late.detail
    (item,) = app.operations.require(operation_id, steps=True).signals or ()
    assert [(r.signal_id, r.sent_by) for r in item.refused] == [("r-1", "cli:bob")]
    # And the run resumes with the first signal only
    assert deliver(app, operation_id, message_id="m-2").outcome is Outcome.SUCCEEDED
    assert effects == ["ask", "credit by op-7"]


def test_the_timeout_resumes_the_wait_once_and_a_signal_after_it_is_refused(app, effects, clock):
    # Given an operation waiting, whose approval never comes
    operation_id = enqueue(app)
    deliver(app, operation_id)
    # When its timeout comes and its resumption is delivered
    clock.advance(TIMEOUT)
    assert deliver(app, operation_id, message_id="m-2").outcome is Outcome.SUCCEEDED
    # Then the runner took its timeout path, and the receipt says the wait timed out
    assert effects == ["ask", "expired"]
    operation = app.operations.require(operation_id, steps=True)
    approval = next(step for step in operation.steps or () if step.name == "approval")
    assert approval.note == "timed out"
    # And an approval after it is answered as ended (the operation is final), never taken
    assert app.signal(operation_id, "approval", APPROVED).answer is SignalAnswer.ENDED


def test_a_signal_racing_the_timeout_ends_in_exactly_one(app, effects, clock):
    # Given an operation whose timeout came, resumed by a delivery that dies after deciding the timeout
    operation_id = enqueue(app)
    deliver(app, operation_id)
    clock.advance(TIMEOUT)
    real_record = app.operations.markers.record_step

    def die_once(*args: Any, **kwargs: Any) -> Any:
        app.operations.markers.record_step = real_record  # type: ignore[method-assign]
        raise Crash("died after the timeout was decided")

    app.operations.markers.record_step = die_once  # type: ignore[method-assign]
    with pytest.raises(Crash):
        deliver(app, operation_id, message_id="m-2")
    # When the approval arrives now (the operation is not final: its delivery died)
    late = app.signal(operation_id, "approval", APPROVED, signal_id="a-1")
    # Then it is refused: the timeout came first, and it is listed
    assert late.answer is SignalAnswer.REFUSED and "timed out" in late.detail
    # And the retry after the lease takes the timeout path, once
    clock.advance(120)
    assert deliver(app, operation_id, message_id="m-3", attempt=2).outcome is Outcome.SUCCEEDED
    assert effects == ["ask", "expired"]


def test_a_signal_that_comes_while_the_run_starts_to_wait_is_not_lost(app, effects, clock, monkeypatch):
    # Given a delivery that looked for the signal, found none, and is about to record the wait
    operation_id = enqueue(app)
    real_wait = app.operations.state.wait
    answers: list[Any] = []

    def signal_meanwhile(*args: Any, **kwargs: Any) -> Any:
        # The sender's put lands now, and its wake finds the operation still IN_PROGRESS: not woken
        answers.append(app.signal(operation_id, "approval", APPROVED, signal_id="a-1"))
        return real_wait(*args, **kwargs)

    monkeypatch.setattr(app.operations.state, "wait", signal_meanwhile)
    result = deliver(app, operation_id)
    # Then the delivery, once SCHEDULED, looks again, sees it, and resumes the operation now
    assert answers[0].answer is SignalAnswer.ACCEPTED and not answers[0].woke
    assert result.outcome is Outcome.WAITING and "its signal came meanwhile" in result.reason
    record = app.operations.require(operation_id).state_record
    assert record.run_at == pytest.approx(clock.now(), abs=0.01)
    assert deliver(app, operation_id, message_id="m-2").outcome is Outcome.SUCCEEDED
    assert effects == ["ask", "credit by op-7"]


def test_a_sender_that_dies_before_its_wake_wakes_on_its_retry(app, effects, clock, monkeypatch):
    # Given an operation waiting, and a sender that dies between keeping its signal and waking the operation
    operation_id = enqueue(app)
    deliver(app, operation_id)
    real_wake = app.operations.state.wake
    monkeypatch.setattr(app.operations.state, "wake", lambda *a, **k: (_ for _ in ()).throw(Crash("died")))
    with pytest.raises(Crash):
        app.signal(operation_id, "approval", APPROVED, signal_id="a-1")
    monkeypatch.setattr(app.operations.state, "wake", real_wake)
    # When it retries the same signal
    again = app.signal(operation_id, "approval", APPROVED, signal_id="a-1")
    # Then it is the same signal, and this time the operation is woken
    assert (again.answer, again.woke) == (SignalAnswer.DUPLICATE, True)
    assert deliver(app, operation_id, message_id="m-2").outcome is Outcome.SUCCEEDED
    assert effects == ["ask", "credit by op-7"]


def test_a_signal_for_a_missing_or_ended_operation_is_answered_so_and_nothing_is_kept(app, effects):
    assert app.signal("op-nowhere", "approval", APPROVED).answer is SignalAnswer.NOT_FOUND
    operation_id = enqueue(app)
    app.cancel(operation_id, "withdrawn")
    ended = app.signal(operation_id, "approval", APPROVED)
    assert ended.answer is SignalAnswer.ENDED and "CANCELLED" in ended.detail
    assert app.operations.require(operation_id, steps=True).signals == ()


def test_a_wait_for_a_signal_is_cancellable_and_its_signal_then_ends(app, effects, clock):
    # Given an operation waiting for its approval
    operation_id = enqueue(app)
    deliver(app, operation_id)
    # When an operator cancels it
    done = app.operator("cli:alice").cancel(operation_id, "the partner withdrew")
    assert done.applied
    assert app.operations.require(operation_id).state is OperationState.CANCELLED
    # Then a signal after it is answered as ended, and its resumption runs nothing
    assert app.signal(operation_id, "approval", APPROVED).answer is SignalAnswer.ENDED
    clock.advance(TIMEOUT)
    assert deliver(app, operation_id, message_id="m-2").outcome is Outcome.DUPLICATE
    assert effects == ["ask"]


@pytest.mark.parametrize(
    ("payload", "says"),
    [
        ({"note": "mail jane.doe@example.com"}, "e-mail"),
        ({"password": "x"}, "suggests a secret"),
        ({"decision": {"nested": 1}}, "nested"),
        ("approved", "payload must be an object"),
    ],
)
def test_a_signal_payload_is_screened_like_a_message(app, payload, says):
    operation_id = enqueue(app)
    with pytest.raises(InvalidMessage, match=says):
        app.signal(operation_id, "approval", payload)
    assert app.operations.require(operation_id, steps=True).signals == ()


@pytest.mark.parametrize(("name", "signal_id"), [("Approval", "a-1"), ("approval", "bad id!"), ("", "a-1")])
def test_a_signal_name_or_id_out_of_form_is_refused(app, name, signal_id):
    with pytest.raises(InvalidMessage):
        app.signal("op-1", name, {}, signal_id=signal_id)


def test_a_woken_wait_whose_message_cannot_be_sent_is_listed_stuck_for_the_reconciler(app, effects, monkeypatch):
    # Given an operation waiting, and SQS refusing the wake's message
    operation_id = enqueue(app)
    deliver(app, operation_id)
    real_send = app.dispatcher.send_one
    monkeypatch.setattr(app.dispatcher, "send_one", lambda item: (_ for _ in ()).throw(ConnectionError("sqs down")))
    receipt = app.signal(operation_id, "approval", APPROVED)
    # Then the signal is kept, and the operation listed under STUCK, undispatched, saying what woke it and why
    assert receipt.answer is SignalAnswer.ACCEPTED
    record = app.operations.require(operation_id).state_record
    assert (record.state, record.stuck_kind, record.stuck_reason) == (
        OperationState.SCHEDULED,
        "undispatched",
        "woken by signal 'approval', and its message could not be sent (ConnectionError: sqs down)",
    )
    # And it is listed under its job type, as an operator filters the list
    stuck = app.operations.listings.iter_attention("STUCK", "ledger.approve-credit.v1")
    assert [row["operation_id"] for row in stuck] == [operation_id]
    # When the reconciler runs with SQS back, Then it sends it, and the run resumes with the signal
    monkeypatch.setattr(app.dispatcher, "send_one", real_send)
    assert app.reconciler.run().to_json()["resumptions_sent"] == 1
    assert deliver(app, operation_id, message_id="m-2").outcome is Outcome.SUCCEEDED
    assert effects == ["ask", "credit by op-7"]


def test_a_signal_whose_wake_could_not_be_sent_is_not_answered_woke(app, monkeypatch):
    # Given two operations waiting, SQS refusing every message, and the request of the second deleted
    refused_sqs, deleted = enqueue(app), enqueue(app)
    deliver(app, refused_sqs)
    deliver(app, deleted, message_id="m-deleted")
    boto3.client("dynamodb").delete_item(TableName=app.settings.jobs_table, Key={"operation_id": {"S": deleted}})
    monkeypatch.setattr(app.dispatcher, "send_one", lambda item: (_ for _ in ()).throw(ConnectionError("sqs down")))
    # When each is sent its approval, and the first's sender retries
    receipts = [
        app.signal(refused_sqs, "approval", APPROVED, signal_id="a-1"),
        app.signal(deleted, "approval", APPROVED, signal_id="a-2"),
        app.signal(refused_sqs, "approval", APPROVED, signal_id="a-1"),
    ]
    # Then each signal is kept, but no answer says it woke the operation: its message went nowhere
    unsent = "kept; its wake's message could not be sent now: the operation is listed under STUCK, with why"
    assert [(r.answer, r.woke, r.detail) for r in receipts] == [
        (SignalAnswer.ACCEPTED, False, unsent),
        (SignalAnswer.ACCEPTED, False, unsent),
        (SignalAnswer.DUPLICATE, False, receipts[2].detail),
    ]
    assert receipts[2].detail.startswith("received already at ")
    # And each is listed under STUCK, as the answer says
    stuck = {op: app.operations.require(op).state_record.stuck_kind for op in (refused_sqs, deleted)}
    assert stuck == {refused_sqs: "undispatched", deleted: "unrunnable"}


REJECTED = {"decision": "rejected", "operator_id": "op-8"}


def test_the_wait_returns_the_signal_that_resumed_it_or_its_timeout(settings, clock, effects):
    # Given two operations waiting for their approval, in a job that keeps what each wait returned
    waits: list[WaitResult] = []
    app = approving(settings, clock, effects, waits)
    approved, lapsed = enqueue(app), enqueue(app)
    deliver(app, approved)
    deliver(app, lapsed)
    # When one is approved, and the other's timeout comes
    clock.advance(60)
    sent_at = iso(clock.now())
    app.signal(approved, "approval", APPROVED, signal_id="a-1")
    deliver(app, approved, message_id="m-2")
    clock.advance(TIMEOUT)
    deliver(app, lapsed, message_id="m-2")
    # Then the first run was handed the signal (its payload, its id, when it came), the second its timeout
    assert waits == [
        WaitResult("approval", False, APPROVED, "a-1", sent_at),
        WaitResult("approval", True, {}, None, iso(clock.now())),
    ]
    assert [(wait.received, wait.timed_out) for wait in waits] == [(True, False), (False, True)]


def test_every_answer_names_the_signal_says_what_became_of_it_and_is_counted(app, clock, monkeypatch):
    # Given an operation not started yet, one waiting for its approval, and one cancelled
    counted: list[str] = []
    monkeypatch.setattr("converge.flow.signals.count", lambda name, *args, **kwargs: counted.append(name))
    early, waiting, ended = enqueue(app), enqueue(app), enqueue(app)
    deliver(app, waiting)
    app.cancel(ended, "withdrawn")
    at = iso(clock.now())
    # When each is sent its approval, the waiting one three times (once again, once another decision)
    receipts = [
        app.signal("op-nowhere", "approval", APPROVED, signal_id="a-0"),
        app.signal(ended, "approval", APPROVED, signal_id="a-1"),
        app.signal(early, "approval", APPROVED, signal_id="a-2"),
        app.signal(waiting, "approval", APPROVED, signal_id="a-3"),
        app.signal(waiting, "approval", APPROVED, signal_id="a-3"),
        app.signal(waiting, "approval", REJECTED, signal_id="r-1"),
    ]
    # Then each sender is told what became of its signal, and whether it woke the operation, as the API shows it
    assert [receipt.to_json() for receipt in receipts] == [
        {
            "answer": "not_found",
            "operation_id": "op-nowhere",
            "name": "approval",
            "signal_id": "a-0",
            "detail": "no operation 'op-nowhere'",
            "woke": False,
        },
        {
            "answer": "ended",
            "operation_id": ended,
            "name": "approval",
            "signal_id": "a-1",
            "detail": "the operation has ended: it is CANCELLED; nothing kept",
            "woke": False,
        },
        {
            "answer": "accepted",
            "operation_id": early,
            "name": "approval",
            "signal_id": "a-2",
            "detail": "kept; delivered when the operation waits for it",
            "woke": False,
        },
        {
            "answer": "accepted",
            "operation_id": waiting,
            "name": "approval",
            "signal_id": "a-3",
            "detail": "kept; the operation resumes now",
            "woke": True,
        },
        {
            "answer": "duplicate",
            "operation_id": waiting,
            "name": "approval",
            "signal_id": "a-3",
            "detail": f"received already at {at}: one signal",
            "woke": True,
        },
        {
            "answer": "refused",
            "operation_id": waiting,
            "name": "approval",
            "signal_id": "r-1",
            "detail": f"refused: the wait 'approval' has signal 'a-3' already (received {at}); listed on the operation",
            "woke": False,
        },
    ]
    assert [receipt.kept for receipt in receipts] == [False, False, True, True, True, False]
    # And each answer is counted under its own name
    assert counted == [
        "signal_not_found",
        "signal_ended",
        "signal_accepted",
        "signal_accepted",
        "signal_duplicate",
        "signal_refused",
    ]


def test_an_operations_signals_are_shown_by_time_each_whole_with_what_was_refused(app, clock):
    # Given an operation whose review signal came first, then its approval, then another decision refused
    operation_id = enqueue(app)
    reviewed_at = iso(clock.now())
    app.signals.send(SignalSubmission(operation_id, "review", {"step": "r-2"}, "v-1", sent_by="cli:carol"))
    clock.advance(5)
    approved_at = iso(clock.now())
    app.signals.send(SignalSubmission(operation_id, "approval", APPROVED, "a-1", sent_by="cli:alice"))
    clock.advance(5)
    refused_at = iso(clock.now())
    app.signals.send(SignalSubmission(operation_id, "approval", REJECTED, "r-1", sent_by="cli:bob"))
    # When an operator shows the operation (`converge ops show`)
    view = app.operations.require(operation_id, steps=True).to_json()
    # Then each wait's item is shown whole, in the order they came (not by name), the refused one listed on it
    assert view["signals"] == [
        {
            "name": "review",
            "kind": "signal",
            "signal_id": "v-1",
            "at": reviewed_at,
            "sent_by": "cli:carol",
            "payload": {"step": "r-2"},
            "refused": [],
            "refused_dropped": 0,
        },
        {
            "name": "approval",
            "kind": "signal",
            "signal_id": "a-1",
            "at": approved_at,
            "sent_by": "cli:alice",
            "payload": APPROVED,
            "refused": [
                {
                    "signal_id": "r-1",
                    "at": refused_at,
                    "sent_by": "cli:bob",
                    "why": f"the wait 'approval' has signal 'a-1' already (received {approved_at})",
                }
            ],
            "refused_dropped": 0,
        },
    ]


def test_refused_signals_past_the_first_ten_are_counted_and_each_sender_still_told(app):
    # Given an operation whose approval is kept
    operation_id = enqueue(app)
    app.signal(operation_id, "approval", APPROVED, signal_id="a-1")
    # When twelve other decisions come after it
    answers = [app.signal(operation_id, "approval", REJECTED, signal_id=f"r-{n}").answer for n in range(12)]
    # Then each is refused; the first ten are listed on the item, the two after them counted
    assert answers == [SignalAnswer.REFUSED] * 12
    [item] = app.operations.require(operation_id, steps=True).to_json()["signals"]
    assert [refused["signal_id"] for refused in item["refused"]] == [f"r-{n}" for n in range(10)]
    assert item["refused_dropped"] == 2


def test_a_timeout_is_kept_as_the_waits_item_sent_by_converge(app, clock):
    # Given an operation waiting, whose approval never comes
    operation_id = enqueue(app)
    deliver(app, operation_id)
    # When its timeout comes and its resumption is delivered, then an approval comes late
    clock.advance(TIMEOUT)
    timed_out_at = iso(clock.now())
    deliver(app, operation_id, message_id="m-2")
    # Then the wait's item says it timed out, when, and that converge wrote it
    [item] = app.operations.require(operation_id, steps=True).to_json()["signals"]
    assert item == {
        "name": "approval",
        "kind": "timeout",
        "signal_id": "timeout",
        "at": timed_out_at,
        "sent_by": "converge",
        "payload": {},
        "refused": [],
        "refused_dropped": 0,
    }


def test_a_signal_after_the_timeout_is_refused_saying_when_the_wait_timed_out(app, clock, monkeypatch):
    # Given an operation whose timeout was recorded by a delivery that died before ending the operation
    operation_id = enqueue(app)
    deliver(app, operation_id)
    clock.advance(TIMEOUT)
    timed_out_at = iso(clock.now())
    monkeypatch.setattr(app.operations.markers, "record_step", lambda *a, **k: (_ for _ in ()).throw(Crash("died")))
    with pytest.raises(Crash):
        deliver(app, operation_id, message_id="m-2")
    # When the approval comes now
    late = app.signals.send(SignalSubmission(operation_id, "approval", APPROVED, "a-1", sent_by="cli:alice"))
    # Then it is refused, saying the wait timed out and when, and listed on the timeout's item
    why = f"the wait 'approval' timed out at {timed_out_at}"
    assert (late.answer, late.detail, late.woke) == (
        SignalAnswer.REFUSED,
        f"refused: {why}; listed on the operation",
        False,
    )
    [item] = app.operations.require(operation_id, steps=True).to_json()["signals"]
    assert (item["kind"], item["refused"]) == (
        "timeout",
        [{"signal_id": "a-1", "at": timed_out_at, "sent_by": "cli:alice", "why": why}],
    )


def queue_arn(url: str | None) -> str:
    attributes = boto3.client("sqs").get_queue_attributes(QueueUrl=str(url), AttributeNames=["QueueArn"])
    return str(attributes["Attributes"]["QueueArn"])


def test_a_long_wait_woken_by_its_signal_has_its_timeouts_schedule_deleted(settings, clock, effects):
    # Given an operation waiting three days for its approval, its timeout a one-time schedule
    scheduler = boto3.client("scheduler")
    scheduler.create_schedule_group(Name="converge-test")
    critical = settings.per_queue[Queue.CRITICAL]
    with_schedules = settings.model_copy(
        update={
            "per_queue": {
                **settings.per_queue,
                Queue.CRITICAL: critical.model_copy(update={"arn": queue_arn(critical.url)}),
            },
            "schedule_group": "converge-test",
            "scheduler_role_arn": "arn:aws:iam::123456789012:role/scheduler",
            "schedule_dlq_arn": queue_arn(settings.dlq_url),
        }
    )
    app = approving(with_schedules, clock, effects, timeout=3 * 24 * 3600)
    operation_id = enqueue(app)
    assert deliver(app, operation_id).outcome is Outcome.WAITING

    def schedules() -> list[str]:
        return [s["Name"] for s in scheduler.list_schedules(GroupName="converge-test")["Schedules"]]

    assert len(schedules()) == 1
    # When its approval comes
    receipt = app.signal(operation_id, "approval", APPROVED, signal_id="a-1")
    # Then it is woken now, and its timeout's schedule is gone: it will not fire three days later
    assert (receipt.answer, receipt.woke) == (SignalAnswer.ACCEPTED, True)
    assert schedules() == []
    assert deliver(app, operation_id, message_id="m-2").outcome is Outcome.SUCCEEDED
    assert effects == ["ask", "credit by op-7"]


def test_a_signal_is_kept_as_one_item_beside_the_operations_markers_its_payload_compact_json(app, clock):
    # Given an operation, When its approval comes with its fields in any order
    operation_id = enqueue(app)
    app.signals.send(
        SignalSubmission(operation_id, "approval", {"operator_id": "op-7", "decision": "approved"}, "a-1", "cli:alice")
    )
    # Then the markers table holds one item for the wait, in the operation's partition, its payload compact and sorted
    items = boto3.client("dynamodb").scan(TableName=app.settings.markers_table)["Items"]
    assert items == [
        {
            "pk": {"S": f"operation#{operation_id}"},
            "sk": {"S": "signal#approval"},
            "kind": {"S": "signal"},
            "signal_id": {"S": "a-1"},
            "at": {"S": iso(clock.now())},
            "sent_by": {"S": "cli:alice"},
            "payload": {"S": '{"decision":"approved","operator_id":"op-7"}'},
        }
    ]
    # And it reads back whole: the signal of that operation's wait, as it was sent
    assert app.operations.signals.get(operation_id, "approval") == SignalRecord(
        operation_id,
        "approval",
        SignalKind.SIGNAL,
        "a-1",
        iso(clock.now()),
        "cli:alice",
        {"decision": "approved", "operator_id": "op-7"},
    )


def test_the_run_reads_its_waits_signal_once_strongly_consistent(app):
    # Given an operation whose approval came before it ran
    operation_id = enqueue(app)
    app.signal(operation_id, "approval", APPROVED, signal_id="a-1")
    calls = sent(app.clients.dynamodb)
    # When it runs to its wait
    assert deliver(app, operation_id).outcome is Outcome.SUCCEEDED
    # Then it read the wait's item once, by its key, asking for the latest write (a signal just kept is seen)
    reads = [
        params for name, params in calls if name == "GetItem" and params["TableName"] == app.settings.markers_table
    ]
    assert [(read["Key"], read.get("ConsistentRead")) for read in reads] == [
        ({"pk": {"S": f"operation#{operation_id}"}, "sk": {"S": "signal#approval"}}, True)
    ]


def test_a_signals_derived_id_depends_on_its_name_and_content_only_never_on_the_order_of_its_fields(app):
    # Given an operation
    operation_id = enqueue(app)
    # When its approval is sent without an id, then again with its fields in another order
    first = app.signal(operation_id, "approval", {"decision": "approved", "operator_id": "op-7"})
    again = app.signal(operation_id, "approval", {"operator_id": "op-7", "decision": "approved"})
    # Then both are the one signal, under the id every version of converge derives for it (so a call retried
    # across a deployment is one signal too)
    assert (first.answer, again.answer) == (SignalAnswer.ACCEPTED, SignalAnswer.DUPLICATE)
    assert first.signal_id == again.signal_id == "sig-2c7058b48be55894e9d8fb84ff805a3a"


def test_a_woken_wait_whose_request_was_deleted_is_listed_unrunnable_not_sent(app, effects):
    # Given an operation waiting, whose request its producer deleted from the jobs table meanwhile
    operation_id = enqueue(app)
    deliver(app, operation_id)
    boto3.client("dynamodb").delete_item(TableName=app.settings.jobs_table, Key={"operation_id": {"S": operation_id}})
    before = queued(app)
    # When its approval comes
    receipt = app.signal(operation_id, "approval", APPROVED, signal_id="a-1")
    # Then the signal is kept and the wait brought forward, but nothing is sent: it is listed under STUCK, unrunnable
    assert receipt.answer is SignalAnswer.ACCEPTED
    assert queued(app) == before
    record = app.operations.require(operation_id).state_record
    assert (record.state, record.stuck_kind, record.stuck_reason) == (
        OperationState.SCHEDULED,
        "unrunnable",
        f"nothing safe to dispatch for {operation_id}: the request is not in the jobs table",
    )


def test_a_converge_without_the_markers_table_refuses_a_signal_naming_the_setting(settings, clock, effects):
    # Given a deployment configured without its markers table
    app = approving(settings.model_copy(update={"markers_table": ""}), clock, effects)
    # When a signal is sent, Then it is refused, naming what is missing
    with pytest.raises(ConfigurationError) as refused:
        app.signal("op-1", "approval", APPROVED, signal_id="a-1")
    assert str(refused.value) == "signals need the markers table (MARKERS_TABLE)"


def test_each_wait_records_on_its_marker_what_resumed_it_and_says_so_while_it_waits(settings, clock, effects):
    # Given two operations waiting for their approval
    app = approving(settings, clock, effects)
    approved, lapsed = enqueue(app), enqueue(app)
    deliver(app, approved)
    deliver(app, lapsed)
    # Then while each waits, its wait's step says what it waits for
    waiting = app.operations.require(approved, steps=True).to_json()["steps"][-1]
    assert (waiting["name"], waiting["state"], waiting["note"]) == ("approval", "claimed", "waiting for its signal")
    # When one is approved, and the other's timeout comes
    app.signal(approved, "approval", APPROVED, signal_id="a-1")
    deliver(app, approved, message_id="m-2")
    clock.advance(TIMEOUT)
    deliver(app, lapsed, message_id="m-2")
    # Then each wait's marker records what resumed it, as the receipt shows it: the signal by its id, or the timeout
    recorded = {
        operation_id: app.operations.markers.steps(operation_id)["approval"].result
        for operation_id in (approved, lapsed)
    }
    assert recorded == {
        approved: {"timed_out": False, "signal_id": "a-1"},
        lapsed: {"timed_out": True, "signal_id": None},
    }


def test_a_takeover_that_finds_the_wait_recorded_as_it_claims_it_waits_until_the_recorded_time(
    app, effects, clock, monkeypatch
):
    # Given a delivery that recorded its wait for the approval (until its timeout), then died before its state did
    operation_id = enqueue(app)
    until = clock.now() + TIMEOUT
    real_claim = app.operations.markers.claim_step

    def claim_then_die(*args: Any, **kwargs: Any) -> Any:
        held = real_claim(*args, **kwargs)
        if args[1] == "approval":
            raise Crash("died after recording the wait")
        return held

    monkeypatch.setattr(app.operations.markers, "claim_step", claim_then_die)
    with pytest.raises(Crash):
        deliver(app, operation_id)
    monkeypatch.setattr(app.operations.markers, "claim_step", real_claim)
    # When a takeover a minute later read the markers before that wait was recorded (a race: it finds the wait's
    # marker already there when it claims it)
    clock.advance(60)
    real_read = app.operations.markers.steps
    monkeypatch.setattr(
        app.operations.markers,
        "steps",
        lambda operation: {name: step for name, step in real_read(operation).items() if name != "approval"},
    )
    result = deliver(app, operation_id, message_id="m-2", attempt=2)
    # Then it waits until the time the wait recorded, not its own timeout counted from a minute later
    assert result.outcome is Outcome.WAITING
    assert app.operations.require(operation_id).state_record.run_at == pytest.approx(until, abs=0.01)


def test_steps_built_without_the_signal_store_refuse_a_wait_for_a_signal_naming_the_setting(app, clock):
    # Given a delivery's steps built with the markers table but no signal store (as a pipeline built by hand may be)
    steps = Steps(app.operations.markers, "op-1", "owner-1", True, Policy.EFFECT_THEN_CLAIM, clock)
    # When its run waits for a signal, Then it is refused, naming what is missing, and nothing is recorded
    with pytest.raises(ConfigurationError) as refused:
        steps.wait_for("approval", clock.now() + TIMEOUT)
    assert str(refused.value) == "a wait for a signal needs the markers table (MARKERS_TABLE)"
    assert steps.ran == () and app.operations.markers.steps("op-1") == {}
