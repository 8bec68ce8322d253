"""Fixtures for the local cloud's tests: a cloud from template.yaml and one from a small fixture template."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from localcloud import LocalCloud

FIXTURE_TEMPLATE = Path(__file__).parent / "fixture_app" / "template.yaml"


@pytest.fixture
def cloud() -> Iterator[LocalCloud]:
    """template.yaml deployed into an in-process moto; handlers are overridden by each test."""
    with LocalCloud.start() as local:
        yield local


@pytest.fixture
def probe_cloud() -> Iterator[LocalCloud]:
    """The fixture template (tests/localcloud/fixture_app), whose handler is a real file."""
    with LocalCloud.start(FIXTURE_TEMPLATE) as local:
        yield local
