"""A small fake catalogue whose runners record every call, and a converge wired to moto."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

import converge.flow.pipeline as pipeline_module
import converge.flow.settlement as settlement_module
from converge.flow.pipeline import Delivery
from converge.flow.registry import JobBinding, Policy, Queue, Registry
from converge.flow.runner import Confirmation
from converge.model.clock import FakeClock, SequentialIds
from converge.model.envelope import Envelope
from converge.observability import count as real_count
from converge.runtime import Converge
from converge.runtime.clients import Clients
from converge.runtime.settings import Settings
from converge.screening.message import JobMessage
from converge.store.operations import OperationStore

PREFIX = "/converge/test/toggles"


class Notice(JobMessage):
    user_id: uuid.UUID


@dataclass
class Recorder:
    """What the runners did, in order, and what the markers table held at each effect."""

    calls: list[str] = field(default_factory=list)
    effects: list[str] = field(default_factory=list)
    users: dict[str, str] = field(default_factory=dict)  # user id -> "active" | "done"
    fail_effect: list[BaseException] = field(default_factory=list)
    provider: dict[str, int] = field(default_factory=dict)  # idempotency key -> credits applied
    provider_can_lookup: bool = True
    drop_response: bool = False
    claims_at_effect: list[Any] = field(default_factory=list)


class RecordingRunner:
    def __init__(self, recorder: Recorder, markers: Any = None) -> None:
        self.recorder = recorder
        self.markers = markers

    def load(self, message: Notice, ctx: Any) -> str | None:
        self.recorder.calls.append(f"load:{ctx.operation_id}")
        status = self.recorder.users.get(str(message.user_id), "active")
        return None if status in ("done", "deleted") else status

    def run(self, message: Notice, loaded: Any, ctx: Any) -> None:
        self.recorder.calls.append(f"effect:{ctx.operation_id}")
        if self.markers is not None:
            self.recorder.claims_at_effect.append(self.markers())
        if self.recorder.fail_effect:
            raise self.recorder.fail_effect.pop(0)
        self.recorder.effects.append(ctx.operation_id)


class LedgerRunner(RecordingRunner):
    """A provider with an idempotency key (the operation id) that may be queried by it."""

    def run(self, message: Notice, loaded: Any, ctx: Any) -> None:
        self.recorder.calls.append(f"effect:{ctx.operation_id}")
        if self.markers is not None:
            self.recorder.claims_at_effect.append(self.markers())
        key = ctx.operation_id
        self.recorder.provider[key] = self.recorder.provider.get(key, 0) + 1
        self.recorder.effects.append(key)
        if self.recorder.drop_response:
            self.recorder.drop_response = False
            raise TimeoutError("response lost after the provider applied the credit")

    def confirm(self, message: Notice, ctx: Any) -> Confirmation:
        self.recorder.calls.append(f"confirm:{ctx.operation_id}")
        if not self.recorder.provider_can_lookup:
            return Confirmation.UNKNOWABLE
        return Confirmation.APPLIED if self.recorder.provider.get(ctx.operation_id) else Confirmation.NOT_APPLIED


def fake_registry(recorder: Recorder, markers_view: Any = None) -> Registry:
    registry = Registry()
    for job_type, policy, enabled, runner in [
        ("mail.notice.v1", Policy.EFFECT_THEN_CLAIM, True, RecordingRunner),
        ("files.copy.v1", Policy.KEYED_EFFECT, True, RecordingRunner),
        ("money.credit.v1", Policy.CLAIM_THEN_EFFECT, False, LedgerRunner),
    ]:
        registry.register(
            JobBinding(
                job_type=job_type,
                message=Notice,
                runner=lambda runner=runner: runner(recorder, markers_view),
                queue=Queue.CRITICAL,
                policy=policy,
                default_enabled=enabled,
                max_attempts=3,
            )
        )
    return registry


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def store(tables: dict[str, str], clock: FakeClock) -> OperationStore:
    """The state and jobs tables' store alone, on the test clock (the state table's tests)."""
    return OperationStore(tables["jobs"], tables["state"], boto3.client("dynamodb"), clock=clock)


def state_item(tables: dict[str, str], operation_id: str = "op-1") -> dict[str, Any]:
    """An operation's state record as stored (empty when there is none)."""
    response = boto3.client("dynamodb").get_item(TableName=tables["state"], Key={"operation_id": {"S": operation_id}})
    return response.get("Item", {})


def history(item: dict[str, Any]) -> list[str]:
    """A stored state record's history, one "at STATE reason" line per entry."""
    return [entry["S"] for entry in item["history"]["L"]]


@pytest.fixture
def settings(tables: dict[str, str]) -> Settings:
    sqs = boto3.client("sqs")
    dlq = sqs.create_queue(QueueName="critical-dlq")["QueueUrl"]
    queue = sqs.create_queue(QueueName="critical")["QueueUrl"]
    return Settings(
        CONVERGE_STAGE="test",
        JOBS_TABLE=tables["jobs"],
        MARKERS_TABLE=tables["markers"],
        STATE_TABLE=tables["state"],
        TOGGLE_PREFIX=PREFIX,
        CONVERGE_CATALOGUE=None,
        CRITICAL_QUEUE_URL=queue,
        DEFAULT_QUEUE_URL=queue,
        BULK_QUEUE_URL=queue,
        QUEUE_NAME="critical",
        QUEUE_URL=queue,
        DLQ_URL=dlq,
        MAX_RECEIVE_COUNT=3,
        CONVERGE_TOGGLE_MAX_AGE=0,
    )


@pytest.fixture
def app(settings: Settings, recorder: Recorder, clock: FakeClock, tables: dict[str, str]) -> Converge:
    dynamodb = boto3.client("dynamodb")

    def markers_view() -> dict[str, Any]:
        """At the moment of the effect: the markers and the operation states (is anything claimed yet?)."""
        return {
            "markers": {
                item["pk"]["S"]: item["status"]["S"] for item in dynamodb.scan(TableName=tables["markers"])["Items"]
            },
            "states": {
                item["operation_id"]["S"]: item["state"]["S"]
                for item in dynamodb.scan(TableName=tables["state"])["Items"]
            },
        }

    return Converge(
        settings,
        registry=fake_registry(recorder, markers_view),
        clients=Clients(dynamodb=dynamodb, sqs=boto3.client("sqs"), ssm=boto3.client("ssm")),
        clock=clock,
        ids=SequentialIds("attempt"),
    )


def set_toggle(name: str, value: str) -> None:
    boto3.client("ssm").put_parameter(Name=f"{PREFIX}/{name}", Value=value, Type="String", Overwrite=True)


def body_of(app: Converge, operation_id: str) -> str:
    """An operation's message body, as the relay sends it (from the stored request)."""
    operation = app.operations.require(operation_id)
    return Envelope(
        operation_id=operation.operation_id,
        job_type=operation.job_type,
        payload=operation.payload,
        correlation_id=operation.correlation_id,
    ).to_body()


def deliver(
    app: Converge,
    operation_id: str,
    attempt: int = 1,
    remaining_ms: int = 30_000,
    message_id: str = "m-1",
    body: str | None = None,
):
    """Deliver an operation's message to the pipeline, as the relay would have sent it."""
    body = body if body is not None else body_of(app, operation_id)
    return app.pipeline.process(
        body, Delivery(message_id, attempt, app.settings.max_receive_count, lambda: remaining_ms)
    )


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str | None, int]]:
    """Every count the pipeline and the settlement publish, as (name, job type, value), published as well."""
    seen: list[tuple[str, str | None, int]] = []

    def record(name: str, job_type: str | None = None, value: int = 1) -> None:
        seen.append((name, job_type, value))
        real_count(name, job_type, value)

    monkeypatch.setattr(pipeline_module, "count", record)
    monkeypatch.setattr(settlement_module, "count", record)
    return seen


def throttle(*_: Any, **__: Any) -> None:
    """A state-table call that fails as DynamoDB throttling does."""
    raise ClientError({"Error": {"Code": "ProvisionedThroughputExceededException", "Message": "slow down"}}, "x")


class ClientProxy:
    """A client passed through whole, but for the methods a subclass defines (a service's answer that moto does
    not give: an item left unprocessed, a refusal without its item); `self._client` is the real one."""

    def __init__(self, client: Any) -> None:
        self._client = client

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


class Racing(ClientProxy):
    """The markers table, where another writer's write lands just before this table's first write whose update
    expression begins with `before` (once)."""

    def __init__(self, client: Any, before: str, other: Callable[[], Any]) -> None:
        super().__init__(client)
        self._before, self._other = before, other

    def update_item(self, **request: Any) -> Any:
        if self._other is not None and request["UpdateExpression"].startswith(self._before):
            other, self._other = self._other, None
            other()
        return self._client.update_item(**request)


def sent(client: Any) -> list[tuple[str, dict[str, Any]]]:
    """Every call the client makes from now on: (operation, parameters as botocore sends them)."""
    calls: list[tuple[str, dict[str, Any]]] = []
    client.meta.events.register(
        f"provide-client-params.{client.meta.service_model.service_name}",
        lambda params, model, **_: calls.append((model.name, dict(params))),
    )
    return calls


def tables_called(calls: list[tuple[str, dict[str, Any]]]) -> list[tuple[str, str]]:
    """The calls `sent` saw, as (operation, table)."""
    return [(name, params.get("TableName", "")) for name, params in calls]


from .batch_fixtures import bapp, batches_table, outcomes  # noqa: E402, F401 (fixtures: a converge with batches)
