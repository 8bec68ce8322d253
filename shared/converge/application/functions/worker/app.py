"""Worker: one code, deployed once per queue; runs each SQS record through the converge pipeline."""

# Before converge loads pydantic: Powertools' batch module, imported after pydantic, builds its parser's record
# models (SQS, DynamoDB, Kinesis, Kafka) for type hints alone, a cold-start cost no worker needs.
import aws_lambda_powertools.utilities.batch  # noqa: F401

from converge.runtime import Converge
from converge.runtime.handlers import lambda_handler

converge = Converge.from_env()
handler = lambda_handler(converge, "worker")
