"""The benchmark registers its own job types; they are forgotten after each test, so no later test sees them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from converge.registry import registry


@pytest.fixture(autouse=True)
def _benchmark_job_types_stay_here() -> Iterator[None]:
    with registry.scoped():
        yield
