"""A pytest plugin for the mutation run: a warm fork server, and each mutant's likeliest killers first.

mutmut tests every mutant in a fresh pytest session forked from one process, with `-x`: the first
failing test ends it. Two things decide what a mutant costs, and this plugin works on both:

- What every session pays before its first test. The fork server's warm-up (a collect-only session)
  also fills the caches the tests' fixtures use (`tests.conftest.warm`: the parsed template,
  botocore's service models, moto's backends) and then freezes the garbage collector, so that a
  forked session neither parses nor loads them again, nor walks the inherited heap when it collects.
- How soon a killable mutant meets a test that fails. Each failure under a mutant is appended to a
  kill log (`CONVERGE_MUTATION_KILLS`); a session runs first the tests that killed other mutants of
  the same function, then those that killed mutants of the same module, then unit before
  integration tests (a unit test needs no local-cloud deployment), otherwise in mutmut's order.

The order decides only how soon a mutant is killed, never whether: a mutant survives only when
every test that reaches it passes.

mutmut's fork server does not time a mutant's session, so the plugin also appends each session's
wall time to a second log (`CONVERGE_MUTATION_TIMES`), which the report adds up per module.
"""

from __future__ import annotations

import gc
import json
import os
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

TIERS = ("tests/unit/", "tests/integration/")
KILLS = "CONVERGE_MUTATION_KILLS"
"""The environment variable naming the kill log (JSON lines: {"mutant": name, "test": node id})."""
TIMES = "CONVERGE_MUTATION_TIMES"
"""The environment variable naming the time log (JSON lines: {"mutant": name, "seconds": wall time})."""
MARK = "__mutmut_"
_started: list[float] = []


def _tier(nodeid: str) -> int:
    for index, prefix in enumerate(TIERS):
        if nodeid.startswith(prefix):
            return index
    return len(TIERS)


def _mutant() -> str | None:
    """The mutant this session tests, or None for the clean, stats and forced-failure runs."""
    name = os.environ.get("MUTANT_UNDER_TEST", "")
    return name if MARK in name else None


def function_of(mutant: str) -> str:
    """`converge.relay.xǁRelayǁ_send__mutmut_12` → `converge.relay.xǁRelayǁ_send`."""
    return mutant.rsplit(MARK, 1)[0]


def module_of(mutant: str) -> str:
    """`converge.relay.xǁRelayǁ_send__mutmut_12` → `converge.relay`."""
    return function_of(mutant).rsplit(".", 1)[0]


def _entries(path: Path, field: str) -> list[tuple[str, object]]:
    """(mutant, value of `field`) per line of a log; a line cut short by a stopped worker is skipped."""
    if not path.exists():
        return []
    pairs = []
    for line in path.read_text().splitlines():
        try:
            entry = json.loads(line)
            pairs.append((str(entry["mutant"]), entry[field]))
        except (ValueError, KeyError, TypeError):
            continue
    return pairs


def read_kills(path: Path) -> list[tuple[str, str]]:
    """The kill log as (mutant, test) pairs."""
    return [(mutant, str(test)) for mutant, test in _entries(path, "test")]


def read_times(path: Path) -> dict[str, float]:
    """Each mutant's latest session time from the time log, in seconds."""
    times = {}
    for mutant, seconds in _entries(path, "seconds"):
        if isinstance(seconds, (int, float)):
            times[mutant] = float(seconds)
    return times


def _append(path: str, entry: dict[str, object]) -> None:
    # One short append per line; O_APPEND keeps two workers' lines whole.
    descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(descriptor, (json.dumps(entry) + "\n").encode())
    finally:
        os.close(descriptor)


def priorities(mutant: str, kills: list[tuple[str, str]]) -> tuple[Counter[str], Counter[str]]:
    """How often each test killed a mutant of this mutant's function, and of its module."""
    function, module = function_of(mutant), module_of(mutant)
    same_function: Counter[str] = Counter()
    same_module: Counter[str] = Counter()
    for killed, test in kills:
        if function_of(killed) == function:
            same_function[test] += 1
        if module_of(killed) == module:
            same_module[test] += 1
    return same_function, same_module


def pytest_collection_modifyitems(session: Any, config: Any, items: list[Any]) -> None:
    mutant, log = _mutant(), os.environ.get(KILLS)
    if mutant is None or not log:
        items.sort(key=lambda item: _tier(item.nodeid))  # stable: mutmut's order within a tier
        return
    same_function, same_module = priorities(mutant, read_kills(Path(log)))
    items.sort(key=lambda item: (-same_function[item.nodeid], -same_module[item.nodeid], _tier(item.nodeid)))


def pytest_runtest_logreport(report: Any) -> None:
    mutant, log = _mutant(), os.environ.get(KILLS)
    if mutant is not None and log and report.failed:
        _append(log, {"mutant": mutant, "test": report.nodeid})


def pytest_sessionstart(session: Any) -> None:
    _started.append(time.monotonic())


def pytest_sessionfinish(session: Any, exitstatus: int) -> None:
    mutant, log = _mutant(), os.environ.get(TIMES)
    if mutant is not None and log and _started:
        _append(log, {"mutant": mutant, "seconds": round(time.monotonic() - _started[-1], 3)})


def pytest_collection_finish(session: Any) -> None:
    """In the fork server's collect-only warm-up: fill the tests' caches, then freeze the heap."""
    if not session.config.option.collectonly or _mutant() is not None:
        return
    conftest = sys.modules.get("tests.conftest")
    warm = getattr(conftest, "warm", None)
    if callable(warm):
        warm()
    gc.collect()
    gc.freeze()
