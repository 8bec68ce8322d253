"""The scratch workspace mutmut runs in (.mutate/), and the run itself.

mutmut derives a mutant's module from its path and strips only a leading `src/`, while converge's
packages live under shared/ and are installed editable. So the workspace holds a copy of the
mutated packages under src/, the tests and the template; mutmut copies that into
.mutate/mutants/ and puts mutants/src first on sys.path, ahead of the editable install's finder,
so the tests import the mutated converge and everything else (catalogue, localcloud) as installed.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path

from converge_mutation import ordering, saved
from converge_mutation.pragmas import exclude_calls
from converge_mutation.scope import REPO_ROOT, SOURCE_ROOT, Scope

WORKSPACE = REPO_ROOT / ".mutate"
MUTANTS = WORKSPACE / "mutants"
SCAFFOLD = REPO_ROOT / "infra" / "converge_cli" / "scaffold"
APPLICATION = SOURCE_ROOT / "converge" / "application"
"""converge's SAM application (its template and its functions' code roots), which template.yaml includes."""
RUNS = WORKSPACE / "runs.json"
KILL_LOG = WORKSPACE / "kills.jsonl"
"""Which test killed which mutant (converge_mutation.ordering): kept across fresh runs, since it decides
only the order in which a mutant's tests run."""
TIME_LOG = WORKSPACE / "times.jsonl"
"""How long each mutant's session ran (converge_mutation.ordering), since mutmut's fork server does not say."""
_SNAPSHOT = WORKSPACE / "sources.sha256"
STATS = MUTANTS / "mutmut-stats.json"
"""Which tests reach which function, as mutmut traced them (and each test's time): traced afresh when the code
changed, at the cost of one traced run of the tests."""
_IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", ".hypothesis", ".pytest_cache")


@dataclass(frozen=True)
class RunRecord:
    modules: list[str]  # what this run mutated (all of the scope for a full run)
    full: bool
    survivors: bool
    resumed: bool  # only the mutants the runs before had not reached
    seconds: float
    started: str
    max_children: int
    cpus: int
    mutmut: str
    exit_code: int


def packages(scope: Scope) -> list[str]:
    return sorted({module.split(".", 1)[0] for module in scope.modules})


def prepare(scope: Scope, fresh: bool) -> None:
    """Build the workspace afresh, or bring a kept one's sources and tests up to date.

    A run that is not a fresh one, on a machine with no workspace, starts from the results kept in the repository
    (converge_mutation.saved). A kept workspace keeps its results: mutmut hashes every function it mutates and
    clears the results of only those whose code changed (or that are new), so a run after a fix tests again just
    what the fix touched."""
    digest = _sources_digest(scope)
    if fresh or not MUTANTS.exists():
        # Each (mutant, test) once: a kill seen again in a later run adds nothing, and the log stays bounded.
        kills = dict.fromkeys(KILL_LOG.read_text().splitlines()) if KILL_LOG.exists() else {}
        shutil.rmtree(WORKSPACE, ignore_errors=True)
        WORKSPACE.mkdir()
        KILL_LOG.write_text("".join(f"{line}\n" for line in kills))
        _copy_sources(scope)
        _SNAPSHOT.write_text(digest)
        if not fresh:
            _restore_saved(scope)
    elif not _SNAPSHOT.exists() or _SNAPSHOT.read_text() != digest:
        _copy_sources(scope)
        # mutmut traces again only the tests it has not seen: an old test that reaches a new or changed function
        # would be missing from that function's tests, and its mutants reported surviving (or reached by none).
        STATS.unlink(missing_ok=True)
        _SNAPSHOT.write_text(digest)
    _copy_tests(scope)


def _restore_saved(scope: Scope) -> None:
    restored, runs = saved.restore(scope, MUTANTS, metadata.version("mutmut"), kills=KILL_LOG)
    if restored:
        RUNS.write_text(json.dumps(runs, indent=2) + "\n")
        print(f"converge_mutation: {restored} mutants' results restored from {saved.RESULTS.name}; the rest are run")


def _copy_tests(scope: Scope) -> None:
    # Tests are copied afresh every time: mutmut notices new tests and maps them to the functions they reach.
    # So is the rest of shared/ (the reference catalogue the tests drive): the tests find it on pytest's
    # pythonpath ("shared"), which in the workspace holds no converge to shadow the mutated one.
    # converge's application (its template and the functions' code directories) too: the tests' local cloud deploys
    # the template, which includes it. And the docs and the scaffold, which the public-API check reads.
    for name in ("tests", "shared", "docs", "infra"):
        shutil.rmtree(WORKSPACE / name, ignore_errors=True)
        shutil.rmtree(MUTANTS / name, ignore_errors=True)
    shutil.copytree(REPO_ROOT / "tests", WORKSPACE / "tests", ignore=_IGNORE)
    application = APPLICATION.relative_to(REPO_ROOT)
    shutil.copytree(REPO_ROOT / application, WORKSPACE / application, ignore=_IGNORE)
    shutil.copytree(REPO_ROOT / "docs", WORKSPACE / "docs", ignore=_IGNORE)
    shutil.copytree(SCAFFOLD, WORKSPACE / SCAFFOLD.relative_to(REPO_ROOT), ignore=_IGNORE)
    shutil.copy2(REPO_ROOT / "README.md", WORKSPACE / "README.md")
    for entry in sorted(SOURCE_ROOT.iterdir()):
        if entry.is_dir() and entry.name not in packages(scope) and (entry / "__init__.py").exists():
            shutil.copytree(entry, WORKSPACE / "shared" / entry.name, ignore=_IGNORE)
    shutil.copy2(REPO_ROOT / "template.yaml", WORKSPACE / "template.yaml")
    (WORKSPACE / "pyproject.toml").write_text(_pyproject(scope))


def _copy_sources(scope: Scope) -> None:
    """Copy the mutated packages into src/, the modules in scope with their log calls marked unmutated.

    A file gone from the sources goes from mutmut's copy too, where it would still be imported."""
    for package in packages(scope):
        shutil.rmtree(WORKSPACE / "src" / package, ignore_errors=True)
        shutil.copytree(SOURCE_ROOT / package, WORKSPACE / "src" / package, ignore=_IGNORE)
        mutated = MUTANTS / "src" / package
        for stale in sorted(mutated.rglob("*.py")) if mutated.exists() else []:
            if not (WORKSPACE / stale.relative_to(MUTANTS)).exists():
                stale.unlink()
    for module in scope.modules:
        # Written now, so newer than its mutants: mutmut mutates it again and compares each function's hash.
        copy = WORKSPACE / "src" / scope.path_of(module).relative_to(SOURCE_ROOT)
        copy.write_text(exclude_calls(copy.read_text(), scope.not_mutated)[0])


def _pyproject(scope: Scope) -> str:
    """The project's own pyproject (its pytest settings) plus mutmut's section, built from the scope."""
    own = (REPO_ROOT / "pyproject.toml").read_text()
    if "[tool.mutmut]" in own:
        raise SystemExit(
            "pyproject.toml has a [tool.mutmut] section; mutation testing is configured in tests/mutation.toml"
        )
    only = [f"src/{module.replace('.', '/')}.py" for module in scope.modules]
    return (
        own
        + "\n# Written by converge_mutation from tests/mutation.toml; not the project's own file.\n"
        + "[tool.mutmut]\n"
        + 'source_paths = ["src"]\n'
        + f"only_mutate = {json.dumps(only)}\n"
        + f"pytest_add_cli_args_test_selection = {json.dumps(scope.test_selection)}\n"
        # Each mutant's likeliest killers first, unit tests before integration tests; a warm fork server.
        + 'pytest_add_cli_args = ["-p", "no:cacheprovider", "-p", "converge_mutation.ordering"]\n'
        # Every mutant's session forks from one process that has collected the tests and filled their caches.
        + 'process_isolation = "forkserver"\nforkserver_warmup = "collect"\n'
        + 'also_copy = ["template.yaml", "shared", "README.md", "docs", "infra/converge_cli/scaffold"]\n'
        # A mutant that loops (a `<` made `<=` in a send loop) is stopped after 8 times its tests' estimated
        # time plus 40 s of CPU, not mutmut's default 30 times: a hung mutant would hold a worker for minutes.
        + "timeout_multiplier = 4.0\ntimeout_constant = 5.0\n"
        # Mutants mypy rejects are settled without a test run (see converge_mutation.typecheck).
        + f"type_check_command = {json.dumps([sys.executable, '-m', 'converge_mutation.typecheck', 'mypy'])}\n"
        # The workspace is not a repository of its own; git would describe the project's tree instead.
        + "use_git_change_detection = false\n"
    )


def _sources_digest(scope: Scope) -> str:
    digest = hashlib.sha256()
    for package in packages(scope):
        for file in sorted((SOURCE_ROOT / package).rglob("*.py")):
            if "__pycache__" not in file.parts:
                digest.update(str(file.relative_to(SOURCE_ROOT)).encode() + b"\0" + file.read_bytes())
    digest.update(json.dumps([scope.modules, scope.not_mutated]).encode())
    return digest.hexdigest()


INTERRUPTED = 2
"""mutmut's exit code of a mutant whose tests were stopped with its run: no result, so every later run tests it."""
RETESTED = frozenset({0, 5, 33, 35, INTERRUPTED})
"""mutmut's exit codes of the mutants `--survivors` tests again: survived, no tests, suspicious, interrupted."""


def run(scope: Scope, only: list[str], max_children: int, survivors: bool = False, resume: bool = False) -> RunRecord:
    """Run mutmut over the whole scope (a fresh workspace), over `only` (every mutant of those modules
    again, in the kept workspace), with `survivors` over what the last run left unkilled or unchecked (after
    new tests were written), or with `resume` over only what has no result yet: what a stopped run did not
    reach or was testing when stopped, and the mutants of functions changed since (see `prepare`).

    mutmut tests again every mutant it is named, and without names only those that have no result yet:
    `resume` and `survivors` name none."""
    full = not only and not survivors and not resume
    prepare(scope, fresh=full)
    if survivors:
        _forget(RETESTED)
    elif resume:
        _forget({INTERRUPTED})
    mutmut = _mutmut_command()
    names = [f"{module}.*" for module in only]
    started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    began = time.monotonic()
    # The tooling itself (converge_mutation: the ordering plugin, the type check) by absolute path, since
    # mutmut runs in the workspace.
    tooling = str(REPO_ROOT / "infra")
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    env["PYTHONPATH"] = os.pathsep.join([tooling, *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))])
    env.pop("AWS_ENDPOINT_URL", None)
    env[ordering.KILLS] = str(KILL_LOG)
    env[ordering.TIMES] = str(TIME_LOG)
    # A run stopped part way (SIGTERM to its process group, or Ctrl-C) is still recorded, with the signal's exit
    # code, so that the report lists it and how long it ran; its results stay in the workspace for RESUME=1.
    previous = signal.signal(signal.SIGTERM, _stop)
    try:
        command = [*mutmut, "run", "--max-children", str(max_children), *names]
        exit_code = subprocess.run(command, cwd=WORKSPACE, env=env).returncode
    except (_Stopped, KeyboardInterrupt) as stopped:
        exit_code = -signal.SIGTERM if isinstance(stopped, _Stopped) else -signal.SIGINT
    finally:
        signal.signal(signal.SIGTERM, previous)
    record = RunRecord(
        modules=list(only or scope.modules),
        full=full,
        survivors=survivors,
        resumed=resume,
        seconds=round(time.monotonic() - began, 1),
        started=started,
        max_children=max_children,
        cpus=os.cpu_count() or 1,
        mutmut=metadata.version("mutmut"),
        exit_code=exit_code,
    )
    runs = load_runs() if not full else []
    RUNS.write_text(json.dumps([*runs, asdict(record)], indent=2) + "\n")
    return record


class _Stopped(Exception):
    """The run was sent SIGTERM (mutmut, in the same process group, is stopped by it too)."""


def _stop(signum: int, frame: object) -> None:
    raise _Stopped


def note_recheck(tests: list[str], tried: int, killed: int, seconds: float, max_children: int) -> None:
    """Add a recheck (converge_mutation.recheck) to the runs the report lists."""
    record = {
        "recheck": {"tests": tests, "tried": tried, "killed": killed},
        "modules": [],
        "full": False,
        "survivors": False,
        "resumed": False,
        "seconds": round(seconds, 1),
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "max_children": max_children,
        "cpus": os.cpu_count() or 1,
        "mutmut": metadata.version("mutmut"),
        "exit_code": 0,
    }
    RUNS.write_text(json.dumps([*load_runs(), record], indent=2) + "\n")


def _forget(exit_codes: set[int] | frozenset[int]) -> None:
    """Clear the results of the mutants with these exit codes, so that mutmut tests them again (and nothing
    else: it tests only mutants with no result when given no names)."""
    for meta in MUTANTS.rglob("*.py.meta"):
        data = json.loads(meta.read_text())
        codes = data["exit_code_by_key"]
        for name, code in codes.items():
            if code in exit_codes:
                codes[name] = None
        meta.write_text(json.dumps(data, indent=4))


def load_runs() -> list[dict]:
    if not RUNS.exists():
        return []
    return list(json.loads(RUNS.read_text()))


def _mutmut_command() -> list[str]:
    # The console script (not `python -m mutmut`, which mutmut warns re-executes its main module).
    script = Path(sys.executable).with_name("mutmut")
    if script.exists():
        return [str(script)]
    found = shutil.which("mutmut")
    if found is None:
        raise SystemExit("mutmut is not installed here; `make mutate` installs it in .venv-mutate")
    return [found]
