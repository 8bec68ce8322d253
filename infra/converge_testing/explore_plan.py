"""What the explorer plays with, read from a team's catalogue: its jobs, their examples, and a clean run of each.

The jobs a producer starts are enqueued with their example payload (`JobBinding.example_payload`), as `converge demo`
enqueues them; a continuation runs through its parent and a batch's callback through a batch of the jobs a producer
starts, never on its own (localcloud.scenario.started_by_converge names why). Recurring jobs are the schedule's.

Before any history, each job runs once on the quiet cloud, with every kill switch on and no fault: its clean run.
Its effects by resource (`Cloud.effects.of`) are what an operation of that job makes, and the promise holds every
operation of the job to them: nothing lost when SUCCEEDED, nothing twice beyond what its policy allows. A clean run
that does not succeed is the first thing the explorer reports.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from converge.flow.registry import JobBinding, Policy, Registry, toggle_key
from converge.model.batches import BatchCallback, BatchChild, callback_id
from converge.model.links import ON_SUCCESS, continuation_id
from converge.model.states import OperationState
from converge.screening.summary import SUMMARY_FIELDS, BatchSummary
from localcloud.scenario import enqueueable, started_by_converge

EXACTLY_ONCE = frozenset({Policy.CLAIM_THEN_EFFECT, Policy.KEYED_EFFECT})
"""The policies that promise each effect once per operation, whatever the faults (docs/how-it-works.md)."""
CALIBRATION = "explore-clean"
"""The prefix of the clean runs' operation ids."""
BATCH_SIZE = 2
"""Children of the clean run's batch (a callback's clean run)."""


@dataclass
class Plan:
    """The catalogue as the explorer sees it: what it enqueues, what converge starts, and each job's clean run."""

    registry: Registry
    jobs: list[JobBinding]
    """The jobs a producer starts, in the registry's order (each with its example payload)."""
    callbacks: list[JobBinding]
    """The batches' callbacks (their message is a `BatchSummary`)."""
    clean: dict[str, dict[str, int]] = field(default_factory=dict)
    """Each job type's effects by resource in its clean run (a continuation's and a callback's too)."""
    not_held: dict[str, str] = field(default_factory=dict)
    """Job types with no clean run, and why: their effects are bounded by nothing but the unstarted rule."""

    @classmethod
    def of(cls, registry: Registry, jobs: Iterable[str] | None = None) -> Plan:
        """The plan of the catalogue; `jobs`: only these job types are enqueued by the producers (their
        continuations and the batches' callbacks still run through them). Raises ValueError on a name that is no job
        a producer starts, saying what it is or which ones are."""
        callbacks = [b for b in registry if isinstance(b.message, type) and issubclass(b.message, BatchSummary)]
        return cls(registry, chosen_jobs(registry, jobs), callbacks)

    @property
    def job_types(self) -> list[str]:
        return [binding.job_type for binding in self.jobs]

    @property
    def toggles(self) -> list[str]:
        """The kill switches of every job the explorer may run (a continuation's and a callback's too)."""
        return sorted({toggle_key(binding.job_type) for binding in self.registry if binding.queue is not None})

    def payload(self, job_type: str) -> dict[str, Any]:
        return dict(self.registry.get(job_type).example_payload)

    def callback(self, binding: JobBinding) -> BatchCallback:
        """A callback with its example payload, less the counts converge fills in."""
        extra = {k: v for k, v in binding.example_payload.items() if k not in SUMMARY_FIELDS}
        return BatchCallback(binding.job_type, extra)

    def policy(self, job_type: str) -> Policy | None:
        return self.registry.get(job_type).policy if job_type in self.registry else None

    # -- clean runs ------------------------------------------------------------------------------------------------

    def calibrate(self, cloud: Any, run: int = 1) -> list[str]:
        """Run each job once on the quiet cloud, no fault; record its effects. Returns what went wrong (a clean
        run that did not succeed, a call a role refused), each naming the job. `run`: the ids' (a cloud explored
        again runs its clean runs again, under new ids)."""
        problems: list[str] = []
        converge = cloud.converge
        for number, binding in enumerate(self.jobs):
            operation_id = f"{CALIBRATION}-r{run}-{number}"
            converge.enqueue(binding.job_type, operation_id, self.payload(binding.job_type))
            cloud.run_until_quiet()
            problems += self._learn(cloud, operation_id, binding.job_type)
            if binding.on_success is not None:
                problems += self._learn(cloud, continuation_id(operation_id, ON_SUCCESS), binding.on_success.job_type)
        if self.callbacks and self.jobs:
            for number, binding in enumerate(self.callbacks):
                batch_id = f"{CALIBRATION}-r{run}-batch-{number}"
                child = self.jobs[0]
                children = [
                    BatchChild(f"c{n}", child.job_type, self.payload(child.job_type)) for n in range(BATCH_SIZE)
                ]
                converge.enqueue_batch(batch_id, children, self.callback(binding))
                cloud.run_until_quiet()
                problems += self._learn(cloud, callback_id(batch_id), binding.job_type)
        for binding in self.registry:
            if binding.queue is not None and binding.job_type not in self.clean:
                self.not_held.setdefault(binding.job_type, "no clean run (nothing the explorer starts reaches it)")
        refused = [f"{d.function_id} was refused {d.action} on {d.resource}: {d.message}" for d in cloud.denials]
        return problems + refused[:3]

    def _learn(self, cloud: Any, operation_id: str, job_type: str) -> list[str]:
        if job_type in self.clean:
            return []
        found = cloud.converge.operations.get(operation_id)
        if found is None:
            self.not_held[job_type] = "its clean run never came"
            return [f"{job_type}: its clean run ({operation_id}) was never written"]
        if found.state is not OperationState.SUCCEEDED:
            self.not_held[job_type] = f"its clean run ended {found.state.value}"
            return [f"{job_type}: its clean run ({operation_id}) ended {found.state.value}: {found.last_error}"]
        self.clean[job_type] = {k: v for k, v in cloud.effects.of(operation_id).items() if v}
        return []


def chosen_jobs(registry: Registry, names: Iterable[str] | None) -> list[JobBinding]:
    """The jobs a producer starts, or those of them named (in the registry's order); a clear ValueError for a name
    that is no such job: converge's own (a continuation, a callback, a recurring job) or none of the catalogue's."""
    startable = enqueueable(registry)
    if names is None:
        if not startable:
            raise ValueError("the catalogue has no job a producer starts: nothing to explore")
        return startable
    wanted = list(dict.fromkeys(names))
    converge_starts = started_by_converge(registry)
    choices = ", ".join(binding.job_type for binding in startable) or "none"
    for name in wanted:
        if name in converge_starts:
            raise ValueError(f"{name!r} is not started by a producer ({converge_starts[name]}); explore the job that "
                             f"starts it. The jobs a producer starts: {choices}")  # fmt: skip
        if name not in registry:
            raise ValueError(f"no job {name!r} in the catalogue; the jobs a producer starts: {choices}")
    if not wanted:
        raise ValueError(f"no job named to explore; the jobs a producer starts: {choices}")
    return [binding for binding in startable if binding.job_type in wanted]
