"""Logger, metrics and tracer in one place (Powertools), shared by every handler."""

from __future__ import annotations

import sys
import warnings
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

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


_pending: ContextVar[Counter[tuple[str, str | None]] | None] = ContextVar("converge_pending_counts", default=None)


@contextmanager
def batched_counts() -> Iterator[None]:
    """Add up the counts of a whole batch and publish each (name, job type) once, when the batch ends."""
    token = _pending.set(Counter())
    try:
        yield
    finally:
        pending = _pending.get() or Counter()
        _pending.reset(token)
        for (name, job_type), value in pending.items():
            _publish(name, job_type, value)


def count(name: str, job_type: str | None = None, value: int = 1) -> None:
    """Count an outcome, per job type when given (inside batched_counts(), once per batch)."""
    pending = _pending.get()
    if pending is not None:
        pending[(name, job_type)] += value
        return
    _publish(name, job_type, value)


def _publish(name: str, job_type: str | None, value: int) -> None:
    # Dimensions apply to a whole metric set, so per-job-type counts go out as their own set.
    if job_type is None:
        metrics.add_metric(name=name, unit=MetricUnit.Count, value=value)
        return
    with single_metric(name=name, unit=MetricUnit.Count, value=value, namespace=NAMESPACE) as metric:
        metric.add_dimension(name="job_type", value=job_type)
