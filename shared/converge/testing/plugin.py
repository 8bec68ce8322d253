"""converge.testing's pytest plugin (the package's `pytest11` entry point): opt-in fixtures over a local cloud.

Nothing happens until a test asks for a fixture by name:

    converge_cloud    a `converge.testing.Cloud` of the project's template, one per module (or per session:
                      `converge_cloud_scope = session` in the pytest configuration); its functions keep their
                      state between the module's tests, so each test uses operation ids of its own
    converge_faults   a fault injector on that cloud for one test (`plan`, `rate`, `counts`), removed after it

Configuration (pytest's ini options): `converge_template`, the template (default: the nearest `template.yaml` from
the directory pytest runs in); `converge_cloud_scope`, `module` (default) or `session`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

SCOPES = ("module", "session")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini("converge_template", "the SAM template converge_cloud deploys (default: template.yaml found upward)")
    parser.addini("converge_cloud_scope", "how long one converge_cloud lives: module (default) or session")


def cloud_scope(fixture_name: str, config: pytest.Config) -> Any:
    scope = str(config.getini("converge_cloud_scope") or "module")
    if scope not in SCOPES:
        raise pytest.UsageError(f"converge_cloud_scope = {scope!r}: use one of {', '.join(SCOPES)}")
    return scope


@pytest.fixture(scope=cloud_scope)
def converge_cloud(request: pytest.FixtureRequest) -> Iterator[Any]:
    """A local cloud of the project's template (converge.testing.Cloud), deployed once per module (or session)."""
    from converge.testing import local_cloud

    named = str(request.config.getini("converge_template") or "")
    template = request.config.rootpath / named if named else None
    with local_cloud(template) as cloud:
        yield cloud


@pytest.fixture
def converge_faults(converge_cloud: Any) -> Iterator[Any]:
    """A fault injector on `converge_cloud` for this test (localcloud.faults.FaultInjector), removed after it."""
    with converge_cloud.faults() as faults:
        yield faults
