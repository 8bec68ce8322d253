"""Helpers for the local cloud's tests: a recording stand-in handler and queue/table shortcuts."""

from __future__ import annotations

import json
from typing import Any

from localcloud import LocalCloud


class Recorder:
    """A stand-in handler: records each event and answers with what the test scripted."""

    def __init__(self, respond: Any = None) -> None:
        self.events: list[Any] = []
        self.contexts: list[Any] = []
        self._respond = respond

    def __call__(self, event: Any, context: Any) -> Any:
        self.events.append(event)
        self.contexts.append(context)
        return self._respond(event) if callable(self._respond) else self._respond

    @property
    def records(self) -> list[dict[str, Any]]:
        return [record for event in self.events for record in event["Records"]]


def send(cloud: LocalCloud, output: str, *bodies: dict[str, Any]) -> list[str]:
    """Send JSON bodies to the queue named by a stack output; returns the message ids."""
    sqs = cloud.client("sqs")
    return [
        sqs.send_message(QueueUrl=cloud.outputs[output], MessageBody=json.dumps(body))["MessageId"] for body in bodies
    ]


def queue_depth(cloud: LocalCloud, output: str) -> tuple[int, int]:
    """(visible, in flight) messages of the queue named by a stack output."""
    attributes = cloud.client("sqs").get_queue_attributes(
        QueueUrl=cloud.outputs[output],
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"]), int(attributes["ApproximateNumberOfMessagesNotVisible"])


def receive_all(cloud: LocalCloud, output: str) -> list[dict[str, Any]]:
    sqs = cloud.client("sqs")
    messages: list[dict[str, Any]] = []
    while batch := sqs.receive_message(QueueUrl=cloud.outputs[output], MaxNumberOfMessages=10).get("Messages"):
        messages.extend(batch)
    return messages


def put_operation(cloud: LocalCloud, operation_id: str, **attributes: Any) -> None:
    """Write a jobs-table item (string attributes) straight to DynamoDB, as a producer would."""
    item = {"operation_id": {"S": operation_id}, **{k: {"S": str(v)} for k, v in attributes.items()}}
    cloud.client("dynamodb").put_item(TableName=cloud.outputs["JobsTableName"], Item=item)
