"""`converge demo`: the whole pipeline on the in-process local cloud (demo_run.py), or under faults (demo_chaos.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

import typer

from converge_cli.support.errors import fails_cleanly
from converge_cli.support.options import Json
from converge_cli.support.output import stdout

Chaos = Annotated[bool, typer.Option("--chaos", help="Inject faults and check the invariants under load.")]


def demo_command(cli: typer.Typer) -> Callable[..., None]:
    """The `demo` command of `cli`, the converge command: chaos lists the operations it left through it, as an
    operator would (`converge ops list`), and the demo decides its approvals through it (`converge signal`)."""

    @fails_cleanly
    def demo(
        chaos: Annotated[
            bool, typer.Option("--chaos", help="Inject faults and check the invariants under load.")
        ] = False,
        seed: Annotated[int, typer.Option("--seed", help="Random seed for --chaos.")] = 7,
        jobs: Annotated[int, typer.Option("--jobs", min=1, help="How many jobs --chaos runs.")] = 500,
        as_json: Json = False,
    ) -> None:
        """The main job: the whole pipeline on the in-process local cloud, with a report that checks itself."""
        # Each prints its own report (tables, or JSON with --json).
        if chaos:
            from converge_cli.commands.demo_chaos import run_chaos

            _, ok = run_chaos(seed=seed, jobs=jobs, console=stdout(), as_json=as_json, cli=cli)
        else:
            from converge_cli.commands.demo_run import run_demo

            _, ok = run_demo(stdout(), as_json, cli)
        raise typer.Exit(0 if ok else 1)

    return demo
