"""DLQ redrive: moves dead-lettered messages back to their queue, on demand (CLI or a console test event).

Event: {"queue": "critical"|"default"|"bulk"|"all", "job_types": [...], "error_classes": [...],
"older_than_seconds": N, "newer_than_seconds": N, "operation_ids": [...], "max_messages": 100,
"rate_per_second": 10, "dry_run": false}, every field optional (the defaults shown, queue "all": the same
as a bare `converge dlq redrive`). Returns the summary, or {"error": "..."} for a bad request.
"""

import os
from functools import cache
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from converge.observability import logger, metrics, tracer
from converge.redrive import DlqUrls, Redrive
from converge.runtime import Converge

converge = Converge.from_env()
dlq_urls = DlqUrls.from_env(os.environ)


@cache
def redrive() -> Redrive:
    return Redrive.for_runtime(converge, dlq_urls)


@logger.inject_lambda_context
@metrics.log_metrics
@tracer.capture_lambda_handler
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return redrive().handle(event, context.get_remaining_time_in_millis)
