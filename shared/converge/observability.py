"""Logger, metrics and tracer in one place (Powertools), shared by every handler."""

from __future__ import annotations

import sys
import warnings

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit, single_metric

NAMESPACE = "Converge"

# A batch in which nothing noteworthy happened publishes no metrics; that is not worth a warning per invocation.
warnings.filterwarnings("ignore", message="No application metrics to publish")


class _CurrentStdout:
    """Writes to whatever sys.stdout is at the time (Lambda's log stream, or a local cloud's capture)."""

    def write(self, text: str) -> int:
        return sys.stdout.write(text)

    def flush(self) -> None:
        sys.stdout.flush()


logger = Logger(service="converge", stream=_CurrentStdout())  # type: ignore[arg-type]
metrics = Metrics(namespace=NAMESPACE, service="converge")
tracer = Tracer(service="converge")


def count(name: str, job_type: str | None = None, value: int = 1) -> None:
    """Emit one EMF count; per-job-type counts go out as their own metric set (dimensions are per set)."""
    if job_type is None:
        metrics.add_metric(name=name, unit=MetricUnit.Count, value=value)
        return
    with single_metric(name=name, unit=MetricUnit.Count, value=value, namespace=NAMESPACE) as metric:
        metric.add_dimension(name="job_type", value=job_type)
