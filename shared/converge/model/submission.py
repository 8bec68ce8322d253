"""A submission: what a producer submits (one operation, or a batch), and the one place its parameters are listed.

`converge.enqueue`, `converge.enqueue_put` and the runtime's two methods of the same names all take what a
producer passes (`submission`'s parameters) and act on the one `Submission` built from them; `submits` gives
each of them those parameters, so the list is written here alone. A batch goes the same way:
`converge.enqueue_batch` and the runtime's method take `batch_submission`'s parameters (`submits_batch`) and
act on one `BatchSubmission`, which the HTTP API builds itself with its caller. A signal too: `converge.signal`,
`converge.signal_put` and the runtime's methods take `signal_submission`'s parameters (`submits_signal`) and act on
one `SignalSubmission`, which every other way in (the HTTP API, the command line, the console, the relay) builds
itself with its own sender. This module needs only the standard library: `import converge` builds the public
functions from it without loading the runtime.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Concatenate, Generic, ParamSpec, TypeVar

if TYPE_CHECKING:
    from collections.abc import Iterable

    from converge.model.batches import BatchCallback, BatchChild

When = str | datetime | None
"""A time as a producer gives it: an ISO-8601 UTC string or an aware datetime (None: not given)."""

P = ParamSpec("P")
R = TypeVar("R")
S = TypeVar("S")
T = TypeVar("T")


@dataclass(frozen=True)
class Submission:
    """One operation as a producer submits it, on any way in (Python, HTTP, the command line): built once at the
    edge and carried whole to admission (`converge.flow.admission.admit`), which checks it and makes the
    `JobRequest` that is stored. Its times are ISO-8601 UTC strings or aware datetimes."""

    job_type: str
    operation_id: str
    payload: Any
    correlation_id: str | None = None
    submitted_by: str | None = None
    """The enqueue API's caller (who alone may read the operation back through the API); None elsewhere."""
    run_at: When = None
    expires_at: When = None


def submission(
    job_type: str,
    operation_id: str,
    payload: Any,
    correlation_id: str | None = None,
    run_at: When = None,
    expires_at: When = None,
) -> Submission:
    """What a producer's call submits: a job type, the operation's id, its payload, an optional correlation id
    for tracing, and the optional times (`run_at` delays it, at most a year ahead; `expires_at` ends it
    `EXPIRED` if it has not started by then)."""
    return Submission(job_type, operation_id, payload, correlation_id, None, run_at, expires_at)


@dataclass(frozen=True)
class BatchSubmission:
    """A batch as a producer submits it (Python, HTTP, the command line): built once at the edge and carried
    whole to its admission (`converge.flow.batches.Batches.admit`), which checks every child and the callback."""

    batch_id: str
    children: tuple[BatchChild, ...]
    callback: BatchCallback
    submitted_by: str | None = None
    """The enqueue API's caller, recorded on each child (whose own it then is to read); None elsewhere."""


def batch_submission(batch_id: str, children: Iterable[BatchChild], callback: BatchCallback) -> BatchSubmission:
    """What a producer's call submits as a batch: its id, its children (each a key, a job type and a payload) and
    the callback enqueued once every child is final."""
    return BatchSubmission(batch_id, tuple(children), callback)


@dataclass(frozen=True)
class SignalSubmission:
    """A signal as its sender gives it, on any way in: built once at the edge and carried whole to
    `converge.flow.signals.Signals.send` (or to `signal_put`, the item the relay sends), which screens it."""

    operation_id: str
    name: str
    payload: Any = None
    signal_id: str | None = None
    """None: derived from the signal's name and payload (`converge.flow.signals.default_signal_id`)."""
    sent_by: str = "producer"
    """Who sent it, recorded with it (`api:<caller>`, an operator, `jobs-table`); a producer's call is `producer`."""


def signal_submission(
    operation_id: str, name: str, payload: Any = None, signal_id: str | None = None
) -> SignalSubmission:
    """What a producer's call sends as a signal: the operation, the wait's name (`ctx.wait_for(name, ...)`), an
    optional payload of identifiers, and an optional id (the same id again is the same signal)."""
    return SignalSubmission(operation_id, name, payload, signal_id)


class _Submits(Generic[P, T]):
    """Gives a function (or a method) that acts on one submission the parameters of `build`: its callers pass
    what a producer passes, it receives the submission built from them. Type checkers, `help()` and the API
    reference see the builder's parameters with the function's own name, docstring and return type."""

    def __init__(self, build: Callable[P, T]) -> None:
        self._build = build

    def function(self, act: Callable[[T], R]) -> Callable[P, R]:
        build = self._build

        @functools.wraps(act)
        def call(*args: P.args, **kwargs: P.kwargs) -> R:
            return act(build(*args, **kwargs))

        call.__signature__ = self._signature(act, own=0)  # type: ignore[attr-defined]
        return call

    def method(self, act: Callable[[S, T], R]) -> Callable[Concatenate[S, P], R]:
        build = self._build

        @functools.wraps(act)
        def call(owner: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
            return act(owner, build(*args, **kwargs))

        call.__signature__ = self._signature(act, own=1)  # type: ignore[attr-defined]
        return call

    def _signature(self, act: Callable[..., Any], own: int) -> inspect.Signature:
        """`act`'s first `own` parameters (a method's `self`), then the builder's, returning what `act` returns."""
        acting = inspect.signature(act)
        built = inspect.signature(self._build)
        parameters = [*list(acting.parameters.values())[:own], *built.parameters.values()]
        return built.replace(parameters=parameters, return_annotation=acting.return_annotation)


submits = _Submits(submission)
"""`@submits.function` / `@submits.method`: the decorated callable takes `submission`'s parameters."""

submits_batch = _Submits(batch_submission)
"""`@submits_batch.function` / `@submits_batch.method`: the decorated callable takes `batch_submission`'s."""

submits_signal = _Submits(signal_submission)
"""`@submits_signal.function` / `@submits_signal.method`: the decorated callable takes `signal_submission`'s."""
