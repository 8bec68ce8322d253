"""Reconciler: on a schedule, lists open operations nothing will move on and re-dispatches what is safe."""

import os
from functools import cache
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from converge.observability import logger, metrics, tracer
from converge.operate.deadletters import DlqUrls
from converge.operate.reconciler import Reconciler
from converge.runtime import Converge

converge = Converge.from_env()


@cache
def reconciler() -> Reconciler:
    return Reconciler.for_runtime(converge, os.environ.get("RELAY_FAILURE_QUEUE_URL"), DlqUrls.from_env(os.environ))


@logger.inject_lambda_context
@metrics.log_metrics
@tracer.capture_lambda_handler
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return reconciler().handle(event, context.get_remaining_time_in_millis)
