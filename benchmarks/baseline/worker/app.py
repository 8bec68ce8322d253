"""Baseline worker: BatchProcessor over the queue, @idempotent_function keyed on the operation id.

The idempotency record (Powertools, DynamoDBPersistenceLayer) keeps a redelivered message from
running the job twice; the job runs its effect, then records the outcome on the entity.
"""

import os
import time
from typing import Any

import boto3
from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.idempotency import (
    DynamoDBPersistenceLayer,
    IdempotencyConfig,
    idempotent_function,
)
from aws_lambda_powertools.utilities.typing import LambdaContext

logger = Logger()
metrics = Metrics()
tracer = Tracer()
processor = BatchProcessor(event_type=EventType.SQS)
persistence = DynamoDBPersistenceLayer(table_name=os.environ["IDEMPOTENCY_TABLE"])
config = IdempotencyConfig(event_key_jmespath="operation_id", raise_on_no_idempotency_key=True)
_clients: dict[str, Any] = {}


def entities() -> Any:
    if "dynamodb" not in _clients:
        _clients["dynamodb"] = boto3.client("dynamodb")
    return _clients["dynamodb"]


def effect(job: dict[str, Any]) -> None:
    """The job's work: nothing, in the benchmark (so that whatever a job costs is the design's)."""


@idempotent_function(data_keyword_argument="job", config=config, persistence_store=persistence)
def run_job(job: dict[str, Any]) -> dict[str, Any]:
    effect(job)
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    entities().update_item(
        TableName=os.environ["ENTITY_TABLE"],
        Key={"id": {"S": job["operation_id"]}},
        UpdateExpression="SET #status = :done, updated_at = :now",
        ConditionExpression="attribute_exists(id)",
        ExpressionAttributeNames={"#status": "status"},
        ExpressionAttributeValues={":done": {"S": "SUCCEEDED"}, ":now": {"S": now}},
    )
    return {"operation_id": job["operation_id"], "status": "SUCCEEDED"}


def record_handler(record: SQSRecord) -> None:
    job = record.json_body
    run_job(job=job)
    logger.info("job done", operation_id=job["operation_id"], job_type=job["job_type"])
    metrics.add_metric(name="Succeeded", unit=MetricUnit.Count, value=1)


@logger.inject_lambda_context
@metrics.log_metrics
@tracer.capture_lambda_handler
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    config.register_lambda_context(context)
    return process_partial_response(event=event, record_handler=record_handler, processor=processor, context=context)
