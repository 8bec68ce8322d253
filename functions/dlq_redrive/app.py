"""DLQ redrive: moves dead-lettered messages back to their queue, on demand (CLI or a console test event).

Event: the fields of converge.redrive.RedriveRequest, every one optional; its defaults are the bare
`converge dlq redrive`'s (queue "all", max_messages 100, rate_per_second 10, dry_run false), so an empty
test event means what the bare command means. Returns the report, or {"error": "..."} for a bad request.
"""

import os
from functools import cache
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from converge.observability import logger, metrics, tracer
from converge.operate.actions import Operator
from converge.operate.deadletters import DlqUrls
from converge.runtime import Converge

converge = Converge.from_env()
dlq_urls = DlqUrls.from_env(os.environ)


@cache
def operator() -> Operator:
    # A request that names its actor (the CLI's --remote does) is recorded under that name instead.
    return Operator(converge, actor="function:dlq-redrive", dlq_urls=dlq_urls)


@logger.inject_lambda_context
@metrics.log_metrics
@tracer.capture_lambda_handler
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return operator().redrive_event(event, context.get_remaining_time_in_millis)
