"""Worker: one code, deployed once per queue; runs each SQS record through the converge pipeline."""

from typing import Any

# Before converge loads pydantic: Powertools' batch module, imported after pydantic, builds its parser's record
# models (SQS, DynamoDB, Kinesis, Kafka) for type hints alone, a cold-start cost no worker needs.
import aws_lambda_powertools.utilities.batch  # noqa: F401
from aws_lambda_powertools.utilities.typing import LambdaContext

from converge.observability import logger, metrics, tracer
from converge.runtime import Converge

converge = Converge.from_env()


@logger.inject_lambda_context
@metrics.log_metrics
@tracer.capture_lambda_handler
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return converge.worker.handle(event, context)
