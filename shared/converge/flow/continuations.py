"""Continuations: what comes next when an operation settles, written with the write that settles it.

A binding names the job that follows on success (`on_success`) and on failure or UNKNOWN (`on_failure`). When
the parent settles that way, the next operation's request is one more item of the terminal write's
transaction (`converge.flow.settlement`), under an id derived from the parent's, conditional on that
id being new: a retried or raced terminal write can never make it twice (the transaction is refused), and a
crash can never lose it (it is written with the settle or not at all). A cancelled, expired or rejected
parent starts nothing (`FOLLOWS` names no continuation for it). The next operation then goes the way of
any request: the jobs table's stream, the relay, its queue.

Continuations are an extension (`converge.flow.extensions`): every settle asks them for its items
(`converge.flow.settlement`), and a continuation an earlier settle wrote is dropped from the transaction there.
"""

from __future__ import annotations

from collections.abc import Sequence

from converge.flow.extensions import Extension
from converge.flow.registry import Registry, Then
from converge.model.envelope import plain
from converge.model.links import ON_FAILURE, ON_SUCCESS, continuation_id
from converge.model.request import JobRequest
from converge.model.settling import Settling
from converge.model.states import OperationState
from converge.screening.message import validate_payload
from converge.store.jobs import JobsTable
from converge.store.transact import TransactItem

FOLLOWS = {
    OperationState.SUCCEEDED: ON_SUCCESS,
    OperationState.FAILED: ON_FAILURE,
    OperationState.UNKNOWN: ON_FAILURE,
}
"""The outcome a continuation follows, by the parent's terminal state (NOOP, REJECTED and the rest: none)."""


class Continuations(Extension):
    """The next operation's request, for the transaction that settles its parent."""

    def __init__(self, registry: Registry, jobs: JobsTable) -> None:
        self._registry = registry
        self._jobs = jobs

    def extras_for(self, settling: Settling) -> Sequence[TransactItem]:
        """The continuation's Put, or nothing. Raises InvalidMessage or UnknownJobType when the binding's
        continuation cannot be built (the caller settles without it and says so on the receipt)."""
        request = self.request_for(settling)
        return [self._jobs.continuation_put(request, settling.operation_id)] if request is not None else []

    def request_for(self, settling: Settling) -> JobRequest | None:
        outcome = FOLLOWS.get(settling.state)
        if outcome is None or settling.job_type not in self._registry:
            return None
        binding = self._registry.get(settling.job_type)
        then: Then | None = binding.on_success if outcome == ON_SUCCESS else binding.on_failure
        if then is None:
            return None
        message = validate_payload(binding.message_class(), dict(settling.payload))
        payload = plain(dict(then.payload_of(message)))
        # refused now, not by the relay later
        validate_payload(self._registry.get(then.job_type).message_class(), payload)
        return JobRequest(
            operation_id=continuation_id(settling.operation_id, outcome),
            job_type=then.job_type,
            payload=payload,
            correlation_id=settling.correlation_id or settling.operation_id,
        )
