"""A converge on moto with the template's queues and DLQs, a recording catalogue, and DLQ helpers."""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import boto3
import pytest
from moto.core import DEFAULT_ACCOUNT_ID
from moto.sqs.models import sqs_backends

from converge.flow.pipeline import Delivery
from converge.flow.registry import JobBinding, Policy, Queue, Registry
from converge.model.clock import FakeClock, SequentialIds
from converge.model.envelope import Envelope
from converge.model.records import Operation
from converge.model.states import OperationState
from converge.operate.deadletters import DlqUrls
from converge.operate.redrive import Redrive
from converge.runtime import Converge
from converge.runtime.clients import Clients
from converge.runtime.settings import Settings
from converge.screening.identifiers import Identifier
from converge.screening.message import JobMessage
from tests.conftest import drive_to

PREFIX = "/converge/test/toggles"
REGION = "us-east-1"
QUEUES = {
    Queue.CRITICAL: ("CriticalQueue", "CriticalDlq"),
    Queue.DEFAULT: ("DefaultQueue", "DefaultDlq"),
    Queue.BULK: ("BulkQueue", "BulkDlq"),
}


class Notice(JobMessage):
    user_id: Identifier


@dataclass
class Effects:
    done: list[str] = field(default_factory=list)


class NoticeRunner:
    def __init__(self, effects: Effects) -> None:
        self.effects = effects

    def load(self, message: Notice, ctx: Any) -> str:
        return message.user_id

    def run(self, message: Notice, loaded: Any, ctx: Any) -> None:
        self.effects.done.append(ctx.operation_id)


def ops_registry(effects: Effects) -> Registry:
    registry = Registry()
    for job_type, queue, enabled in [
        ("mail.notice.v1", Queue.CRITICAL, True),
        ("money.credit.v1", Queue.CRITICAL, False),
        ("files.copy.v1", Queue.DEFAULT, True),
    ]:
        registry.register(
            JobBinding(
                job_type=job_type,
                message=Notice,
                runner=lambda: NoticeRunner(effects),
                queue=queue,
                policy=Policy.EFFECT_THEN_CLAIM,
                default_enabled=enabled,
                max_attempts=3,
            )
        )
    return registry


@pytest.fixture
def queues(aws: None, template: dict[str, Any]) -> dict[Queue, tuple[str, str]]:
    """(source queue URL, DLQ URL) per queue, with the RedrivePolicy the template declares."""
    sqs = boto3.client("sqs", region_name=REGION)
    urls = {}
    for queue, (source_id, dlq_id) in QUEUES.items():
        dlq = sqs.create_queue(QueueName=f"test-{dlq_id}")["QueueUrl"]
        dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        properties = template["Resources"][source_id]["Properties"]
        max_receive = template["Parameters"][properties["RedrivePolicy"]["maxReceiveCount"]["Ref"]]["Default"]
        source = sqs.create_queue(
            QueueName=f"test-{source_id}",
            Attributes={
                "VisibilityTimeout": str(properties["VisibilityTimeout"]),
                "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": max_receive}),
            },
        )["QueueUrl"]
        urls[queue] = (source, dlq)
    return urls


@pytest.fixture
def effects() -> Effects:
    return Effects()


@pytest.fixture
def clock() -> FakeClock:
    # Real "now", so ages measured against SQS's SentTimestamp make sense; it moves only when told to.
    return FakeClock(start=time.time())


@pytest.fixture
def app(tables: dict[str, str], queues: dict[Queue, tuple[str, str]], effects: Effects, clock: FakeClock) -> Converge:
    settings = Settings(
        CONVERGE_STAGE="test",
        JOBS_TABLE=tables["jobs"],
        MARKERS_TABLE=tables["markers"],
        STATE_TABLE=tables["state"],
        TOGGLE_PREFIX=PREFIX,
        CONVERGE_CATALOGUE=None,
        CRITICAL_QUEUE_URL=queues[Queue.CRITICAL][0],
        DEFAULT_QUEUE_URL=queues[Queue.DEFAULT][0],
        BULK_QUEUE_URL=queues[Queue.BULK][0],
        CONVERGE_TOGGLE_MAX_AGE=0,
    )
    clients = Clients(dynamodb=boto3.client("dynamodb"), sqs=boto3.client("sqs"), ssm=boto3.client("ssm"))
    return Converge(settings, ops_registry(effects), clients, clock, SequentialIds("attempt"))


@dataclass
class Sleeps:
    """The injected sleep: records each wait and moves the fake clock instead of sleeping."""

    clock: FakeClock
    waits: list[float] = field(default_factory=list)

    def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.clock.advance(seconds)


@pytest.fixture
def sleeps(clock: FakeClock) -> Sleeps:
    return Sleeps(clock)


@pytest.fixture
def dlq_urls(queues: dict[Queue, tuple[str, str]]) -> DlqUrls:
    return DlqUrls.model_validate({f"{queue.value.upper()}_DLQ_URL": urls[1] for queue, urls in queues.items()})


@pytest.fixture
def redrive(app: Converge, dlq_urls: DlqUrls, sleeps: Sleeps) -> Redrive:
    return app.redrive(dlq_urls, sleep=sleeps)


def set_toggle(name: str, value: str) -> None:
    boto3.client("ssm").put_parameter(Name=f"{PREFIX}/{name}", Value=value, Type="String", Overwrite=True)


def operation_in(
    app: Converge, operation_id: str, state: OperationState, job_type: str = "mail.notice.v1"
) -> Operation:
    """Admit an operation and move it to `state` (as the pipeline would have, with a reason)."""
    operation = app.enqueue(job_type, operation_id, {"user_id": f"u-{operation_id}"}, f"corr-{operation_id}").operation
    return drive_to(app.operations, operation, state, attempts=3)


def body_of(operation: Operation) -> str:
    return Envelope(
        operation_id=operation.operation_id,
        job_type=operation.job_type,
        payload=operation.payload,
        correlation_id=operation.correlation_id,
    ).to_body()


def dead_letter(
    queue_url: str, operation: Operation, error_class: str | None = "ProviderDown", **extra: str
) -> dict[str, Any]:
    """Put an operation's message on a DLQ as the worker does (error_class set) or SQS does (None)."""
    attributes = {
        "job_type": {"DataType": "String", "StringValue": operation.job_type},
        "operation_id": {"DataType": "String", "StringValue": operation.operation_id},
    }
    if error_class is not None:
        attributes |= {
            "error_class": {"DataType": "String", "StringValue": error_class},
            "error_reason": {"DataType": "String", "StringValue": "the provider said no"},
            "outcome": {"DataType": "String", "StringValue": "failed"},
            "failed_at": {"DataType": "String", "StringValue": "2026-01-01T00:00:00.000Z"},
            "source_queue": {"DataType": "String", "StringValue": "critical"},
        }
    for name, value in extra.items():
        attributes[name] = {"DataType": "Number" if value.isdigit() else "String", "StringValue": value}
    boto3.client("sqs").send_message(QueueUrl=queue_url, MessageBody=body_of(operation), MessageAttributes=attributes)
    return attributes


def messages(queue_url: str, hide: int = 0) -> list[dict[str, Any]]:
    """Every visible message of a queue; hide=0 leaves them visible for the next look."""
    sqs = boto3.client("sqs")
    found: dict[str, dict[str, Any]] = {}
    while True:
        batch = sqs.receive_message(
            QueueUrl=queue_url,
            MaxNumberOfMessages=10,
            VisibilityTimeout=max(hide, 1),
            MessageAttributeNames=["All"],
            AttributeNames=["All"],
        ).get("Messages", [])
        fresh = [message for message in batch if message["MessageId"] not in found]
        if not fresh:
            break
        found |= {message["MessageId"]: message for message in fresh}
    if hide == 0 and found:
        entries = [
            {"Id": str(n), "ReceiptHandle": m["ReceiptHandle"], "VisibilityTimeout": 0}
            for n, m in enumerate(found.values())
        ]
        for start in range(0, len(entries), 10):
            sqs.change_message_visibility_batch(QueueUrl=queue_url, Entries=entries[start : start + 10])
    return list(found.values())


def depth(queue_url: str) -> int:
    """Every message in the queue, visible or not."""
    attributes = boto3.client("sqs").get_queue_attributes(
        QueueUrl=queue_url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"]) + int(attributes["ApproximateNumberOfMessagesNotVisible"])


def pass_time(seconds: float) -> None:
    """Age every moto message by `seconds`, so hidden ones come back without sleeping."""
    for queue in sqs_backends[DEFAULT_ACCOUNT_ID][REGION].queues.values():
        for message in queue._messages:
            message.visible_at -= seconds * 1000
            if message.sent_timestamp is not None:
                message.sent_timestamp = int(message.sent_timestamp - seconds * 1000)


def work_off(app: Converge, queue_url: str) -> list[str]:
    """Run every message on a source queue through the pipeline, as the worker would; the outcomes."""
    sqs = boto3.client("sqs")
    outcomes = []
    for message in messages(queue_url, hide=30):
        result = app.pipeline.process(message["Body"], Delivery(message["MessageId"], 1, 5, lambda: 30_000))
        outcomes.append(result.outcome.value)
        if result.outcome.acknowledged:
            sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
    return outcomes


def new_id() -> str:
    return f"op-{uuid.uuid4().hex[:8]}"
