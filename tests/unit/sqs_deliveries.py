"""Real SQS messages for the rule tests: dispatched by the relay, handled by the worker, and where
each one went afterwards, read back from moto's queues."""

from __future__ import annotations

import random
import time
from typing import Any

import boto3

from localcloud.sqs_time import seconds_until_next_visible

from ..conftest import REGION

QUEUE = "critical"  # the unit tests' queue (tests/unit/conftest.py)


class Context:
    """The Lambda context the worker reads: only the time left matters."""

    function_name = "worker"
    memory_limit_in_mb = 512
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:worker"
    aws_request_id = "req-1"

    def __init__(self, remaining_ms: int = 30_000) -> None:
        self.remaining_ms = remaining_ms

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms


class UpperBound(random.Random):
    """A jitter source that always draws the top of its range, so a backoff's ceiling shows."""

    def uniform(self, a: float, b: float) -> float:
        return b


class LowerBound(random.Random):
    """A jitter source that always draws the bottom of its range (full jitter goes down to zero)."""

    def uniform(self, a: float, b: float) -> float:
        return a


def dispatch(app: Any, operation_id: str) -> None:
    """Carry a stored operation to its queue the way the stream does: its item as the NEW_IMAGE."""
    item = boto3.client("dynamodb").get_item(
        TableName=app.settings.jobs_table, Key={"operation_id": {"S": operation_id}}, ConsistentRead=True
    )["Item"]
    record = {
        "eventName": "INSERT",
        "eventSource": "aws:dynamodb",
        "dynamodb": {
            "Keys": {"operation_id": item["operation_id"]},
            "NewImage": item,
            "SequenceNumber": operation_id,
            "StreamViewType": "NEW_IMAGE",
        },
    }
    assert app.relay.handle({"Records": [record]}) == {"batchItemFailures": []}


def receive(app: Any, queue_url: str | None = None) -> list[dict[str, Any]]:
    response = boto3.client("sqs").receive_message(
        QueueUrl=queue_url or app.settings.queue_url,
        MaxNumberOfMessages=10,
        MessageAttributeNames=["All"],
        AttributeNames=["All"],
    )
    return response.get("Messages", [])


def lambda_event(messages: list[dict[str, Any]], attempt: int | None = None) -> dict[str, Any]:
    """Received messages as the SQS event source hands them to the worker (attempt: its receive count)."""
    records = []
    for message in messages:
        attributes = dict(message["Attributes"])
        if attempt is not None:
            attributes["ApproximateReceiveCount"] = str(attempt)
        records.append(
            {
                "messageId": message["MessageId"],
                "receiptHandle": message["ReceiptHandle"],
                "body": message["Body"],
                "attributes": attributes,
                "messageAttributes": {
                    name: {"stringValue": value["StringValue"], "dataType": value["DataType"]}
                    for name, value in message.get("MessageAttributes", {}).items()
                },
                "md5OfBody": message["MD5OfBody"],
                "eventSource": "aws:sqs",
                "eventSourceARN": f"arn:aws:sqs:{REGION}:123456789012:{QUEUE}",
                "awsRegion": REGION,
            }
        )
    return {"Records": records}


def hidden_for(queue: str = QUEUE) -> float | None:
    """Seconds until the queue's next hidden message shows again (None: nothing is hidden)."""
    return seconds_until_next_visible(REGION, [queue])


class Window:
    """When something happened, as the interval the `with` block took (the machine may be busy)."""

    def __enter__(self) -> Window:
        self.start = time.time()
        return self

    def __exit__(self, *_: object) -> None:
        self.end = time.time()


def assert_shows_again_after(seconds: float, window: Window, queue: str = QUEUE) -> None:
    """The queue's hidden message was hidden for exactly `seconds`, at some moment within `window`."""
    wait, now = hidden_for(queue), time.time()
    assert wait is not None, "nothing is hidden"
    visible_at = now + wait
    assert window.start + seconds - 0.05 <= visible_at <= window.end + seconds + 0.05, (
        f"hidden for {visible_at - window.start:.2f}..{visible_at - window.end:.2f} s, expected {seconds}"
    )


def dead_letters(app: Any) -> list[dict[str, Any]]:
    return receive(app, app.settings.dlq_url)


def hold_lease(app: Any, operation_id: str, owner: str = "another-delivery", seconds: float = 60) -> Any:
    """Another delivery takes the operation's lease on the state table, as a live worker would."""
    from converge.model.records import Lease, Subject

    operation = app.operations.require(operation_id)
    subject = Subject(operation_id, operation.job_type, operation.request.fingerprint)
    lease = app.operations.state.acquire(subject, owner, seconds)
    assert isinstance(lease, Lease), lease
    return lease


def settle_elsewhere(app: Any, operation_id: str, state: Any, reason: str, owner: str = "earlier-delivery") -> None:
    """Another delivery takes the operation and records an outcome, as a finished worker would have."""
    assert app.operations.state.settle(hold_lease(app, operation_id, owner), state, reason) is None
