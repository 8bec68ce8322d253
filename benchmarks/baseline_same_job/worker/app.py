"""Same-job baseline worker: what a team builds with Powertools to do what converge's worker does.

The bare baseline (benchmarks/baseline/worker) runs whatever a message says. This one also validates
the message before anything runs (Powertools' parser: a pydantic model, unknown fields refused) and
reads the job's kill switch before running it (Powertools' parameters, cached 30 s), failing closed:
a switch that is off, missing or unreadable leaves the message on the queue (a batch item failure;
SQS redelivers it later, and after maxReceiveCount to the DLQ). Then, as in the bare baseline:
BatchProcessor over the queue, @idempotent_function keyed on the operation id, the effect, and the
outcome recorded on the entity.
"""

import os
import time
from typing import Annotated, Any, Literal

import boto3
from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities import parameters
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.idempotency import (
    DynamoDBPersistenceLayer,
    IdempotencyConfig,
    idempotent_function,
)
from aws_lambda_powertools.utilities.parser import parse
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import BaseModel, ConfigDict, StringConstraints

Identifier = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9._:-]{1,128}$")]


class NoopPayload(BaseModel):
    model_config = ConfigDict(extra="forbid")
    item_id: Identifier


class Job(BaseModel):
    """The message: the operation, its type and its payload; anything else is refused."""

    model_config = ConfigDict(extra="forbid")
    operation_id: Identifier
    job_type: Literal["bench.noop.v1"]
    payload: NoopPayload


class JobPaused(Exception):
    """The job's kill switch is off (or cannot be read): the message stays on the queue."""


logger = Logger()
metrics = Metrics()
tracer = Tracer()
processor = BatchProcessor(event_type=EventType.SQS)
persistence = DynamoDBPersistenceLayer(table_name=os.environ["IDEMPOTENCY_TABLE"])
config = IdempotencyConfig(event_key_jmespath="operation_id", raise_on_no_idempotency_key=True)
TOGGLE_PREFIX = os.environ["TOGGLE_PREFIX"]
_clients: dict[str, Any] = {}


def entities() -> Any:
    if "dynamodb" not in _clients:
        _clients["dynamodb"] = boto3.client("dynamodb")
    return _clients["dynamodb"]


def enabled(job_type: str) -> bool:
    """The kill switch, fail closed: only a readable "on" runs the job."""
    try:
        value = parameters.get_parameter(f"{TOGGLE_PREFIX}/{job_type}", max_age=30)
    except parameters.exceptions.GetParameterError:
        return False
    return str(value).strip().lower() in ("on", "true")


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
    job = parse(event=record.body, model=Job)  # ValidationError: the record fails, nothing runs
    if not enabled(job.job_type):
        metrics.add_metric(name="Paused", unit=MetricUnit.Count, value=1)
        raise JobPaused(job.job_type)
    run_job(job=job.model_dump())
    logger.info("job done", operation_id=job.operation_id, job_type=job.job_type)
    metrics.add_metric(name="Succeeded", unit=MetricUnit.Count, value=1)


@logger.inject_lambda_context
@metrics.log_metrics
@tracer.capture_lambda_handler
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    config.register_lambda_context(context)
    return process_partial_response(event=event, record_handler=record_handler, processor=processor, context=context)
