"""The explorer's local cloud: one per test module (deploying takes seconds), its fault injector installed."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from converge.observability import logger
from localcloud import sqs_time
from tests.chaos import Chaos, running_cloud

from . import promise
from .machine import Budget, Explorer

CATALOGUE = "tests.explore.catalogue"
"""The reference application's jobs and the explorer's job of steps (tests/explore/catalogue.py)."""


@pytest.fixture(scope="module")
def explorer() -> Iterator[type[Explorer]]:
    """The Explorer machine, wired to this module's cloud (each history resets it). The framework's logs
    are silenced meanwhile: thousands of histories log millions of lines, and failures say what broke.
    The functions load the explorer's catalogue. Time stands still but for the emulated clock's advances, for the
    local cloud's clock (a tick a reading) and for SQS's, so a history replays exactly however long its steps take."""
    level = logger.log_level
    logger.setLevel(logging.CRITICAL)
    with sqs_time.frozen(), running_cloud(catalogue=CATALOGUE) as (cloud, workload, injector), cloud.ticking():
        harness = Chaos(cloud, workload, injector)
        with injector.installed():
            Explorer.harness = harness
            Budget.start()
            promise.NOTICE.append(Budget.notice)
            try:
                yield Explorer
            finally:
                promise.NOTICE.remove(Budget.notice)
                Explorer.harness = None
                harness.restore_toggles()
                logger.setLevel(level)
