"""The explorer's power, measured: each kept break brought back in a copy of the code, and the explorer let loose on it.

`make explore-power` runs this: every patch in tests/explore/breaks/ is applied to its own throwaway copy of the
tree (under the system's temporary directory, never the working tree), and the explorer runs against that copy as
`make explore` runs it (random histories from a fresh seed it prints, no history steering it, no ignore list) until
it meets a break or its budget is spent. The report says, per patch: found or not, which kind of break, the time to
find it (its first failing history, before shrinking), the shrunk history, and the seed that replays the run. It is
written to docs/explorer-power.md and docs/explorer-power.json (see docs/explorer-power.md).

    python -m tests.explore.power [--budget SECONDS] [-j JOBS] [--only NAME ...] [--no-write | --resume]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import hashlib
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tests.explore import report

ROOT = Path(__file__).resolve().parents[2]
BREAKS = ROOT / "tests" / "explore" / "breaks"
SHRINK_SECONDS = 120
"""Once found, a break is shrunk for at most this long by default (beyond its budget to find it): a history printed
as it stands when shrinking stops is still one that replays."""


@dataclass(frozen=True)
class Patch:
    """One kept break: its file, what it names, and the kinds of break the explorer should raise for it."""

    path: Path
    name: str
    title: str
    found_by: str
    expect: tuple[str, ...]

    @classmethod
    def read(cls, path: Path) -> Patch:
        head = path.read_text(encoding="utf-8").split("\ndiff --git", 1)[0]
        fields = dict(re.findall(r"^(Break|Found|Expect): *(.*)$", head, flags=re.MULTILINE))
        missing = [name for name in ("Break", "Found", "Expect") if not fields.get(name)]
        if missing:
            raise ValueError(f"{path.name}: its header has no {', '.join(missing)} line (see docs/explorer-power.md)")
        expect = tuple(kind.strip() for kind in fields["Expect"].split(",") if kind.strip())
        return cls(path, path.stem, fields["Break"], fields["Found"], expect)

    def digest(self) -> str:
        return hashlib.sha256(self.path.read_bytes()).hexdigest()[:16]


def patches(only: list[str] | None = None) -> list[Patch]:
    """Every kept break, by name (or the ones named, each of which must exist)."""
    kept = [Patch.read(path) for path in sorted(BREAKS.glob("*.patch"))]
    if only:
        unknown = sorted(set(only) - {p.name for p in kept})
        if unknown:
            raise SystemExit(f"explore-power: no such patch in {BREAKS}: {', '.join(unknown)}")
        kept = [p for p in kept if p.name in only]
    return kept


def copy_of_the_tree(into: Path) -> None:
    """The working tree's tracked and untracked (not ignored) files, as they stand now, copied into `into`."""
    for name in _listed():
        source = ROOT / name
        if source.is_file():
            target = into / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)


def _listed() -> list[str]:
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        check=True,
        capture_output=True,
    ).stdout.split(b"\0")
    return [os.fsdecode(name) for name in listed if name]


def _explorer_runs(name: str) -> bool:
    """Whether a file of the tree is one the explorer's run can read: not the docs (which a run writes), nor the kept
    patches (each outcome carries its own patch's digest), nor the tests of other parts (the explorer imports only
    its own directory and the shared modules at the top of tests/)."""
    if name.startswith(("docs/", "tests/explore/breaks/")) or name.endswith(".md"):
        return False
    parts = name.split("/")
    if parts[0] == "tests":
        return parts[1] == "explore" if len(parts) > 2 else name.endswith(".py")
    return True


def tree_digest() -> str:
    """What the explorer runs, as it stands (`_explorer_runs`): a resumed run goes on only on the same tree."""
    digest = hashlib.sha256()
    for name in sorted(_listed()):
        if not _explorer_runs(name):
            continue
        path = ROOT / name
        if path.is_file():
            digest.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def apply(patch: Patch, tree: Path, check: bool = False) -> subprocess.CompletedProcess[str]:
    """`git apply` the patch to `tree` (with --check: only whether it applies); its output says why not."""
    command = ["git", "apply", *(["--check"] if check else []), str(patch.path)]
    return subprocess.run(command, cwd=tree, capture_output=True, text=True)


@dataclass
class Outcome:
    name: str
    title: str
    expect: list[str]
    seed: int
    budget_s: float
    found: bool = False
    kind: str | None = None
    expected_kind: bool = False
    seconds_to_find: float | None = None
    histories: int | None = None
    histories_to_find: int | None = None
    history: str | None = None
    note: str = ""
    drawn_differently: list[str] = field(default_factory=list)
    """What Hypothesis said of each batch ended by a history drawn differently (its steps, the strategy drawn)."""
    patch_sha: str = ""
    sitting: int = 1


def measure(patch: Patch, budget: float, seed: int, log: Path, shrink: float = SHRINK_SECONDS) -> Outcome:
    """Bring the break back in a throwaway copy, explore it from `seed` for `budget` seconds, and say what was found."""
    outcome = Outcome(patch.name, patch.title, list(patch.expect), seed, budget, patch_sha=patch.digest())
    with tempfile.TemporaryDirectory(prefix=f"explore-power-{patch.name}-") as scratch:
        tree = Path(scratch) / "tree"
        copy_of_the_tree(tree)
        applied = apply(patch, tree)
        if applied.returncode != 0:
            outcome.note = f"the patch no longer applies: {applied.stderr.strip()}"
            return outcome
        first = Path(scratch) / "first-break"
        env = {
            **os.environ,
            # The copy's code first: the editable install points at the working tree, PYTHONPATH comes before it.
            "PYTHONPATH": os.pathsep.join(str(tree / part) for part in ("shared", "infra", "benchmarks", ".")),
            "EXPLORE": "1",
            "EXPLORE_SEED": str(seed),
            "EXPLORE_SECONDS": str(budget),
            "EXPLORE_SHRINK_SECONDS": str(int(shrink)),
            "EXPLORE_STOP_AT_BREAK": "1",
            "EXPLORE_FIRST_BREAK": str(first),
            # One order for sets of strings in every run: a history found here replays in a fresh process as it ran
            # (its operation ids from the same history number), with the local cloud's time standing still
            "PYTHONHASHSEED": "0",
        }
        env.pop("EXPLORE_IGNORE", None)
        env.pop("EXPLORE_EXAMPLES", None)
        command = [
            sys.executable,
            *(["-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", "-p", "no:logging"]),
            "tests/explore/test_explore.py::test_explore_at_length",
            f"--hypothesis-seed={seed}",
        ]
        started = time.time()
        with log.open("w", encoding="utf-8") as out:
            process = subprocess.Popen(
                command, cwd=tree, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
            _RUNNING.add(process.pid)
            # The run stops between batches of histories; a batch may outlast the budget, so it is cut off then
            # (after the first break's shrinking, if one was found in time).
            deadline = started + budget + 5
            while process.poll() is None:
                if first.exists():
                    deadline = max(deadline, first.stat().st_mtime + shrink + 30)
                if time.time() > deadline:
                    os.killpg(process.pid, signal.SIGTERM)
                    try:
                        process.wait(timeout=20)
                    except subprocess.TimeoutExpired:
                        os.killpg(process.pid, signal.SIGKILL)
                        process.wait()
                    outcome.note = "cut off at its budget"
                    break
                time.sleep(1)
            _RUNNING.discard(process.pid)
        output = log.read_text(encoding="utf-8", errors="replace")
        outcome.histories = report.histories_explored(output) or report.histories_started(output)
        outcome.histories_to_find = report.histories_to_find(output)
        drawn_differently = report.batches_drawn_differently(output)
        outcome.drawn_differently = report.drawn_differently(output)
        if drawn_differently:
            said = f"{drawn_differently} batch(es) ended by a history drawn differently twice (the run went on)"
            outcome.note = f"{outcome.note}; {said}" if outcome.note else said
        if first.exists() and first.stat().st_mtime - started <= budget:
            outcome.found = True
            outcome.kind = first.read_text(encoding="utf-8").strip()
            outcome.expected_kind = outcome.kind in patch.expect
            outcome.seconds_to_find = round(first.stat().st_mtime - started, 1)
            outcome.history = report.shrunk_history(output)
            if outcome.history is None:
                outcome.note = "found; its shrinking was cut off (the log holds the history as it stood)"
        elif first.exists():
            outcome.note = f"a break ({first.read_text(encoding='utf-8').strip()}) met after the budget"
    return outcome


REPORT_JSON = ROOT / "docs" / "explorer-power.json"
REPORT_PAGE = ROOT / "docs" / "explorer-power.md"
_RUNNING: set[int] = set()
"""The process groups of the measurements under way, stopped with the run."""


def _stop_measurements(signum: int, frame: object) -> None:
    for group in list(_RUNNING):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group, signal.SIGTERM)
    raise SystemExit(f"explore-power: stopped (signal {signum}); what was measured is written, RESUME=1 goes on")


def resumable(path: Path, tree: str, budget: float, shrink: float) -> dict:
    """The run a `--resume` goes on with: the one in `path`, if it measured this tree with this budget and shrink
    (otherwise SystemExit saying why: a report must not mix two trees or two budgets)."""
    if not path.exists():
        raise SystemExit(f"explore-power: nothing to resume: {path.name} does not exist")
    run = json.loads(path.read_text(encoding="utf-8"))
    if run.get("tree") != tree:
        raise SystemExit(
            f"explore-power: the tree changed since the run in {path.name} (it measured {run.get('tree') or 'an'}"
            f" unnamed tree, this is {tree}): a resumed run would mix two trees; run it afresh"
        )
    if (run.get("budget_s"), run.get("shrink_s")) != (budget, shrink):
        raise SystemExit(
            f"explore-power: the run in {path.name} gave each break {run.get('budget_s')} s to find it and"
            f" {run.get('shrink_s')} s to shrink it, not {budget} s and {shrink} s: resume it with the same budget"
        )
    return run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make explore-power", description=__doc__.split("\n\n")[0])
    parser.add_argument("--budget", type=float, default=600, help="seconds per break to find it (default 600)")
    parser.add_argument("--shrink", type=float, default=SHRINK_SECONDS, help="seconds to shrink a break found")
    parser.add_argument("-j", "--jobs", type=int, default=2, help="breaks explored at once (default 2)")
    parser.add_argument("--seed", type=int, help="the first break's seed (each next break takes the next one)")
    parser.add_argument("--only", nargs="*", help="these patches only, by name (the file's name without .patch)")
    parser.add_argument("--no-write", action="store_true", help="print the report; leave docs/ unchanged")
    parser.add_argument(
        "--resume",
        action="store_true",
        help="go on with the run in docs/explorer-power.json (the same tree and budget): only the breaks it has not"
        " measured",
    )
    args = parser.parse_args(argv)
    if args.budget <= 0 or args.jobs < 1:
        parser.error("--budget must be positive and -j at least 1")
    if args.resume and (args.seed is not None or args.no_write):
        parser.error("--resume goes on with the written run's seeds and writes its report: no --seed or --no-write")
    kept = patches(args.only)
    not_applying = [(p.name, apply(p, ROOT, check=True).stderr.strip()) for p in kept]
    not_applying = [(name, why) for name, why in not_applying if why]
    if not_applying:
        for name, why in not_applying:
            print(f"explore-power: {name} no longer applies: {why}", file=sys.stderr)
        return 2
    tree = tree_digest()
    if args.resume:
        run = resumable(REPORT_JSON, tree, args.budget, args.shrink)
        digests = {p.name: p.digest() for p in kept}
        # A break measured with its patch as it stands is kept; a patch changed since is measured again.
        run["breaks"] = [b for b in run["breaks"] if digests.get(b["name"]) == b.get("patch_sha")]
        first_seed = int(run["first_seed"])
    else:
        first_seed = args.seed if args.seed is not None else random.getrandbits(31)
        run = {"tree": tree, "budget_s": args.budget, "shrink_s": args.shrink, "first_seed": first_seed}
        run.update(breaks=[], sittings=[])
    measured = {b["name"] for b in run["breaks"]}
    todo = [(first_seed + i, patch) for i, patch in enumerate(kept) if patch.name not in measured]
    run["asked"] = len(kept)
    logs = Path(tempfile.mkdtemp(prefix="explore-power-logs-"))
    started, load = time.time(), os.getloadavg()
    sitting = {"started": _utc(started), "minutes": 0.0, "jobs": args.jobs, "load_before": _rounded(load)}
    run["sittings"] = [*run.get("sittings", []), sitting]
    print(
        f"explore-power: {len(todo)} breaks to measure ({len(measured)} of {len(kept)} already measured on this tree),"
        f" {args.budget:.0f} s each, {args.jobs} at once, first seed {first_seed} (--seed {first_seed} replays the"
        f" run); logs in {logs}",
        flush=True,
    )
    previous = {stop: signal.signal(stop, _stop_measurements) for stop in (signal.SIGTERM, signal.SIGINT)}
    try:
        _measure_all(run, todo, args, logs, started)
    finally:
        for stop, handler in previous.items():
            signal.signal(stop, handler)
    _close_sitting(run, sitting, started, args.jobs)
    if args.no_write:
        print(report.page(run))
    else:
        _write(run)
        print("explore-power: report written to docs/explorer-power.md and docs/explorer-power.json", flush=True)
    found = sum(b["found"] and b["expected_kind"] for b in run["breaks"])
    print(
        f"explore-power: {found} of {len(run['breaks'])} breaks found (the kind they expect) within"
        f" {args.budget:.0f} s; {len(run['breaks'])} of {len(kept)} measured",
        flush=True,
    )
    return 0 if found == len(kept) else 1


def _measure_all(
    run: dict, todo: list[tuple[int, Patch]], args: argparse.Namespace, logs: Path, started: float
) -> None:
    """Measure each break to do, `args.jobs` at once, adding each outcome to `run` (and writing it) as it ends."""
    sitting = run["sittings"][-1]
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        running = {
            pool.submit(measure, patch, args.budget, seed, logs / f"{patch.name}.log", args.shrink): patch
            for seed, patch in todo
        }
        for count, done in enumerate(concurrent.futures.as_completed(running), start=1):
            outcome = done.result()
            outcome.sitting = len(run["sittings"])
            run["breaks"] = sorted([*run["breaks"], asdict(outcome)], key=lambda b: b["name"])
            where = f"{outcome.histories_to_find or outcome.histories or 0} histories, seed {outcome.seed}"
            said = (
                f"found {outcome.kind} in {outcome.seconds_to_find:.0f} s"
                if outcome.found
                else f"not found in {outcome.budget_s:.0f} s"
            )
            print(
                f"explore-power: [{count}/{len(todo)}] {outcome.name}: {said}"
                f" ({where}){' - ' + outcome.note if outcome.note else ''}",
                flush=True,
            )
            # Written as each break ends, so that a run stopped part way keeps what it measured (RESUME=1 goes on).
            _close_sitting(run, sitting, started, args.jobs)
            if not args.no_write:
                _write(run)


def _utc(moment: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(moment))


def _rounded(load: tuple[float, float, float]) -> list[float]:
    return [round(x, 2) for x in load]


def _close_sitting(run: dict, sitting: dict, started: float, jobs: int) -> None:
    """The sitting's time and load as it stands, and the run's figures across its sittings."""
    sitting.update(minutes=round((time.time() - started) / 60, 1), load_after=_rounded(os.getloadavg()))
    sittings = run["sittings"]
    run.update(
        started=sittings[0]["started"],
        minutes=round(sum(s["minutes"] for s in sittings), 1),
        jobs=jobs,
        cores=os.cpu_count(),
        load_before=sittings[0]["load_before"],
        load_after=sitting["load_after"],
    )


def _write(run: dict) -> None:
    REPORT_JSON.write_text(json.dumps(run, indent=2) + "\n", encoding="utf-8")
    report.write(REPORT_PAGE, report.page(run))


if __name__ == "__main__":
    raise SystemExit(main())
