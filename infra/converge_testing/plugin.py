"""converge_testing's pytest plugin (the package's `pytest11` entry point): opt-in fixtures over a local cloud.

Nothing happens until a test asks for a fixture by name:

    converge_cloud    a `converge_testing.Cloud` of the project's template, one per module (or per session:
                      `converge_cloud_scope = session` in the pytest configuration); its functions keep their
                      state between the module's tests, so each test uses operation ids of its own
    converge_faults   a fault injector on that cloud for one test (`plan`, `rate`, `counts`), removed after it
    converge_explore  the explorer over the project's catalogue on that cloud: `converge_explore(budget=10)` runs it
                      bounded, and fails the test with the shrunk history and its seed on a break

Configuration (pytest's ini options): `converge_template`, the template (default: the nearest `template.yaml` from
the directory pytest runs in); `converge_cloud_scope`, `module` (default) or `session`. Command line:
`--converge-seed N` replays an explorer run from its seed (as `CONVERGE_EXPLORE_SEED=N` does).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

SCOPES = ("module", "session")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini("converge_template", "the SAM template converge_cloud deploys (default: template.yaml found upward)")
    parser.addini("converge_cloud_scope", "how long one converge_cloud lives: module (default) or session")
    parser.addoption(
        "--converge-seed",
        type=int,
        default=None,
        help="the seed converge_explore starts from (a break's report names it; default: CONVERGE_EXPLORE_SEED, "
        "else random)",
    )


def cloud_scope(fixture_name: str, config: pytest.Config) -> Any:
    scope = str(config.getini("converge_cloud_scope") or "module")
    if scope not in SCOPES:
        raise pytest.UsageError(f"converge_cloud_scope = {scope!r}: use one of {', '.join(SCOPES)}")
    return scope


@pytest.fixture(scope=cloud_scope)
def converge_cloud(request: pytest.FixtureRequest) -> Iterator[Any]:
    """A local cloud of the project's template (converge_testing.Cloud), deployed once per module (or session)."""
    from converge_testing import local_cloud

    named = str(request.config.getini("converge_template") or "")
    template = request.config.rootpath / named if named else None
    with local_cloud(template) as cloud:
        yield cloud


@pytest.fixture
def converge_faults(converge_cloud: Any) -> Iterator[Any]:
    """A fault injector on `converge_cloud` for this test (localcloud.faults.FaultInjector), removed after it."""
    with converge_cloud.faults() as faults:
        yield faults


@pytest.fixture
def converge_explore(converge_cloud: Any, request: pytest.FixtureRequest) -> Any:
    """The explorer on `converge_cloud`: call it with `explore`'s options (`budget=`, `histories=`, `steps=`, `seed=`,
    `jobs=`, `leave_out=`); it returns the run's `Exploration`, or fails the test with the break, its shrunk history
    and seed. The seed is `--converge-seed`'s unless one is given, else `CONVERGE_EXPLORE_SEED`'s, else random."""
    from converge_testing import Broken, explore

    def run(**options: Any) -> Any:
        options.setdefault("seed", request.config.getoption("--converge-seed"))
        try:
            return explore(converge_cloud, **options)
        except Broken as found:
            pytest.fail(found.report(), pytrace=False)

    return run
