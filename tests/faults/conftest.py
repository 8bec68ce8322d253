"""Fault-injection fixtures: one local cloud per test module (deploying is seconds), reset between runs.

`chaos` is the harness (tests/chaos.py): the cloud, a workload to enqueue with, the fault injector
(installed for the test), `reset()` for each property-test example, `settle()` and `check()` for
the invariants. `faults` is the injector alone, for tests that need nothing else.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from localcloud import LocalCloud
from localcloud.faults import FaultInjector
from localcloud.workload import Workload
from tests.chaos import LOCAL_ENVIRONMENT, Chaos, cli_listed, running_cloud

__all__ = ["LOCAL_ENVIRONMENT", "Chaos", "cli_listed"]


@pytest.fixture(scope="module")
def chaos_cloud() -> Iterator[tuple[LocalCloud, Workload, FaultInjector]]:
    with running_cloud() as started:
        yield started


@pytest.fixture
def chaos(chaos_cloud: tuple[LocalCloud, Workload, FaultInjector]) -> Iterator[Chaos]:
    """The harness, reset, with its fault injector installed for the test."""
    cloud, workload, injector = chaos_cloud
    harness = Chaos(cloud, workload, injector)
    harness.reset()
    with injector.installed():
        yield harness
    harness.restore_toggles()


@pytest.fixture
def faults(chaos: Chaos) -> FaultInjector:
    """The fault injector of this module's local cloud, installed and empty."""
    return chaos.faults
