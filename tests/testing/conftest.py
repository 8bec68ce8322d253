"""A team's project for converge_testing's own tests: `converge init`'s, with the orders' jobs (project.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from converge_cli.commands.init import scaffold
from converge_testing import Cloud, local_cloud
from tests.testing.project import add_orders

collect_ignore = ["orders"]
"""The orders' own files, tests among them, are copied into a team's project: they run there, not here."""

PROJECT = "orders-team"
"""Its directory's name, and so its catalogue's package (orders_team): no other test's project uses it."""


@pytest.fixture(scope="session")
def orders_project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The project, made once per session (outside this repository)."""
    project = tmp_path_factory.mktemp("team") / PROJECT
    scaffold(project)
    return add_orders(project)


@pytest.fixture(scope="module")
def orders_cloud(orders_project: Path) -> Iterator[Cloud]:
    """The project's template deployed, once per module, as a team's test gets it (`converge_cloud`)."""
    with local_cloud(orders_project / "template.yaml") as cloud:
        yield cloud
