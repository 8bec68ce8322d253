"""Baseline outbox relay: new outbox items from the table's stream to the jobs queue, ten a call."""

import json
import os
from decimal import Decimal
from typing import Any

import boto3
from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext
from boto3.dynamodb.types import TypeDeserializer

logger = Logger()
metrics = Metrics()
tracer = Tracer()
_deserializer = TypeDeserializer()
_clients: dict[str, Any] = {}


def sqs() -> Any:
    if "sqs" not in _clients:
        _clients["sqs"] = boto3.client("sqs")
    return _clients["sqs"]


def _plain(value: Any) -> Any:
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dict):
        return {key: _plain(inner) for key, inner in value.items()}
    return value


def _message(record: dict[str, Any]) -> str:
    image = {key: _deserializer.deserialize(value) for key, value in record["dynamodb"]["NewImage"].items()}
    return json.dumps(
        {"operation_id": image["id"], "job_type": image["job_type"], "payload": _plain(image.get("payload", {}))},
        separators=(",", ":"),
    )


@logger.inject_lambda_context
@metrics.log_metrics
@tracer.capture_lambda_handler
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    outgoing = [
        (record["dynamodb"]["SequenceNumber"], _message(record))
        for record in event.get("Records", [])
        if record.get("eventName") == "INSERT"
    ]
    failed: list[str] = []
    for start in range(0, len(outgoing), 10):
        chunk = outgoing[start : start + 10]
        entries = [{"Id": str(index), "MessageBody": body} for index, (_, body) in enumerate(chunk)]
        try:
            response = sqs().send_message_batch(QueueUrl=os.environ["QUEUE_URL"], Entries=entries)
        except Exception:
            logger.exception("SendMessageBatch failed; the stream retries the chunk")
            failed += [sequence for sequence, _ in chunk]
            continue
        failed += [chunk[int(entry["Id"])][0] for entry in response.get("Failed", [])]
    metrics.add_metric(name="Relayed", unit=MetricUnit.Count, value=len(outgoing) - len(failed))
    return {"batchItemFailures": [{"itemIdentifier": sequence} for sequence in failed]}
