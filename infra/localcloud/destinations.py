"""Failure destinations: the invocation record Lambda sends when it gives up on stream records, and
delivery of a JSON document to an SQS queue or SNS topic named by ARN."""

from __future__ import annotations

import json
import uuid
from typing import Any

from .clients import Clients
from .clock import iso8601_millis


def stream_invocation_record(
    *,
    records: list[dict[str, Any]],
    condition: str,
    function_arn: str,
    stream_arn: str,
    shard_id: str,
    request_id: str | None,
    invocations: int,
    function_error: str | None,
    now: float,
) -> dict[str, Any]:
    """The document Lambda sends to a DynamoDB stream mapping's on-failure destination (metadata only)."""
    first, last = records[0]["dynamodb"], records[-1]["dynamodb"]
    document: dict[str, Any] = {
        "requestContext": {
            "requestId": request_id or str(uuid.uuid4()),
            "functionArn": function_arn,
            "condition": condition,  # RetryAttemptsExhausted | RecordAgeExceeded
            "approximateInvokeCount": invocations,
        },
        "version": "1.0",
        "timestamp": iso8601_millis(now),
        "DDBStreamBatchInfo": {
            "shardId": shard_id,
            "startSequenceNumber": first["SequenceNumber"],
            "endSequenceNumber": last["SequenceNumber"],
            "approximateArrivalOfFirstRecord": iso8601_millis(first["ApproximateCreationDateTime"]),
            "approximateArrivalOfLastRecord": iso8601_millis(last["ApproximateCreationDateTime"]),
            "batchSize": len(records),
            "streamArn": stream_arn,
        },
    }
    if invocations:
        document["responseContext"] = {
            "statusCode": 200,
            "executedVersion": "$LATEST",
            "functionError": "Unhandled" if function_error else "",
        }
    return document


def send_json(clients: Clients, arn: str, document: Any) -> None:
    """Deliver a JSON document to the SQS queue or SNS topic `arn`."""
    service, name = arn.split(":")[2], arn.rsplit(":", 1)[-1]
    if service == "sqs":
        sqs = clients("sqs")
        sqs.send_message(QueueUrl=sqs.get_queue_url(QueueName=name)["QueueUrl"], MessageBody=json.dumps(document))
    elif service == "sns":
        clients("sns").publish(TopicArn=arn, Message=json.dumps(document))
    else:
        raise ValueError(f"unsupported destination {arn}")
