"""Logger, metrics and tracer in one place (Powertools), shared by every handler."""

from __future__ import annotations

import os
import sys
import warnings
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit, single_metric
from aws_lambda_powertools.shared import constants
from aws_lambda_powertools.shared.functions import resolve_truthy_env_var_choice

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
"""converge's structured logger (Powertools' `Logger`, service `converge`): one JSON line per entry on stdout,
Lambda's log stream. A runner may log through it: in a worker, its lines carry the operation's id, job type,
correlation id and attempt."""
metrics = Metrics(namespace=NAMESPACE, service="converge")


def tracing_enabled() -> bool:
    """Whether Powertools' Tracer would trace here: in Lambda, not under SAM's or Chalice's local emulation, and
    not switched off with POWERTOOLS_TRACE_DISABLED (the same conditions the Tracer itself checks)."""
    if resolve_truthy_env_var_choice(env=os.getenv(constants.TRACER_DISABLED_ENV, "false")):
        return False
    if os.getenv(constants.SAM_LOCAL_ENV) or os.getenv(constants.CHALICE_LOCAL_ENV):
        return False
    return bool(os.getenv(constants.LAMBDA_TASK_ROOT_ENV))


class LazyTracer:
    """Powertools' Tracer, built on first use and only where tracing is on.

    Building a Tracer imports the X-Ray SDK (about a quarter of a worker's cold start) even when tracing
    is off. So a handler decorated here while tracing is off is returned as it is, and the SDK is never
    loaded; with tracing on (the template sets `Tracing: Active`) it is Powertools' own decorator. Any
    other Tracer method (`capture_method`, `put_annotation`, ...) builds the Tracer and is passed on.
    """

    def __init__(self, service: str) -> None:
        self._service = service
        self._tracer: Tracer | None = None

    @property
    def tracer(self) -> Tracer:
        if self._tracer is None:
            self._tracer = Tracer(service=self._service)
        return self._tracer

    def capture_lambda_handler(self, lambda_handler: Callable[..., Any] | None = None, **options: Any) -> Any:
        if not tracing_enabled():
            return lambda_handler if lambda_handler is not None else (lambda handler: handler)
        return self.tracer.capture_lambda_handler(lambda_handler, **options)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.tracer, name)


tracer = LazyTracer(service="converge")


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
