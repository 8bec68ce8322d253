"""`converge explore`: the explorer over the project's own catalogue, on the in-process local cloud.

Histories of the catalogue's jobs (their example payloads), faults, kill switches, operators' actions and the clock,
drawn by Hypothesis and checked after every step against converge's promise (converge_testing.explorer, documented
in docs/testing.md). Progress goes to stderr, the result to stdout. Exit 0 when the promise held for the whole run;
1 on a break, printing its kind, the shrunk history as numbered steps and the seed that finds it again; 2 when the
request is refused (a job or rule that is none, a catalogue that does not import, no project). Needs the `test`
extra (the local cloud, Hypothesis).
"""

from __future__ import annotations

import time
import traceback
from typing import Annotated, Any

import typer

from converge.flow.registry import Registry, load_catalogue
from converge_cli.support.errors import UsageError, fails_cleanly
from converge_cli.support.options import Json
from converge_cli.support.output import print_json, say, stderr, stdout, styled
from localcloud.project import Project, ProjectError, current

DEFAULT_BUDGET = 60.0
TEST_EXTRA = "`converge explore` needs the local cloud and Hypothesis: pip install 'converge-jobs[test]'"

EXPLORE_HELP = (
    "Explore the project's catalogue: histories of its jobs under faults, kill switches, operators' actions and the "
    "clock, on the local cloud, each step checked against converge's promise.\n\n"
    "Each job a producer starts is enqueued with its binding's example payload. Each first runs once with no fault "
    "(its clean run), and every operation is held to it: no effect twice beyond its policy, none lost, nothing left "
    "unlisted. A break prints its kind, the history shrunk to the steps that matter, and the seed that finds it "
    "again.\n\n"
    "Examples: converge explore (60 s from a random seed); converge explore --seed 7 --examples 200; converge "
    "explore --job orders.confirm.v1 --leave-out operators --budget 300.\n\n"
    "Exit codes: 0 the promise held; 1 a break (or a job's clean run failed); 2 a refused request (a job or rule "
    'that is none, a catalogue that does not import, no project). docs/testing.md, "The explorer", says more.'
)


@fails_cleanly
def explore_command(
    seed: Annotated[
        int | None,
        typer.Option("--seed", help="The first batch's seed; a break names the seed that replays it. Default: random."),
    ] = None,
    examples: Annotated[
        int | None,
        typer.Option("--examples", "--histories", "-n", min=1, help="Stop after this many histories (examples)."),
    ] = None,
    budget: Annotated[
        float | None,
        typer.Option(
            "--budget",
            min=1,
            help="Stop after this many seconds (the batch under way finishes). Default: 60, none with --examples.",
        ),
    ] = None,
    steps: Annotated[int, typer.Option("--steps", min=1, max=200, help="Steps per history at most.")] = 20,
    jobs: Annotated[
        list[str] | None,
        typer.Option("--job", help="Only this job type is enqueued by producers; repeatable. Default: every one."),
    ] = None,
    leave_out: Annotated[
        list[str] | None,
        typer.Option("--leave-out", help="A rule or group of rules not to draw (faults, operators, ...); repeatable."),
    ] = None,
    as_json: Json = False,
) -> None:
    """The explorer over the project's catalogue (EXPLORE_HELP says what it does)."""
    try:
        from converge_testing import Broken, explore, local_cloud
        from converge_testing.explorer import check_options
    except ModuleNotFoundError as missing:
        raise UsageError(f"{TEST_EXTRA} ({missing})") from None
    project = current()
    try:  # refused before the cloud is deployed: seconds a typo should not cost
        check_options(_registry_of(project), jobs=jobs, leave_out=leave_out or ())
    except ValueError as wrong:
        raise UsageError(str(wrong)) from None
    progress = None if as_json else _teller()
    if progress is not None:
        progress(f"deploying {project.template.name} on the local cloud (catalogue {project.catalogue})")
    with local_cloud(project.template, catalogue=project.catalogue) as cloud:
        try:
            done = explore(
                cloud, seed=seed, budget=_seconds(budget, examples), histories=examples, steps=steps, jobs=jobs,
                leave_out=leave_out or (), progress=progress,
            )  # fmt: skip
            found = None
        except Broken as broken:
            found, done = broken, broken.exploration
    if as_json:
        _print_json(done, found)
    elif found is None:
        say(stdout(), styled("✓ ", "green"), done.summary())
    else:
        say(stdout(), styled(f"✗ {found.kind}", "bold red"), found.report().removeprefix(found.kind))
    raise typer.Exit(0 if found is None else 1)


def _seconds(budget: float | None, examples: int | None) -> float:
    """The run's time budget: the one given; else none when a number of histories is (a team asking for 200 gets
    200), else a minute."""
    if budget is not None:
        return budget
    return float("inf") if examples is not None else DEFAULT_BUDGET


def _registry_of(project: Project) -> Registry:
    """The catalogue's registry; a catalogue that does not import (whatever it raises) is the project's error."""
    if not project.catalogue:
        raise ProjectError(f"the template {project.template} names no job catalogue (CatalogueModule): none to explore")
    try:
        return load_catalogue(project.catalogue)
    except Exception as failed:  # a SyntaxError, an ImportError, a catalogue's own error at import: the team's code
        raise ProjectError(
            f"the job catalogue {project.catalogue!r} does not import: {type(failed).__name__}: {failed}"
            f"{_where(failed)}"
        ) from None


def _where(failed: BaseException) -> str:
    """Where the catalogue failed: the line of the team's code that raised (a SyntaxError names its own)."""
    if isinstance(failed, SyntaxError):
        return ""  # (its message names the file and line already)
    frames = traceback.extract_tb(failed.__traceback__)
    return f" at {frames[-1].filename}, line {frames[-1].lineno}" if frames else ""


def _teller() -> Any:
    console, started = stderr(), time.perf_counter()

    def tell(line: str) -> None:
        say(console, styled(f"[{time.perf_counter() - started:5.1f} s] ", "dim"), line)

    return tell


def _print_json(done: Any, found: Any) -> None:
    print_json(
        {
            "held": found is None,
            "seed": done.seed,
            "histories": done.histories,
            "steps": done.steps,
            "seconds": round(done.seconds, 1),
            "first_break": None if done.first_break is None else list(done.first_break),
            "clean_runs": done.clean,
            "not_held": done.not_held,
            "break": None
            if found is None
            else {"kind": found.kind, "detail": found.detail, "steps": found.steps, "seed": found.seed},
        }
    )
