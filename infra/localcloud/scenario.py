"""The storyline `converge demo` runs for a catalogue whose hooks give none (`demo_scenario()`; its types are
converge.local_hooks'): `from_registry`, each job's example payload, enqueued twice, its dispatch replayed once it
ran (the jobs only converge starts, continuations and batch callbacks, are named, not enqueued)."""

from __future__ import annotations

from converge.flow.registry import JobBinding, Policy, Registry
from converge.local_hooks import Planned, Scenario
from converge.model.states import OperationState
from converge.screening.summary import BatchSummary


def started_by_converge(registry: Registry) -> dict[str, str]:
    """The jobs only converge starts, and why: a batch's callback (given the batch's counts when it completes), a
    continuation (written when its parent settles), a recurring job (its schedule ticks it). A producer's example
    of one would be nothing a producer writes."""
    why: dict[str, str] = {}
    for binding in registry:
        if binding.policy is Policy.RECURRING:
            why[binding.job_type] = "a recurring job: its schedule runs it"
        elif isinstance(binding.message, type) and issubclass(binding.message, BatchSummary):
            why[binding.job_type] = "a batch's callback: converge enqueues it with the counts when its batch completes"
    for binding in registry:
        for then, when in ((binding.on_success, "succeeds"), (binding.on_failure, "fails")):
            if then is not None and then.job_type not in why:
                why[then.job_type] = f"a continuation: converge enqueues it when {binding.job_type} {when}"
    return why


def enqueueable(registry: Registry) -> list[JobBinding]:
    """The jobs a producer starts (in the registry's order): every binding `started_by_converge` does not name."""
    converge_starts = started_by_converge(registry)
    return [binding for binding in registry if binding.job_type not in converge_starts]


def from_registry(registry: Registry) -> Scenario:
    """Each job a producer starts, with its example payload: SUCCEEDED (a fail-closed one stays PAUSED); then each
    dispatch replayed. A continuation runs through its parent; a batch's callback and a recurring job are skipped."""
    planned = [
        Planned(
            f"demo-{binding.toggle_key}",
            binding.job_type,
            dict(binding.example_payload),
            OperationState.PAUSED if binding.fail_closed else OperationState.SUCCEEDED,
            binding.description,
        )
        for binding in enqueueable(registry)
    ]
    skipped = [(job_type, why) for job_type, why in started_by_converge(registry).items() if "recurring" not in why]
    return Scenario(planned=planned, duplicates=len(planned), replay_all=True, skipped=skipped)
