"""Test the last run's surviving mutants again against named tests only (the tests written for them).

`make mutate SURVIVORS=1` re-runs mutmut, which first re-measures every test's coverage and runs the
whole clean suite: on a loaded machine that is most of the time. After writing tests for a handful of
survivors, this runs just those tests against each surviving mutant, in the workspace mutmut built,
the way mutmut does (the mutant chosen by MUTANT_UNDER_TEST, the mutated sources first on the path):
a failing test records the mutant as killed; a passing one leaves it surviving. It only ever turns a
survivor into a kill, so a full run afterwards can only confirm it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from converge_mutation.scope import REPO_ROOT
from converge_mutation.workspace import MUTANTS

SURVIVED = 0
KILLED = 1
NO_TESTS = frozenset({5, 33})
"""mutmut's codes for a mutant no test reached: new tests may reach it, so a recheck tries it as a survivor."""
INTERRUPTED = 2
"""mutmut's code for a mutant whose tests were stopped with its run: no result, tried like an unchecked one."""


def survivors(modules: list[str], unchecked: bool = False) -> list[tuple[Path, str]]:
    """(meta file, mutant name) of every surviving mutant (those no test reached among them), of the given modules
    (all when empty); with `unchecked`, also those the last run did not reach or was testing when stopped (a kill
    counts; a pass leaves them as they were)."""
    wanted: set[int | None] = {SURVIVED, *NO_TESTS}
    if unchecked:
        wanted |= {None, INTERRUPTED}
    found = []
    for meta in sorted(MUTANTS.rglob("*.py.meta")):
        data = json.loads(meta.read_text())
        for name, code in sorted(data["exit_code_by_key"].items()):
            if code in wanted and (not modules or any(name.startswith(module + ".") for module in modules)):
                found.append((meta, name))
    return found


def recheck(tests: list[str], modules: list[str], max_children: int, unchecked: bool = False) -> tuple[int, int, float]:
    """Run `tests` against each survivor; record the kills. Returns (survivors tried, killed, seconds)."""
    for test in tests:
        path = test.split("::", 1)[0]  # a file, or one test in it (file::name)
        source = REPO_ROOT / path
        if not source.exists():
            raise SystemExit(f"no such test file: {path}")
        target = MUTANTS / path
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)
    for helper in ("tests/unit/sqs_deliveries.py", "tests/unit/conftest.py", "tests/conftest.py"):
        shutil.copy2(REPO_ROOT / helper, MUTANTS / helper)
    # The tests must pass on the original code, and fail when every mutated function fails (mutmut's
    # own check that the mutated sources are the ones imported): otherwise a kill would mean nothing.
    if _run("", tests)[0] != SURVIVED:
        raise SystemExit(f"the tests fail on the original code in {MUTANTS}; fix them first")
    if _run("fail", tests, strict=False)[0] != KILLED:
        raise SystemExit("the tests do not reach the mutated sources; is the workspace built (make mutate)?")
    pending = survivors(modules, unchecked)
    began = time.monotonic()
    with ThreadPoolExecutor(max_workers=max_children) as pool:
        outcomes = list(pool.map(lambda item: (item, *_run(item[1], tests)), pending))
    by_meta: dict[Path, dict] = {}
    killed = 0
    for (meta, name), code, seconds in outcomes:
        if code != KILLED:
            continue
        data = by_meta.setdefault(meta, json.loads(meta.read_text()))
        data["exit_code_by_key"][name] = KILLED
        data.setdefault("durations_by_key", {})[name] = seconds
        killed += 1
    for meta, data in by_meta.items():
        meta.write_text(json.dumps(data, indent=4))
    return len(pending), killed, time.monotonic() - began


def _run(name: str, tests: list[str], strict: bool = True) -> tuple[int, float]:
    env = {**os.environ, "MUTANT_UNDER_TEST": name, "PYTHONDONTWRITEBYTECODE": "1"}
    env["PYTHONPATH"] = os.pathsep.join([str(MUTANTS / "src"), str(REPO_ROOT / "infra"), env.get("PYTHONPATH", "")])
    env.pop("AWS_ENDPOINT_URL", None)
    began = time.monotonic()
    completed = subprocess.run(
        [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", *tests],
        cwd=MUTANTS,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    # pytest: 0 all passed (the mutant survives these tests too), 1 a test failed (killed); anything
    # else (a conftest or collection error) decides nothing for a mutant, but does show, when every
    # mutated function fails, that the mutated sources were imported.
    failed = completed.returncode == 1 if strict else completed.returncode != 0
    return (KILLED if failed else SURVIVED), round(time.monotonic() - began, 1)
