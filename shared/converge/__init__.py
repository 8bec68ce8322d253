"""converge: background jobs on AWS serverless that stay correct when every handler runs twice.

What a team imports is here, and only here: `converge.__all__` (enqueueing and cancelling, a job's message,
identifier types, binding, runner context and confirmation, and the errors). Everything else is converge's
own, in its layers (`converge.model`, `screening`, `store`, `flow`, `operate`, `api`, `runtime`), and may
move. Each name is imported on first use (PEP 562), so `import converge` loads nothing else but
`converge.model.submission`, the standard-library module that gives `enqueue` and `enqueue_put` their parameters
(and `enqueue_batch`, `signal` and `signal_put` theirs).

    import converge

    converge.enqueue("mail.welcome.v1", "welcome-7f3a", {"user_id": "u-1002"})
"""

from __future__ import annotations

import importlib
from functools import cache
from typing import TYPE_CHECKING, Any

from converge.model.submission import (
    BatchSubmission,
    SignalSubmission,
    Submission,
    submits,
    submits_batch,
    submits_signal,
)

if TYPE_CHECKING:
    from converge.flow.extensions import Extension
    from converge.flow.registry import JobBinding, Policy, Queue, Then
    from converge.flow.runner import Confirmation, ConfirmingRunner, JobContext, JobRunner, RecurringRunner, TickContext
    from converge.flow.staged import StagedRunner
    from converge.model.batches import Batch, BatchAdmission, BatchCallback, BatchChild, BatchState
    from converge.model.concurrency import Concurrency
    from converge.model.debounce import Debounce
    from converge.model.errors import (
        ConfigurationError,
        ConvergeError,
        IdentityConflict,
        InvalidAction,
        InvalidMessage,
        InvalidTiming,
        InvalidTransition,
        OperationNotFound,
        OutcomeUnknown,
        PermanentError,
        RateLimited,
        TransientError,
        UnknownJobType,
        error_code,
    )
    from converge.model.limits import Limiter, Uses
    from converge.model.records import Admission, Operation
    from converge.model.signals import SignalAnswer, SignalReceipt, WaitResult
    from converge.model.states import OperationState
    from converge.observability import logger
    from converge.operate.cancel import CancelResult
    from converge.runtime import Converge
    from converge.runtime.settings import catalogue_environment
    from converge.screening.identifiers import Allow, Code, Digest, ExternalId, Identifier, ObjectKey, Ulid, identifier
    from converge.screening.message import JobMessage
    from converge.screening.summary import BatchSummary

_EXPORTS: dict[str, str] = {
    # a job: its message, identifier types, binding, runner
    "JobMessage": "converge.screening.message",
    "Identifier": "converge.screening.identifiers",
    "Code": "converge.screening.identifiers",
    "ObjectKey": "converge.screening.identifiers",
    "ExternalId": "converge.screening.identifiers",
    "Ulid": "converge.screening.identifiers",
    "Digest": "converge.screening.identifiers",
    "Allow": "converge.screening.identifiers",
    "identifier": "converge.screening.identifiers",
    "JobBinding": "converge.flow.registry",
    "Policy": "converge.flow.registry",
    "Queue": "converge.flow.registry",
    "Then": "converge.flow.registry",
    "Limiter": "converge.model.limits",
    "Uses": "converge.model.limits",
    "Concurrency": "converge.model.concurrency",
    "Debounce": "converge.model.debounce",
    "JobContext": "converge.flow.runner",
    "Confirmation": "converge.flow.runner",
    "JobRunner": "converge.flow.runner",
    "ConfirmingRunner": "converge.flow.runner",
    "TickContext": "converge.flow.runner",
    "RecurringRunner": "converge.flow.runner",
    "StagedRunner": "converge.flow.staged",
    "logger": "converge.observability",
    # a tool's hooks into every settle and the pipeline's moments (`converge.extensions.add`, on a Converge)
    "Extension": "converge.flow.extensions",
    # an operation, as enqueue and cancel answer
    "Admission": "converge.model.records",
    "Operation": "converge.model.records",
    "OperationState": "converge.model.states",
    "CancelResult": "converge.operate.cancel",
    # a signal: what its sender is answered, and what a waiting step gets back (`ctx.wait_for`)
    "SignalAnswer": "converge.model.signals",
    "SignalReceipt": "converge.model.signals",
    "WaitResult": "converge.model.signals",
    # a batch: its children, its callback, the summary the callback is given, the batch as it stands
    "BatchChild": "converge.model.batches",
    "BatchCallback": "converge.model.batches",
    "BatchSummary": "converge.screening.summary",
    "Batch": "converge.model.batches",
    "BatchAdmission": "converge.model.batches",
    "BatchState": "converge.model.batches",
    # the errors a team raises or catches
    "ConvergeError": "converge.model.errors",
    "TransientError": "converge.model.errors",
    "PermanentError": "converge.model.errors",
    "OutcomeUnknown": "converge.model.errors",
    "RateLimited": "converge.model.errors",
    "InvalidMessage": "converge.model.errors",
    "InvalidTiming": "converge.model.errors",
    "UnknownJobType": "converge.model.errors",
    "IdentityConflict": "converge.model.errors",
    "OperationNotFound": "converge.model.errors",
    "InvalidTransition": "converge.model.errors",
    "InvalidAction": "converge.model.errors",
    "ConfigurationError": "converge.model.errors",
    "error_code": "converge.model.errors",
    # the runtime, for a test or a tool that builds its own; a catalogue's settings, as the template passes them
    "Converge": "converge.runtime",
    "catalogue_environment": "converge.runtime.settings",
}

__all__ = [
    "Admission",
    "Allow",
    "Batch",
    "BatchAdmission",
    "BatchCallback",
    "BatchChild",
    "BatchState",
    "BatchSummary",
    "CancelResult",
    "Code",
    "Concurrency",
    "ConfigurationError",
    "Confirmation",
    "ConfirmingRunner",
    "Converge",
    "ConvergeError",
    "Debounce",
    "Digest",
    "Extension",
    "ExternalId",
    "Identifier",
    "IdentityConflict",
    "InvalidAction",
    "InvalidMessage",
    "InvalidTiming",
    "InvalidTransition",
    "JobBinding",
    "JobContext",
    "JobMessage",
    "JobRunner",
    "Limiter",
    "ObjectKey",
    "Operation",
    "OperationNotFound",
    "OperationState",
    "OutcomeUnknown",
    "PermanentError",
    "Policy",
    "Queue",
    "RateLimited",
    "RecurringRunner",
    "SignalAnswer",
    "SignalReceipt",
    "StagedRunner",
    "Then",
    "TickContext",
    "TransientError",
    "Ulid",
    "UnknownJobType",
    "Uses",
    "WaitResult",
    "cancel",
    "catalogue_environment",
    "enqueue",
    "enqueue_batch",
    "enqueue_put",
    "error_code",
    "get_batch",
    "identifier",
    "logger",
    "signal",
    "signal_put",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'converge' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # the next lookup is a plain attribute
    return value


def __dir__() -> list[str]:
    return __all__


@cache
def _runtime() -> Converge:
    """This process's runtime, from its environment (built on the first enqueue or cancel)."""
    from converge.runtime import Converge

    return Converge.from_env()


@submits.function
def enqueue(submission: Submission) -> Admission:
    """Admit a job into this deployment's jobs table (settings from the environment).

    The same id with the same content returns the existing operation; other content raises `IdentityConflict`;
    an invalid payload raises `InvalidMessage` naming the field, before anything is written. `run_at` delays it
    (at most a year ahead), `expires_at` ends it `EXPIRED` if it has not started by then."""
    return _runtime().admit(submission)


@submits.function
def enqueue_put(submission: Submission) -> dict[str, Any]:
    """The `Put` for the producer's own TransactWriteItems: its business write and the job, atomically."""
    return _runtime().put_for(submission)


@submits_batch.function
def enqueue_batch(batch: BatchSubmission) -> BatchAdmission:
    """Admit a batch: its children (each a key, a job type and a payload) and the callback enqueued once, when every
    child is final, with the batch's summary as its payload's `batch`.

    Idempotent: the same batch again returns it as it stands (and finishes an admission a crash stopped); other
    children or another callback under the same id raise IdentityConflict. See docs/batches.md."""
    return _runtime().admit_batch(batch)


def get_batch(batch_id: str) -> Batch:
    """A batch as it stands: its state, its children's counts by final state, its callback's id.
    OperationNotFound for an unknown batch id."""
    return _runtime().require_batches().require(batch_id)


@submits_signal.function
def signal(signal: SignalSubmission) -> SignalReceipt:
    """Send the signal `name` (with a payload of identifiers) to an operation waiting for it with `ctx.wait_for`,
    or that will: kept if it comes first, the same `signal_id` twice is one signal, another one for a wait that
    has its outcome is refused and listed. The receipt's `answer` says which (`not_found`, `ended` for an
    operation that is not there or is final). `InvalidMessage` for a payload converge cannot keep."""
    return _runtime().signals.send(signal)


@submits_signal.function
def signal_put(signal: SignalSubmission) -> dict[str, Any]:
    """The `Put` of a signal item for the producer's own TransactWriteItems (its business write and the signal,
    atomically), screened as `signal` screens one. The relay sends it as `signal` would, and records its answer
    on the record under the item's key (`converge ops show`; one not kept listed REJECTED). See docs/signals.md."""
    return _runtime().signal_put_for(signal)


def cancel(operation_id: str, reason: str, actor: str = "operator") -> CancelResult:
    """Cancel an operation that has not started: `CANCELLED` with the reason, or `applied` false when it is too
    late (a started effect is never interrupted). `OperationNotFound` for an unknown id."""
    return _runtime().cancel(operation_id, reason, actor)
