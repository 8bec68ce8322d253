"""A converge with batches over moto: a child job whose runner fails or is unknowable on demand, and a callback
job that declares the batch's summary."""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import Any

import boto3
import pytest

from converge.flow.registry import JobBinding, Policy, Queue, Registry
from converge.model.batches import COUNTED, BatchCallback, BatchChild
from converge.model.clock import FakeClock, SequentialIds
from converge.model.errors import OutcomeUnknown, PermanentError
from converge.runtime import Converge
from converge.runtime.clients import Clients
from converge.runtime.settings import Settings
from converge.screening.identifiers import Identifier
from converge.screening.message import JobMessage
from converge.screening.summary import BatchSummary
from tests.conftest import create_table_from_template


class Statement(JobMessage):
    partner_id: Identifier


class Summary(BatchSummary):
    month: Identifier


@dataclass
class Outcomes:
    """What the child runner does, by operation id, and what ran."""

    failing: set[str] = field(default_factory=set)
    unknowable: set[str] = field(default_factory=set)
    waiting: set[str] = field(default_factory=set)
    ran: list[str] = field(default_factory=list)
    callbacks: list[dict[str, Any]] = field(default_factory=list)


class StatementRunner:
    def __init__(self, outcomes: Outcomes) -> None:
        self.outcomes = outcomes

    def load(self, message: Statement, ctx: Any) -> str:
        return "ready"

    def run(self, message: Statement, loaded: str, ctx: Any) -> None:
        if ctx.operation_id in self.outcomes.waiting:
            ctx.wait("cool-off", seconds=600)
        self.outcomes.ran.append(ctx.operation_id)
        if ctx.operation_id in self.outcomes.failing:
            raise PermanentError(f"no address for {message.partner_id}")
        if ctx.operation_id in self.outcomes.unknowable:
            raise OutcomeUnknown("the mail provider timed out after accepting the message")


class SummaryRunner:
    def __init__(self, outcomes: Outcomes) -> None:
        self.outcomes = outcomes

    def load(self, message: Summary, ctx: Any) -> str:
        return "ready"

    def run(self, message: Summary, loaded: str, ctx: Any) -> None:
        self.outcomes.callbacks.append(message.model_dump())


@pytest.fixture
def outcomes() -> Outcomes:
    return Outcomes()


@pytest.fixture
def batches_table(tables: dict[str, str], template: dict[str, Any]) -> str:
    return create_table_from_template(boto3.client("dynamodb"), template, "BatchesTable", "converge-batches")


def batch_bindings(outcomes: Outcomes) -> list[JobBinding]:
    """The child job (mail.statement.v1) and the callback job (mail.statement-summary.v1), both on `outcomes`."""
    return [
        JobBinding(
            "mail.statement.v1", Statement, lambda: StatementRunner(outcomes), Queue.CRITICAL, Policy.EFFECT_THEN_CLAIM
        ),
        JobBinding(
            "mail.statement-summary.v1",
            Summary,
            lambda: SummaryRunner(outcomes),
            Queue.CRITICAL,
            Policy.EFFECT_THEN_CLAIM,
        ),
    ]


@pytest.fixture
def bapp(settings: Settings, batches_table: str, outcomes: Outcomes, clock: FakeClock) -> Converge:
    registry = Registry(batch_bindings(outcomes))
    clients = Clients(dynamodb=boto3.client("dynamodb"), sqs=boto3.client("sqs"), ssm=boto3.client("ssm"))
    with_batches = settings.model_copy(update={"batches_table": batches_table})
    return Converge(with_batches, registry=registry, clients=clients, clock=clock, ids=SequentialIds("attempt"))


def children(count: int, prefix: str = "p") -> list[BatchChild]:
    return [
        BatchChild(f"{prefix}-{index}", "mail.statement.v1", {"partner_id": f"{prefix}-{index}"})
        for index in range(count)
    ]


CALLBACK = BatchCallback("mail.statement-summary.v1", {"month": "2026-11"})


def child_ids(app: Converge, batch_id: str) -> list[str]:
    batches = app.require_batches()
    return list(batches.child_ids(batches.require(batch_id)))


def deliver_all(app: Converge, ids: list[str]) -> list[Any]:
    """Each child delivered once, then the state table's stream given to the batch counter (`counted`)."""
    from .conftest import deliver

    outcomes = [deliver(app, operation_id).outcome for operation_id in ids]
    counted(app)
    return outcomes


_STREAMS: weakref.WeakKeyDictionary[Converge, StateStream] = weakref.WeakKeyDictionary()
"""Each runtime's reader, kept while the runtime lives (keyed by the object, not its id(): a later test's runtime may
be given a collected one's id, and would read its table's stream from where another table's stream stopped)."""


def counted(app: Converge) -> list[dict[str, Any]]:
    """The batch counter given the state table's stream since its last call for this runtime (the records given)."""
    return _STREAMS.setdefault(app, StateStream()).count(app)


def jobs_items(prefix: str) -> list[dict[str, Any]]:
    """Every request in the jobs table whose id begins with `prefix` (a scan: tests only)."""
    client = boto3.client("dynamodb")
    items, start = [], None
    while True:
        page = client.scan(TableName="converge-jobs", **({"ExclusiveStartKey": start} if start else {}))
        items += [item for item in page["Items"] if item["operation_id"]["S"].startswith(prefix)]
        start = page.get("LastEvaluatedKey")
        if not start:
            return items


class StateStream:
    """The state table's stream, read from where the last read stopped, and given to the batch counter as its stream
    mapping would give it (only records whose new state is final, in order)."""

    def __init__(self) -> None:
        self._after: dict[str, str] = {}

    def records(self) -> list[dict[str, Any]]:
        streams = boto3.client("dynamodbstreams")
        arn = boto3.client("dynamodb").describe_table(TableName="converge-state")["Table"]["LatestStreamArn"]
        found: list[dict[str, Any]] = []
        for shard in streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]:
            shard_id = shard["ShardId"]
            after = self._after.get(shard_id)
            position = (
                {"ShardIteratorType": "AFTER_SEQUENCE_NUMBER", "SequenceNumber": after}
                if after
                else {"ShardIteratorType": "TRIM_HORIZON"}
            )
            iterator = streams.get_shard_iterator(StreamArn=arn, ShardId=shard_id, **position)["ShardIterator"]
            while iterator:
                page = streams.get_records(ShardIterator=iterator)
                if not page["Records"]:
                    break
                found += page["Records"]
                self._after[shard_id] = page["Records"][-1]["dynamodb"]["SequenceNumber"]
                iterator = page.get("NextShardIterator")
        final = {state.value for state in COUNTED}
        return [r for r in found if r["dynamodb"].get("NewImage", {}).get("state", {}).get("S") in final]

    def count(self, app: Converge) -> list[dict[str, Any]]:
        """Give the counter what the stream holds since the last call: the records given."""
        records = self.records()
        if records:
            app.batch_counter.handle({"Records": records})
        return records


@pytest.fixture
def state_stream() -> StateStream:
    return StateStream()
