"""converge_testing: a team's tests on converge's terms, over a local cloud of the team's own template.

    from converge_testing import local_cloud

    with local_cloud() as cloud:                       # template.yaml of this project, deployed into moto
        cloud.converge.enqueue("orders.confirm.v1", "order-1", {"order_id": "o-1"})
        cloud.run_until_quiet()                        # stream -> relay -> queues -> workers, until nothing is left
        assert cloud.operation("order-1").state is OperationState.SUCCEEDED
        assert cloud.effects.of("order-1") == {"OrdersTable": 1, "ses": 1}

What it gives (docs/testing.md has the whole page, every example run by a test):

    local_cloud(...)     a local cloud of the project's template (the functions run in this process, under their
                         roles' grants); the pytest plugin (plugin.py) gives one per module or session
    Cloud                that cloud: converge bound to it, run_until_quiet(), the clock, faults, effects, receipts
    Effects              the effect counter: what the template's own tables, buckets, topics and queues and SES
                         accepted from the functions, read by operation id
    FaultKind            the faults `cloud.faults()` injects (the worker dies after an effect, a lost response, ...)
    explore, Exploration, Broken   the explorer over the catalogue: a run, what it did, the break it found
    Scenario, Planned, BatchStep   what a catalogue's local hooks may give `converge demo` (its storyline)

Why it lives here, and what may import it: `converge` is what Lambda loads (the layer), and nothing of it imports
the local cloud or this package. converge_testing stands in infra/, one floor above the local cloud it drives (for
tests, on a developer's machine or in CI, with the `local` or `test` extra), and below the command line, whose
`converge explore` runs it; pyproject.toml's import contracts hold that order. A Lambda layer never holds it
(`converge init`'s layer build leaves it out with the rest of what converge-jobs ships for a developer's machine).
Each name is imported on first use, so `import converge_testing` (what the pytest plugin does in every test
session) loads nothing.

The explorer (`explore(cloud, seed=..., budget=...)`, the `converge_explore` fixture, `converge explore`): Hypothesis
draws histories of the catalogue's own jobs (their example payloads), faults, kill switches, operators' actions and
the clock on this `Cloud`, checks converge's promise after every step by the effect counter and the stored receipts,
and reports a break as `Broken`, shrunk, with the seed that finds it again (explorer.py and its explore_* modules).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from converge.local_hooks import BatchStep, Planned, Scenario
    from converge_testing.cloud import Cloud, local_cloud
    from converge_testing.effects import Effects
    from converge_testing.explorer import Broken, Exploration, explore
    from localcloud.faults import FaultKind

_EXPORTS: dict[str, str] = {
    "local_cloud": "converge_testing.cloud",
    "explore": "converge_testing.explorer",
    "Exploration": "converge_testing.explorer",
    "Broken": "converge_testing.explorer",
    "Cloud": "converge_testing.cloud",
    "Effects": "converge_testing.effects",
    "FaultKind": "localcloud.faults",
    "Scenario": "converge.local_hooks",
    "Planned": "converge.local_hooks",
    "BatchStep": "converge.local_hooks",
}

__all__ = [
    "BatchStep",
    "Broken",
    "Cloud",
    "Effects",
    "Exploration",
    "FaultKind",
    "Planned",
    "Scenario",
    "explore",
    "local_cloud",
]

LOCAL_EXTRA = "converge_testing needs converge's local cloud: pip install 'converge-jobs[test]' (or '[local]')"


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'converge_testing' has no attribute {name!r}")
    try:
        value = getattr(importlib.import_module(module), name)
    except ModuleNotFoundError as missing:
        if missing.name and missing.name.split(".")[0] in ("moto", "samtranslator", "yaml", "hypothesis"):
            raise ModuleNotFoundError(f"{LOCAL_EXTRA} ({missing})", name=missing.name) from None
        raise
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
