"""A local cloud of a team's template, for its tests: converge bound to it, the clock, faults, effects, receipts."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from converge_testing.effects import Effects
from localcloud import LocalCloud
from localcloud.bound import runtime_for
from localcloud.project import load_project
from localcloud.server import catalogue_seeder

if TYPE_CHECKING:
    from converge.model.records import Operation
    from converge.runtime import Converge
    from localcloud.cloud import DrainStats
    from localcloud.faults import FaultInjector
    from localcloud.iam import Denial


class NotQuiet(AssertionError):
    """The cloud still had work after `run_until_quiet`'s rounds: something keeps making more (a loop of jobs?)."""


@contextlib.contextmanager
def local_cloud(
    template: str | Path | None = None,
    *,
    catalogue: str | None = None,
    stage: str = "dev",
    seed: bool = True,
    check_iam: bool = True,
) -> Iterator[Cloud]:
    """Deploy the project's template into an in-process moto and yield its `Cloud`; everything vanishes on exit.

    `template`: the project's `template.yaml` (default: `CONVERGE_TEMPLATE`, else the nearest `template.yaml` from the
    current directory up, as the `converge` command finds it); its layer directories go on `sys.path`, as Lambda
    puts a layer on a function's path. `catalogue`: the job catalogue's module (default: what the template passes
    converge's application). `seed`: run the catalogue's local hooks' `seed` once deployed. `check_iam`: authorise
    every AWS call a function makes against its role (a missing grant fails the call, as on AWS)."""
    project = load_project(template, catalogue).activate()
    seeders = [catalogue_seeder] if seed else []
    with LocalCloud.start(
        project.template, stage, catalogue=project.catalogue, seeders=seeders, check_iam=check_iam
    ) as local:
        yield Cloud(local)


class Cloud:
    """A deployed local cloud of the team's template (`local_cloud()`, or the `converge_cloud` fixture).

    `local` is the local cloud itself (localcloud.LocalCloud) for what this class does not say."""

    def __init__(self, local: LocalCloud) -> None:
        self.local = local

    @cached_property
    def converge(self) -> Converge:
        """converge's runtime on this cloud (`converge.Converge`): `enqueue`, `enqueue_put`, `enqueue_batch`,
        `cancel`, `operations`, ..., named from the stack's outputs, on the cloud's clock."""
        return runtime_for(self.local)

    @cached_property
    def effects(self) -> Effects:
        """The effect counter (`converge_testing.Effects`): what the template's own resources accepted, by operation."""
        return Effects(self.local)

    @property
    def outputs(self) -> dict[str, str]:
        """The stack's outputs (the template's, and converge's application's: `JobsTableName`, ...)."""
        return self.local.outputs

    def client(self, service: str) -> Any:
        """A boto3 client of this cloud (`cloud.client("dynamodb")`): a test's own calls, checked by no role."""
        return self.local.client(service)

    # -- running -------------------------------------------------------------------------------------------------

    def run_until_quiet(self, max_rounds: int = 1_000) -> DrainStats:
        """Run the event sources (stream -> relay -> queues -> workers, delayed jobs, toggle changes) until nothing is
        left to do, moving the emulated clock over waits (a retry's backoff, a run_at); raises `NotQuiet` if work is
        still left after `max_rounds`. Returns what ran (`invocations` by function, messages, ...)."""
        stats = self.local.drain(max_rounds=max_rounds)
        if not stats.quiescent:
            raise NotQuiet(f"work was still left after {stats.rounds} rounds: {dict(stats.invocations)}")
        return stats

    def operation(self, operation_id: str) -> Operation:
        """The operation's stored receipt (`converge.Operation`: state, attempts, history, last error, steps)."""
        return self.converge.operations.require(operation_id, steps=True)

    def invoke(self, function: str, event: Any) -> Any:
        """Invoke one of the template's functions (by logical id) with an event, as Lambda's Invoke would."""
        return self.local.invoke(function, event)

    def http(self, method: str, path: str, **request: Any) -> Any:
        """Send a request to the template's HTTP API (headers=, body=, query=); returns status, headers, body."""
        return self.local.http(method, path, **request)

    # -- time ----------------------------------------------------------------------------------------------------

    @property
    def clock(self) -> Any:
        """The emulated clock every function runs on: `now()`, `advance(seconds)`."""
        return self.local.clock

    def advance(self, seconds: float) -> None:
        """Move the emulated clock forward (hidden SQS messages and waits age with it); nothing runs until asked."""
        self.local.advance(seconds)

    def tick_schedules(self) -> None:
        """Fire the template's recurring schedules due at the emulated now (they never fire by themselves)."""
        self.local.tick_schedules()

    # -- faults and grants ---------------------------------------------------------------------------------------

    @contextlib.contextmanager
    def faults(self, seed: int = 0) -> Iterator[FaultInjector]:
        """A fault injector on this cloud's functions for the block (`plan(FaultKind..., operation_id)`, `rate(...)`,
        `counts`); removed on exit. See docs/fault-injection.md for each kind."""
        from localcloud.faults import FaultInjector

        injector = FaultInjector(self.local, seed=seed)
        with injector.installed():
            yield injector

    @property
    def denials(self) -> list[Denial]:
        """The calls a function's role was refused (a missing grant), oldest first; each names what to grant where."""
        return list(self.local.iam.denials) if self.local.iam is not None else []
