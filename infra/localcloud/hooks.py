"""What the local cloud asks of a job catalogue: a small hook object, all of it optional.

A catalogue names its hooks with a `LOCAL_HOOKS = "package.module:attribute"` string in its package
(a string, so that no Lambda imports what only the local cloud needs). The object may provide:

    seed(clients, outputs, now=None)   demo data in the deployed resources (names from the stack outputs)
    effects                            an `EffectSources`: where the jobs' effects land, to count them there
    workload()                         (job type, payload, weight) rows for mixed runs (`demo --chaos`, tests)
    prepare_workload(cloud)            before a mixed run, e.g. turn a fail-closed job's toggle on
    provider_faults(cloud, on)         make the catalogue's own providers misbehave during a chaos wave
    demo_scenario()                    the `converge demo` storyline (a Scenario)
    timed_jobs()                       (job type, payload) pairs for delayed, cancelled and expiring jobs (the
                                       demo's time checks and chaos); the first must send an e-mail counted in SES

The values it answers with (EffectSources, Scenario and its steps) are converge.local_hooks', so a catalogue's hooks
import nothing of the local cloud. Anything missing has a plain default (`NoHooks`): nothing seeded, effects counted
on every resource of the template (localcloud.effect_log), the example payloads of the jobs a producer starts as the
workload, no provider faults; so a catalogue without hooks still deploys, serves and runs its jobs, and the commands
say what they skip.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from converge.flow.registry import Registry
from converge.local_hooks import EffectSources

LOG = logging.getLogger("localcloud")
HOOKS_ATTRIBUTE = "LOCAL_HOOKS"


class NoHooks:
    """A catalogue without hooks: nothing seeded, effects counted by resource, the bindings' examples as workload."""

    effects = EffectSources()

    def __init__(self, registry: Registry | None = None) -> None:
        self._registry = registry

    def seed(self, clients: Any, outputs: Mapping[str, str], now: float | None = None) -> None:
        LOG.info("the catalogue has no local hooks: nothing to seed")

    def workload(self) -> Sequence[tuple[str, dict[str, Any], int]]:
        from .scenario import enqueueable  # the jobs a producer starts: no continuation, callback or recurring job

        bindings = enqueueable(self._registry) if self._registry is not None else []
        return [(b.job_type, dict(b.example_payload), 1) for b in bindings]

    def prepare_workload(self, cloud: Any) -> None:
        return None

    def provider_faults(self, cloud: Any, on: bool) -> None:
        return None

    def demo_scenario(self) -> Any:
        return None

    def timed_jobs(self) -> Sequence[tuple[str, dict[str, Any]]]:
        return ()  # nothing known to count: the demo's time checks and chaos's timed jobs are skipped


class _WithDefaults:
    """The catalogue's hook object, with `NoHooks`' answer for whatever it does not provide."""

    def __init__(self, hooks: Any, registry: Registry | None) -> None:
        self._hooks = hooks
        self._defaults = NoHooks(registry)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._hooks, name, getattr(self._defaults, name))


def load_hooks(catalogue: str | None, registry: Registry | None = None) -> Any:
    """The hooks a catalogue names (imported on first use), or `NoHooks` for none or no catalogue."""
    if not catalogue:
        return NoHooks(registry)
    module = importlib.import_module(catalogue)
    reference = getattr(module, HOOKS_ATTRIBUTE, None)
    if reference is None:
        return NoHooks(registry)
    if isinstance(reference, str):
        module_name, _, attribute = reference.partition(":")
        reference = getattr(importlib.import_module(module_name), attribute or "hooks")
    return _WithDefaults(reference, registry)
