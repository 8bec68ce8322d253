"""Resumer: re-dispatches PAUSED work when a toggle changes, and on a schedule as a safety net."""

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from converge.observability import logger, metrics, tracer
from converge.runtime import Converge

converge = Converge.from_env()


@logger.inject_lambda_context
@metrics.log_metrics
@tracer.capture_lambda_handler
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return converge.resumer.handle(event, context.get_remaining_time_in_millis, converge.settings.time_margin_ms)
