"""The Lambda entry points: one shape for every function, and the code root each function deploys.

A function's code root (`functions/<name>/` beside converge's application template, in the package) holds one
`app.py`, written from `FUNCTIONS` (a test keeps the shipped files equal to `app_source`):

    startup.loading()                             # on Lambda, no garbage collection while it loads
    converge = Converge.from_env()                # this function's runtime, from its environment (cold start)
    handler = lambda_handler(converge, "worker")  # Powertools around one call into the runtime's part
    startup.loaded()                              # what it loaded frozen out of later collections

Each handler is the same: Powertools' logging (with the Lambda context; the enqueue API's correlation id
from its header), metrics and tracing (only where tracing is on), and one call, `part.handle(event,
context)`, whose answer it returns. On AWS an `app.py` is a top-level module of its function; the local
cloud imports each function's `app.py` under a name of its own, so three workers sharing one code root are
three runtimes, as three Lambda functions are.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from converge.observability import logger, metrics, tracer
from converge.runtime import startup
from converge.runtime.root import Converge

Part = Literal["relay", "batch_counter", "worker", "dlq_redrive", "resumer", "reconciler", "recurring", "enqueue_api"]
"""A function's part of the runtime: an attribute of `Converge` with `handle(event, context)`."""

Handler = Callable[[dict[str, Any], Any], Any]


@dataclass(frozen=True)
class Function:
    """One of converge's functions: its part of the runtime, and what its `app.py` says it does."""

    part: Part
    description: str


FUNCTIONS: dict[str, Function] = {
    "outbox_relay": Function(
        "relay", "Outbox relay: the jobs table's stream (new and re-dispatched operations) to the SQS queues."
    ),
    "batch_counter": Function(
        "batch_counter",
        "Batch counter: the state table's stream (batch children made final) to their batches' counts and callbacks.",
    ),
    "worker": Function(
        "worker", "Worker: one code, deployed once per queue; runs each SQS record through the converge pipeline."
    ),
    "dlq_redrive": Function(
        "dlq_redrive",
        "DLQ redrive: moves dead-lettered messages back to their queue, on demand (CLI or a console test event).\n\n"
        "Event: the fields of converge.operate.redrive_decision.RedriveRequest, every one optional; its defaults are"
        ' the\nbare `converge dlq redrive`\'s (queue "all", max_messages 100, rate_per_second 10, dry_run false), so'
        ' an empty\ntest event means what the bare command means. Returns the report, or {"error": "..."} for a'
        " bad request.\n",
    ),
    "resumer": Function(
        "resumer", "Resumer: re-dispatches PAUSED work when a toggle changes, and on a schedule as a safety net."
    ),
    "reconciler": Function(
        "reconciler",
        "Reconciler: on a schedule, lists open operations nothing will move on and re-dispatches what is safe.",
    ),
    "recurring": Function(
        "recurring", 'Recurring jobs: each schedule passes {"job_type": ...}; a disabled job\'s tick is a logged skip.'
    ),
    "enqueue_api": Function(
        "enqueue_api",
        "Enqueue API (API Gateway HTTP API, IAM auth): POST /jobs/{job_type}, GET /operations/{id} (the caller's\n"
        "own), POST /operations/{id}/cancel (the caller's own), GET /admin/operations/{id} (any, for principals\n"
        "IAM grants that route), POST /operations/{id}/signals/{name} (the caller's own) and\n"
        "POST /admin/operations/{id}/signals/{name} (any).",
    ),
}
"""converge's functions by code root (`functions/<name>/`), as its application's template deploys them."""

_CORRELATION_ID = {"enqueue_api": 'headers."x-correlation-id"'}
"""Where a function's logs find the request's correlation id (the enqueue API's header)."""


def lambda_handler(converge: Converge, part: Part) -> Handler:
    """The handler of a function whose runtime is `converge`: Powertools around `converge.<part>.handle`.

    The part is built on the first invocation, not at import: a function's cold start loads the part's
    modules only when a request needs them (SnapStart's before-snapshot hook builds the worker's earlier). It is
    built under `startup.kept()`: on Lambda, with no garbage collection meanwhile, and frozen once built."""

    def built() -> Any:
        if part not in vars(converge):  # a cached part of the runtime, not built yet
            with startup.kept():
                getattr(converge, part)
        return getattr(converge, part)

    @logger.inject_lambda_context(correlation_id_path=_CORRELATION_ID.get(part))
    @metrics.log_metrics
    @tracer.capture_lambda_handler
    def handler(event: dict[str, Any], context: Any) -> Any:
        return built().handle(event, context)

    return handler


def app_source(code_root: str) -> str:
    """The `app.py` of one of converge's functions, as the package ships it beside its application's template."""
    function = FUNCTIONS[code_root]
    description = function.description.rstrip("\n")
    closing = "\n" if "\n" in description else ""
    return (
        f'"""{description}{closing}"""\n\n'
        "from converge.runtime import startup\n\n"
        "startup.loading()  # on Lambda, no garbage collection while the function loads (converge.runtime.startup)\n\n"
        "from converge.runtime import Converge  # noqa: E402\n"
        "from converge.runtime.handlers import lambda_handler  # noqa: E402\n\n"
        "converge = Converge.from_env()\n"
        f'handler = lambda_handler(converge, "{function.part}")\n'
        "startup.loaded()\n"
    )
