"""Recurring jobs: each schedule passes {"job_type": ...}; a disabled job's tick is a logged skip."""

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from converge.flow.recurring import run_tick
from converge.observability import logger, metrics, tracer
from converge.runtime import Converge

converge = Converge.from_env()


@logger.inject_lambda_context
@metrics.log_metrics
@tracer.capture_lambda_handler
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return run_tick(
        converge.registry,
        converge.toggles,
        event,
        context.get_remaining_time_in_millis,
        converge.clock,
        converge.settings.time_margin_ms,
    )
