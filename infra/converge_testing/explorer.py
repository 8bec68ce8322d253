"""The explorer over a team's own catalogue: Hypothesis draws histories of its jobs, faults and operators' actions
on a local cloud of its template, and checks converge's promise after every step; a break comes back shrunk.

    from converge_testing import explore, local_cloud

    with local_cloud() as cloud:
        found = explore(cloud, seed=7, budget=30)     # histories for 30 s at most; raises Broken on a break
        print(found.summary())

What it plays (explore_machine.py), what it holds the catalogue to and the kinds of break it names
(explore_promise.py), and how a job's effects are known (its clean run: explore_plan.py) are in those modules;
docs/testing.md has the page. A run is batches of histories, each batch from its own seed (`seed`, `seed + 1`, ...):
a break names the seed of its batch, and `explore(cloud, seed=that)` runs that batch again first.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import re
import time
import traceback
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, Phase, core, settings
from hypothesis.internal.conjecture import engine
from hypothesis.reporting import with_reporter
from hypothesis.stateful import get_state_machine_test

from converge.flow.registry import Registry
from converge.observability import logger
from converge_testing import explore_promise as promise
from converge_testing.explore_machine import GROUPS, RULES, Progress, enqueue_rule, machine_for, set_toggles
from converge_testing.explore_plan import Plan
from localcloud import sqs_time
from localcloud.scenario import enqueueable
from localcloud.speedups import fast_moto

SEED_VARIABLE = "CONVERGE_EXPLORE_SEED"
"""The environment variable a run takes its seed from when none is given (a replay in CI: set it, run again)."""
HISTORIES_PER_BATCH = 10
STEPS = 20
SHRINK_SECONDS = 60


class Broken(AssertionError):
    """The explorer found a break: its kind (a class of explore_promise), what was seen, the shrunk history as its
    steps, and the seed that finds it again."""

    def __init__(self, kind: str, detail: str, steps: list[str], seed: int, exploration: Exploration) -> None:
        """`exploration.first_break`: after how many histories and seconds it was first seen (before shrinking)."""
        self.kind, self.detail, self.steps, self.seed, self.exploration = kind, detail, steps, seed, exploration
        super().__init__(self.report())

    @property
    def history(self) -> str:
        """The shrunk history, one numbered step a line (`2. worker_dies_after_effect(operation=operations_0)`)."""
        return "\n".join(f"{number:>3}. {step}" for number, step in enumerate(self.steps, 1))

    def report(self) -> str:
        first = self.exploration.first_break
        found = f"first seen in history {first[0]} after {first[1]:.1f} s; " if first else ""
        shrunk = f"shrunk to {plural(len(self.steps), 'step', 'steps')}"
        return (
            f"{self.kind}: {self.detail}\n\nthe history, {shrunk}:\n{self.history}\n\n"
            f"{found}{_histories(self.exploration.histories)} in {self.exploration.seconds:.1f} s with shrinking\n"
            f"replay: seed {self.seed} (`converge explore --seed {self.seed}`, `pytest --converge-seed {self.seed}`, "
            f"explore(cloud, seed={self.seed}) or {SEED_VARIABLE}={self.seed})"
        )


@dataclass
class Exploration:
    """What a run did: histories and steps, in how long, from which seed; each job's clean run."""

    seed: int
    histories: int = 0
    steps: int = 0
    seconds: float = 0.0
    batches: int = 0
    clean: dict[str, dict[str, int]] = field(default_factory=dict)
    not_held: dict[str, str] = field(default_factory=dict)
    rules: list[str] = field(default_factory=list)
    """The rules drawn from (one per job a producer starts enqueues it: `producer_enqueues_<job type>`)."""
    first_break: tuple[int, float] | None = None
    """(histories, seconds) when a break was first seen, before shrinking; None if none was."""

    def summary(self) -> str:
        jobs = plural(len(self.clean), "job", "jobs")
        return (
            f"the promise held: {_histories(self.histories)} ({self.steps} steps) in {self.seconds:.1f} s from "
            f"seed {self.seed}; {jobs} held to {'its' if len(self.clean) == 1 else 'their'} clean run"
            + (f", {len(self.not_held)} not ({', '.join(sorted(self.not_held))})" if self.not_held else "")
        )


def explore(
    cloud: Any,
    *,
    seed: int | None = None,
    budget: float = 60.0,
    histories: int | None = None,
    steps: int = STEPS,
    jobs: Iterable[str] | None = None,
    leave_out: Iterable[str] = (),
    batch: int = HISTORIES_PER_BATCH,
    shrink_seconds: int = SHRINK_SECONDS,
    progress: Callable[[str], None] | None = None,
) -> Exploration:
    """Explore the catalogue the cloud runs, batch after batch of `batch` histories of at most `steps` steps, until
    `budget` seconds have passed (a batch under way finishes) or `histories` have run. Raises `Broken` on the first
    break, shrunk; returns what it did otherwise.

    `seed`: the first batch's (default: `CONVERGE_EXPLORE_SEED`, else random). `jobs`: the job types producers
    enqueue (default: every job a producer starts). `leave_out`: rules or groups of rules not to draw (`"faults"`,
    `"operators"`, `"kill_switch_flips"`, ...). `progress`: told, in a line, of the clean runs, each batch and a
    break found (before its shrinking). A name that is none (job, rule, group) raises ValueError before anything
    runs (`check_options`, the same checks without a cloud)."""
    plan, left_out = _checked(cloud.converge.registry, jobs, leave_out)
    first = seed if seed is not None else _seed_from_environment()
    result = Exploration(first)
    tell = progress or _untold

    def broke(kind: str, seen: int, seconds: float) -> None:
        tell(f"{kind} after {_histories(seen)} ({seconds:.1f} s): shrinking its history (at most {shrink_seconds} s)")

    counted = Progress(on_break=broke)
    started = counted.started
    with _quiet_logs(), with_reporter(_unprinted), fast_moto(), sqs_time.frozen(), cloud.faults(seed=0) as faults:
        set_toggles(cloud, plan.toggles, "on")
        problems = plan.calibrate(cloud, counted.run)
        result.clean, result.not_held = plan.clean, plan.not_held
        if problems:
            kind = "MissingGrant" if cloud.denials else "CleanRunFailed"
            _tally(result, counted, started)
            raise Broken(kind, "; ".join(problems), [f"{job}: its example, once, no fault" for job in plan.job_types],
                         first, result)  # fmt: skip
        jobs_run, seconds = plural(len(plan.clean), "job", "jobs"), time.perf_counter() - started
        tell(f"clean runs: {jobs_run}, each once with no fault ({seconds:.1f} s)")
        machine = machine_for(cloud, plan, faults, counted, left_out)
        result.rules = list(machine.drawn_rules)
        shrinking, forced = engine.MAX_SHRINKING_SECONDS, core.global_force_seed
        engine.MAX_SHRINKING_SECONDS = shrink_seconds
        try:
            while time.perf_counter() - started < budget and (histories is None or counted.histories < histories):
                batch_seed = first + result.batches
                size = batch if histories is None else min(batch, histories - counted.histories)
                test = get_state_machine_test(machine, settings=_settings(size, steps))
                core.global_force_seed = batch_seed  # type: ignore[assignment]  # (as --hypothesis-seed sets it)
                try:
                    test()
                except Exception as found:  # a break, or a step that raised: each reported shrunk
                    _tally(result, counted, started)
                    kind = (
                        type(found).__name__ if isinstance(found, promise.Break) else f"Raised {type(found).__name__}"
                    )
                    detail = str(found).split("\n", 1)[0]
                    raise Broken(kind, detail, _steps_of(found), batch_seed, result) from None
                result.batches += 1
                seconds = time.perf_counter() - started
                tell(f"{_histories(counted.histories)} ({counted.steps} steps) in {seconds:.1f} s: the promise held "
                     f"(batch {result.batches}, seed {batch_seed})")  # fmt: skip
        finally:
            engine.MAX_SHRINKING_SECONDS = shrinking
            core.global_force_seed = forced
            _tally(result, counted, started)
            cloud.effects.clear()  # the histories' effects are theirs: a test after them on this cloud counts its own
    return result


def _settings(histories: int, steps: int) -> settings:
    return settings(
        max_examples=histories,
        stateful_step_count=steps,
        deadline=None,
        database=None,
        derandomize=False,
        print_blob=False,
        report_multiple_bugs=False,
        phases=(Phase.explicit, Phase.generate, Phase.shrink),
        suppress_health_check=list(HealthCheck),
    )


def _tally(result: Exploration, counted: Progress, started: float) -> None:
    result.histories, result.steps, result.first_break = counted.histories, counted.steps, counted.first_break
    result.seconds = time.perf_counter() - started


STEP = re.compile(r"^(?:(?P<made>[\w, ]+) = )?state\.(?P<call>\w+\(.*\))$")
QUIET = "teardown(): faults off, every switch on, the clock past every wait, everything drained; the whole promise"


def _steps_of(found: BaseException) -> list[str]:
    """The shrunk history's steps, from Hypothesis' notes on the failure (`operations_0 = state.rule(...)` a line):
    `rule(...) -> operations_0`, each rule named for what happens (explore_machine's docstring)."""
    notes = [note for note in getattr(found, "__notes__", []) if note.strip()]
    lines = [line.strip() for note in notes for line in note.splitlines()]
    steps = []
    for line in lines:
        step = STEP.match(line)
        if step is None or step["call"] == "promise_kept()":
            continue
        call = QUIET if step["call"] == "teardown()" else step["call"]
        steps.append(f"{call} -> {step['made']}" if step["made"] else call)
    return steps or lines or ["".join(traceback.format_exception_only(found)).strip()]


def check_options(registry: Registry, *, jobs: Iterable[str] | None = None, leave_out: Iterable[str] = ()) -> None:
    """What `explore` checks of its options before anything runs: every job named is one a producer starts, every
    rule or group left out is the explorer's. Raises ValueError saying which are."""
    _checked(registry, jobs, leave_out)


def _checked(registry: Registry, jobs: Iterable[str] | None, leave_out: Iterable[str]) -> tuple[Plan, frozenset[str]]:
    plan = Plan.of(registry, None if jobs is None else list(jobs))
    job_rules = {enqueue_rule(binding.job_type) for binding in enqueueable(registry)}
    out: set[str] = set()
    for name in [leave_out] if isinstance(leave_out, str) else leave_out:
        if name in GROUPS:
            out |= set(GROUPS[name])
        elif name in RULES or name in job_rules:
            out.add(name)
        else:
            known = ", ".join([*GROUPS, *sorted(RULES | job_rules)])
            raise ValueError(f"{name!r} is no rule or group of the explorer's: {known}")
    return plan, frozenset(out)


def _untold(_line: str) -> None:
    """No one to tell of the run's progress."""


def _unprinted(_text: object) -> None:
    """Hypothesis' own report (the failing history, a warning that shrinking stopped): a break carries the history."""


def _seed_from_environment() -> int:
    named = os.environ.get(SEED_VARIABLE, "").strip()
    if not named:
        return random.SystemRandom().randrange(2**32)
    try:
        return int(named)
    except ValueError:
        raise ValueError(f"{SEED_VARIABLE}={named!r} is not an integer seed") from None


@contextlib.contextmanager
def _quiet_logs() -> Iterator[None]:
    """converge's own logs, silenced for the run: thousands of steps log millions of lines; a break says what broke."""
    level = logger.log_level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)


def plural(number: int, one: str, many: str) -> str:
    """`1 history`, `3 histories`."""
    return f"{number} {one if number == 1 else many}"


def _histories(number: int) -> str:
    return plural(number, "history", "histories")
