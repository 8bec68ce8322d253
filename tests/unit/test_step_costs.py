"""What steps, waits and continuations cost, measured: capacity units from moto's state around each call (the
benchmark's meter), for one delivery of each shape. The figures are docs/steps-and-continuations.md's."""

from __future__ import annotations

import uuid
from typing import Any

import boto3
import pytest

from converge.flow.registry import JobBinding, Policy, Queue, Registry, Then
from converge.flow.runner import Confirmation, JobContext
from converge.model.clock import SequentialIds
from converge.model.outcomes import Outcome
from converge.runtime import Converge
from converge.runtime.clients import Clients
from converge_bench.meter import Meter

from .conftest import Notice, body_of, deliver


class Shapes:
    """Three steps (keyed, claim_then_effect, effect_then_claim), a wait, or one effect with a continuation."""

    def __init__(self, shape: str) -> None:
        self.shape = shape

    def load(self, message: Notice, ctx: JobContext) -> str:
        return "ready"

    def run(self, message: Notice, loaded: str, ctx: JobContext) -> None:
        if self.shape == "three-steps":
            stored = ctx.step("store", lambda key: {"object": f"cv/{key}.pdf"}, policy="keyed_effect")
            ctx.step("charge", lambda key: "ch-1", policy="claim_then_effect", confirm=self.confirm)
            ctx.step("mail", lambda key: {"message": f"msg-{stored['object']}"})
        elif self.shape == "wait":
            ctx.step("first", lambda key: None)
            ctx.wait("pause", seconds=600)
            ctx.step("second", lambda key: None)

    def confirm(self, key: str) -> Confirmation:
        return Confirmation.NOT_APPLIED


@pytest.fixture
def app(settings, clock) -> Converge:
    registry = Registry(
        [
            JobBinding(
                "shape.steps.v1", Notice, lambda: Shapes("three-steps"), Queue.CRITICAL, Policy.EFFECT_THEN_CLAIM
            ),
            JobBinding("shape.wait.v1", Notice, lambda: Shapes("wait"), Queue.CRITICAL, Policy.EFFECT_THEN_CLAIM),
            JobBinding("shape.plain.v1", Notice, lambda: Shapes("plain"), Queue.CRITICAL, Policy.EFFECT_THEN_CLAIM),
            JobBinding(
                "shape.chained.v1",
                Notice,
                lambda: Shapes("plain"),
                Queue.CRITICAL,
                Policy.EFFECT_THEN_CLAIM,
                on_success=Then("shape.plain.v1", lambda message: {"user_id": str(message.user_id)}),
            ),
        ]
    )
    clients = Clients(dynamodb=boto3.client("dynamodb"), sqs=boto3.client("sqs"), ssm=boto3.client("ssm"))
    return Converge(settings, registry=registry, clients=clients, clock=clock, ids=SequentialIds("attempt"))


def measured(app: Converge, job_type: str, attempt: int = 1, operation_id: str | None = None) -> tuple[Any, Any]:
    """One delivery's outcome and its DynamoDB units (the message body is read before the meter starts)."""
    if operation_id is None:
        operation_id = f"op-{uuid.uuid4().hex[:8]}"
        app.enqueue(job_type, operation_id, {"user_id": str(uuid.uuid4())})
    body = body_of(app, operation_id)
    meter = Meter()
    with meter.active():
        result = deliver(app, operation_id, attempt=attempt, body=body)
    return result, meter.application


def test_a_plain_job_costs_what_it_did_before_steps(app):
    result, cost = measured(app, "shape.plain.v1")
    assert result.outcome is Outcome.SUCCEEDED
    assert (cost.write_units, cost.read_units) == (2, 0)  # the lease and the terminal write


def test_three_steps_cost_one_write_unit_per_marker_two_for_a_claim_then_effect_step_and_no_read(app):
    result, cost = measured(app, "shape.steps.v1")
    assert result.outcome is Outcome.SUCCEEDED
    # the lease and the terminal write (2), then 1 + 2 + 1 marker writes; nothing read
    assert (cost.write_units, cost.read_units) == (2 + 4, 0)
    assert cost.calls["dynamodb:PutItem"] == 4 and "dynamodb:Query" not in cost.calls


def test_a_retry_reads_the_operations_markers_with_one_query(app, clock):
    # Given an operation whose first delivery died after its first step (its lease expired since)
    operation_id = "op-retried"
    app.enqueue("shape.steps.v1", operation_id, {"user_id": str(uuid.uuid4())})
    app.operations.markers.record_step(operation_id, "store", 1, "keyed_effect", "w-0", {"object": "cv/x.pdf"}, "x")
    from .sqs_deliveries import hold_lease

    hold_lease(app, operation_id, "dead-worker", 1)
    clock.advance(5)
    # When it is delivered again
    result, cost = measured(app, "shape.steps.v1", attempt=2, operation_id=operation_id)
    # Then one strongly consistent Query (1 read unit for a handful of small markers) and the two steps left
    assert result.outcome is Outcome.SUCCEEDED
    assert cost.calls["dynamodb:Query"] == 1 and cost.read_units == 1
    assert cost.calls["dynamodb:PutItem"] == 3


def test_a_continuation_makes_the_terminal_write_a_transaction_of_two_items(app):
    result, cost = measured(app, "shape.chained.v1")
    assert result.outcome is Outcome.SUCCEEDED
    # the lease (1), then one TransactWriteItems: the settle and the next request, 2 units each
    assert (cost.write_units, cost.read_units) == (1 + 4, 0)
    assert cost.calls["dynamodb:TransactWriteItems"] == 1


def test_a_wait_costs_its_marker_and_the_scheduled_write(app):
    result, cost = measured(app, "shape.wait.v1")
    assert result.outcome is Outcome.WAITING
    # the lease (1), the first step's marker (1), the wait's marker (1), the SCHEDULED write (1) and the two
    # sparse indexes that list it with its time (attention, schedule: 1 each); nothing read
    assert cost.read_units == 0
    assert cost.write_units == 6, cost.calls
