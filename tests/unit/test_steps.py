"""Steps: a job with three effects, each run once under its own policy, at every crash point.

The job renders a document (keyed_effect), charges a card (claim_then_effect, with a provider that
deduplicates by the step's key and may be asked by it) and e-mails a link (effect_then_claim). A crash is
the worker's process dying (a BaseException the pipeline does not catch): nothing is given back, and the
next delivery comes after the lease expires. Effects are counted in the fake world, DynamoDB calls on the
client as botocore sends them.
"""

from __future__ import annotations

import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import boto3
import pytest

from converge.flow.registry import JobBinding, Policy, Queue, Registry
from converge.flow.runner import Confirmation, JobContext
from converge.model.clock import SequentialIds
from converge.model.outcomes import Outcome
from converge.model.records import StepState
from converge.model.states import OperationState
from converge.runtime import Converge
from converge.runtime.clients import Clients

from .conftest import Notice, body_of, deliver, sent, tables_called


class Crash(BaseException):
    """The worker's process dies here (the pipeline catches Exception, never this)."""


@dataclass
class World:
    """The three providers' side: what each step did, by its key, and where the next delivery crashes."""

    effects: list[str] = field(default_factory=list)
    charged: Counter[str] = field(default_factory=Counter)
    crash: set[str] = field(default_factory=set)
    """One-shot crash points: "before:<step>", "after:<step>" (effect made, marker not), "between:<a>:<b>"."""
    lookup: bool = True
    lose_response: bool = False
    result: dict[str, Any] = field(default_factory=dict)

    def hit(self, point: str) -> None:
        if point in self.crash:
            self.crash.discard(point)
            raise Crash(point)


class ThreeSteps:
    def __init__(self, world: World) -> None:
        self.world = world

    def load(self, message: Notice, ctx: JobContext) -> str:
        return "ready"

    def run(self, message: Notice, loaded: str, ctx: JobContext) -> None:
        document = ctx.step("render", self.render, policy="keyed_effect")
        self.world.hit("between:render:charge")
        charge = ctx.step("charge", self.charge, policy="claim_then_effect", confirm=self.confirm)
        self.world.hit("between:charge:mail")
        ctx.step("mail", lambda key: self.mail(key, document["document"], charge))

    def render(self, key: str) -> dict[str, Any]:
        self.world.hit("before:render")
        self.world.effects.append("render")
        self.world.hit("after:render")
        return {"document": f"doc-{key.split(':')[0]}", **self.world.result}

    def charge(self, key: str) -> str:
        self.world.hit("before:charge")
        self.world.effects.append("charge")
        self.world.charged[key] += 1
        self.world.hit("after:charge")
        if self.world.lose_response:
            self.world.lose_response = False
            raise TimeoutError("the provider's answer was lost")
        return f"ch-{self.world.charged[key]}"

    def confirm(self, key: str) -> Confirmation:
        self.world.effects.append("confirm")
        if not self.world.lookup:
            return Confirmation.UNKNOWABLE
        return Confirmation.APPLIED if self.world.charged[key] else Confirmation.NOT_APPLIED

    def mail(self, key: str, document: str, charge: Any) -> dict[str, str]:
        self.world.hit("before:mail")
        self.world.effects.append("mail")
        self.world.hit("after:mail")
        return {"message": f"msg-{document}"}


class OneEffect:
    def __init__(self, world: World) -> None:
        self.world = world

    def load(self, message: Notice, ctx: JobContext) -> str:
        return "ready"

    def run(self, message: Notice, loaded: str, ctx: JobContext) -> None:
        self.world.effects.append("single")


@pytest.fixture
def world() -> World:
    return World()


@pytest.fixture
def app(settings, world, clock) -> Converge:
    registry = Registry(
        [
            JobBinding("cv.publish.v1", Notice, lambda: ThreeSteps(world), Queue.DEFAULT, Policy.EFFECT_THEN_CLAIM),
            JobBinding("mail.single.v1", Notice, lambda: OneEffect(world), Queue.DEFAULT, Policy.EFFECT_THEN_CLAIM),
        ]
    )
    dynamodb = boto3.client("dynamodb")
    clients = Clients(dynamodb=dynamodb, sqs=boto3.client("sqs"), ssm=boto3.client("ssm"))
    return Converge(settings, registry=registry, clients=clients, clock=clock, ids=SequentialIds("attempt"))


def enqueue(app: Converge, job_type: str = "cv.publish.v1") -> str:
    operation_id = f"op-{uuid.uuid4().hex[:8]}"
    app.enqueue(job_type, operation_id, {"user_id": str(uuid.uuid4())})
    return operation_id


def crashed(app: Converge, operation_id: str, attempt: int = 1) -> None:
    with pytest.raises(Crash):
        deliver(app, operation_id, attempt=attempt)


def after_the_lease(app: Converge, clock, operation_id: str, attempt: int) -> Any:
    """The next delivery, once the dead worker's lease has expired."""
    clock.advance(60)
    return deliver(app, operation_id, attempt=attempt)


def steps_of(app: Converge, operation_id: str) -> dict[str, tuple[str, Any]]:
    operation = app.operations.require(operation_id, steps=True)
    return {step.name: (step.state.value, step.result) for step in operation.steps or ()}


# -- the happy path ---------------------------------------------------------------------------------------------


def test_three_steps_on_a_first_delivery_read_nothing_and_write_one_marker_each(app, world, tables):
    # Given a job of three steps, delivered for the first time
    operation_id = enqueue(app)
    body = body_of(app, operation_id)
    calls = sent(app.clients.dynamodb)
    # When it runs
    result = deliver(app, operation_id, body=body)
    # Then each effect happened once, in order, and the operation succeeded
    assert result.outcome is Outcome.SUCCEEDED
    assert world.effects == ["render", "charge", "mail"]
    # And DynamoDB saw the lease, one marker per step (two for claim_then_effect: its claim, then its result),
    # and the terminal write: no read at all
    assert Counter(tables_called(calls)) == {
        ("UpdateItem", tables["state"]): 2,
        ("PutItem", tables["markers"]): 4,
    }
    # And the receipt lists each step with its policy and result
    operation_json = app.operations.require(operation_id, steps=True).to_json()
    listed = [(s["name"], s["policy"], s["state"], s["result"]) for s in operation_json["steps"]]
    assert listed == [
        ("render", "keyed_effect", "done", {"document": f"doc-{operation_id}"}),
        ("charge", "claim_then_effect", "done", "ch-1"),
        ("mail", "effect_then_claim", "done", {"message": f"msg-doc-{operation_id}"}),
    ]


def test_a_job_with_one_effect_and_no_steps_touches_no_marker(app, world, tables):
    # Given a plain job that calls no step
    operation_id = enqueue(app, "mail.single.v1")
    body = body_of(app, operation_id)
    calls = sent(app.clients.dynamodb)
    # When it runs
    assert deliver(app, operation_id, body=body).outcome is Outcome.SUCCEEDED
    # Then it is exactly as before steps: the lease and the terminal write, nothing on the markers table
    assert tables_called(calls) == [("UpdateItem", tables["state"]), ("UpdateItem", tables["state"])]
    assert app.operations.require(operation_id, steps=True).to_json()["steps"] == []


def test_the_receipt_of_an_operation_no_delivery_started_reads_no_marker(app, tables):
    # Given an operation admitted, never delivered
    operation_id = enqueue(app)
    calls = sent(app.clients.dynamodb)
    # When an operator reads its receipt with its steps / Then it has none, and the markers table was read once:
    # for its signals (one may be kept before any delivery, `ctx.wait_for`), never for its steps
    assert app.operations.require(operation_id, steps=True).to_json()["steps"] == []
    markers = tables["markers"]
    queries = [params for operation, params in calls if operation == "Query" and params["TableName"] == markers]
    assert [params["ExpressionAttributeValues"][":prefix"] for params in queries] == [{"S": "signal#"}]


# -- crash points -----------------------------------------------------------------------------------------------


def test_a_crash_between_two_steps_reruns_nothing_already_claimed(app, world, clock, tables):
    # Given a delivery that dies after rendering, before charging
    operation_id = enqueue(app)
    world.crash.add("between:render:charge")
    crashed(app, operation_id)
    assert world.effects == ["render"]
    # When the message comes back after the lease expired
    body = body_of(app, operation_id)
    calls = sent(app.clients.dynamodb)
    clock.advance(60)
    result = deliver(app, operation_id, attempt=2, body=body)
    # Then the render is not made again (its recorded result feeds the e-mail), the rest runs once
    assert result.outcome is Outcome.SUCCEEDED
    assert world.effects == ["render", "charge", "mail"]
    # And the retry read the operation's markers with one Query, and nothing else
    reads = [call for call in tables_called(calls) if call[0] in ("Query", "GetItem", "Scan")]
    assert reads == [("Query", tables["markers"])]
    assert steps_of(app, operation_id)["mail"] == ("done", {"message": f"msg-doc-{operation_id}"})


def test_a_crash_before_a_claimed_steps_effect_asks_the_provider_then_runs_it_once(app, world, clock):
    # Given a delivery that dies after claiming the charge, before calling the provider
    operation_id = enqueue(app)
    world.crash.add("before:charge")
    crashed(app, operation_id)
    assert steps_of(app, operation_id)["charge"] == ("claimed", None)
    # When the message comes back
    result = after_the_lease(app, clock, operation_id, attempt=2)
    # Then the provider is asked by the step's key, says it was not applied, and the charge is made once
    assert result.outcome is Outcome.SUCCEEDED
    assert world.effects == ["render", "confirm", "charge", "mail"]
    assert world.charged == {f"{operation_id}:charge": 1}


def test_a_crash_between_a_claimed_steps_effect_and_its_marker_is_confirmed_never_repeated(app, world, clock):
    # Given a delivery that dies after the provider charged, before the step was recorded done
    operation_id = enqueue(app)
    world.crash.add("after:charge")
    crashed(app, operation_id)
    # When the message comes back
    result = after_the_lease(app, clock, operation_id, attempt=2)
    # Then the provider confirms the charge: it is not made again, and the e-mail goes once
    assert result.outcome is Outcome.SUCCEEDED
    assert world.charged == {f"{operation_id}:charge": 1}
    assert world.effects == ["render", "charge", "confirm", "mail"]
    assert steps_of(app, operation_id)["charge"] == ("done", None)


def test_a_crash_between_an_effect_then_claim_steps_effect_and_its_marker_repeats_that_step_alone(app, world, clock):
    # Given a delivery that dies after sending the e-mail, before its marker
    operation_id = enqueue(app)
    world.crash.add("after:mail")
    crashed(app, operation_id)
    # When the message comes back
    result = after_the_lease(app, clock, operation_id, attempt=2)
    # Then that step's effect is made again (duplicates over loss, this step only), no earlier one
    assert result.outcome is Outcome.SUCCEEDED
    assert world.effects == ["render", "charge", "mail", "mail"]
    assert world.charged == {f"{operation_id}:charge": 1}


def test_a_crash_between_a_keyed_steps_effect_and_its_marker_writes_the_same_object_again(app, world, clock):
    # Given a delivery that dies after writing the document, before its marker
    operation_id = enqueue(app)
    world.crash.add("after:render")
    crashed(app, operation_id)
    # When the message comes back
    assert after_the_lease(app, clock, operation_id, attempt=2).outcome is Outcome.SUCCEEDED
    # Then the keyed write is made again (the same key: the same object), then the rest once each
    assert world.effects == ["render", "render", "charge", "mail"]
    assert steps_of(app, operation_id)["render"] == ("done", {"document": f"doc-{operation_id}"})


def test_an_ambiguous_answer_is_settled_by_the_steps_confirm_in_the_same_delivery(app, world):
    # Given a provider that charges and then loses its answer
    operation_id = enqueue(app)
    world.lose_response = True
    # When the job runs
    result = deliver(app, operation_id)
    # Then the step asks the provider by its key, learns it was applied, and the job carries on
    assert result.outcome is Outcome.SUCCEEDED
    assert world.effects == ["render", "charge", "confirm", "mail"]
    assert world.charged == {f"{operation_id}:charge": 1}


# -- UNKNOWN names the step, and the operator's resolve applies to it -------------------------------------------


def unknown_at_the_charge(app: Converge, world: World, clock) -> str:
    operation_id = enqueue(app)
    world.crash.add("after:charge")
    crashed(app, operation_id)
    world.lookup = False
    result = after_the_lease(app, clock, operation_id, attempt=2)
    assert result.outcome is Outcome.UNKNOWN
    return operation_id


def test_a_claim_the_provider_cannot_confirm_makes_the_operation_unknown_naming_the_step(app, world, clock):
    # Given a charge claimed by a delivery that died, and a provider that cannot be asked
    operation_id = unknown_at_the_charge(app, world, clock)
    # Then the operation is UNKNOWN, its reason names the step, and nothing after it ran
    operation = app.operations.require(operation_id, steps=True)
    assert operation.state is OperationState.UNKNOWN
    assert "step 'charge'" in (operation.last_error or "")
    assert operation.pending_step is not None and operation.pending_step.name == "charge"
    assert "mail" not in world.effects


def test_resolving_the_step_as_succeeded_carries_on_after_it(app, world, clock):
    # Given an operation UNKNOWN at its charge
    operation_id = unknown_at_the_charge(app, world, clock)
    # When the operator establishes the charge happened
    done = app.operator("cli:alice").resolve(operation_id, "succeeded", "the ledger shows it")
    # Then the step is recorded done (by whom, why) and the operation is sent again
    assert done.applied and done.after == OperationState.ACCEPTED.value
    assert "step 'charge' resolved as succeeded" in done.message
    assert steps_of(app, operation_id)["charge"][0] == StepState.DONE.value
    # And its next delivery charges nothing and sends the e-mail once
    assert deliver(app, operation_id, attempt=3).outcome is Outcome.SUCCEEDED
    assert world.charged == {f"{operation_id}:charge": 1}
    assert world.effects.count("mail") == 1


def test_resolving_the_step_as_retry_runs_it_again_with_the_same_key(app, world, clock):
    # Given an operation UNKNOWN at its charge, which in truth never reached the provider
    operation_id = enqueue(app)
    world.crash.add("before:charge")
    crashed(app, operation_id)
    world.lookup = False
    assert after_the_lease(app, clock, operation_id, attempt=2).outcome is Outcome.UNKNOWN
    # When the operator establishes it did not happen
    done = app.operator("cli:alice").resolve(operation_id, "retry", "not in the ledger")
    assert done.applied
    # Then the next delivery charges once, with the step's key, then e-mails
    assert deliver(app, operation_id, attempt=3).outcome is Outcome.SUCCEEDED
    assert world.charged == {f"{operation_id}:charge": 1}
    assert world.effects.count("render") == 1 and world.effects.count("mail") == 1


def test_resolving_the_step_as_failed_fails_the_operation_and_runs_nothing_after(app, world, clock):
    # Given an operation UNKNOWN at its charge
    operation_id = unknown_at_the_charge(app, world, clock)
    # When the operator establishes it failed
    done = app.operator("cli:alice").resolve(operation_id, "failed", "declined")
    # Then the step and the operation are FAILED, and the receipt says which step
    assert done.applied and done.after == OperationState.FAILED.value
    operation = app.operations.require(operation_id, steps=True)
    assert "step 'charge' resolved as failed by cli:alice" in (operation.last_error or "")
    assert steps_of(app, operation_id)["charge"][0] == StepState.FAILED.value
    assert "mail" not in world.effects


# -- results are identifiers, screened -----------------------------------------------------------------------------


def test_a_step_result_that_looks_personal_is_not_recorded_and_fails_the_operation_visibly(app, world):
    # Given a render step whose result carries an e-mail address
    operation_id = enqueue(app)
    world.result = {"to": "alice@example.com"}
    # When the job runs
    result = deliver(app, operation_id)
    # Then the operation fails, naming the step; the effect is claimed (never made again), its result not kept
    assert result.outcome is Outcome.FAILED
    assert "step 'render'" in result.reason and "e-mail" in result.reason
    assert steps_of(app, operation_id) == {"render": ("done", None)}
    assert world.effects == ["render"]


@pytest.mark.parametrize(
    ("name", "policy", "problem"),
    [
        ("Bad Name", "effect_then_claim", "step name"),
        ("ok", "recurring", "is not one of"),
        ("ok", "claim_then_effect", "needs confirm"),
    ],
)
def test_a_misdeclared_step_is_refused_before_any_effect(app, world, name, policy, problem):
    # Given a step declared wrongly
    from converge.flow.steps import Steps

    steps = Steps(app.operations.markers, "op-x", "owner", True, Policy.EFFECT_THEN_CLAIM, app.clock)
    # When it is run, Then it is refused with the reason, and its effect never ran
    with pytest.raises(Exception, match=problem):
        steps.run(name, lambda key: world.effects.append("x"), policy, None)
    assert world.effects == []
