"""The `converge` command: enqueue, inspect and operate converge deployments, or run them locally.

The one place the command is assembled: every command lives in `commands/` (`converge X` in commands/X.py, a
command's parts beside it as X_part.py) and is registered here, in the order `converge --help` lists them. What
the commands share is in `support/`; the console's web page in `console/`. Commands this distribution declares
as `converge.commands` entry points (the benchmark's `converge bench`) are registered here too, so the command
line imports nothing of them.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, distribution

import typer

from converge_cli.commands.batches import batches_app
from converge_cli.commands.cancel import cancel_bulk_command, cancel_command
from converge_cli.commands.console import console
from converge_cli.commands.demo import demo_command
from converge_cli.commands.dlq import dlq_app
from converge_cli.commands.dlq_messages import register as register_message_commands
from converge_cli.commands.enqueue import enqueue
from converge_cli.commands.explore import EXPLORE_HELP, explore_command
from converge_cli.commands.init import init
from converge_cli.commands.jobs import jobs_app
from converge_cli.commands.limits import limits_app
from converge_cli.commands.link import link_command
from converge_cli.commands.local import local_app
from converge_cli.commands.ops import ops_app
from converge_cli.commands.ops_actions import register as register_action_commands
from converge_cli.commands.signal import signal_command
from converge_cli.commands.status import STATUS, STATUS_HELP
from converge_cli.commands.toggles import toggles_app
from converge_cli.support.app import new_app

DISTRIBUTION = "converge-jobs"
COMMANDS_GROUP = "converge.commands"


def declared_commands() -> list[tuple[str, object]]:
    """The commands the installed distribution declares under `converge.commands` (its own metadata only: a
    fraction of a millisecond, where a search of every installed distribution takes some 15)."""
    try:
        declared = distribution(DISTRIBUTION).entry_points.select(group=COMMANDS_GROUP)
    except PackageNotFoundError:  # run from a source tree without installing: no declared commands
        return []
    return [(entry.name, entry.load()) for entry in declared]


def build() -> typer.Typer:
    """The converge command with every command registered."""
    cli = new_app()
    cli.add_typer(jobs_app, name="jobs")
    ops_app.command("cancel")(cancel_command)  # cancel has its own module; it reads as one of the operator's commands
    ops_app.command("cancel-bulk")(cancel_bulk_command)
    register_action_commands(ops_app)
    cli.add_typer(ops_app, name="ops")
    cli.add_typer(batches_app, name="batches")
    cli.add_typer(toggles_app, name="toggles")
    cli.add_typer(limits_app, name="limits")
    register_message_commands(dlq_app)
    cli.add_typer(dlq_app, name="dlq")
    cli.add_typer(local_app, name="local")
    cli.command("status", help=STATUS_HELP)(STATUS)
    for name, command in declared_commands():
        cli.command(name)(command)
    cli.command("console")(console)
    cli.command("init")(init)
    cli.command("link")(link_command)
    cli.command("explore", help=EXPLORE_HELP)(explore_command)
    cli.command("signal")(signal_command)
    cli.command()(enqueue)
    cli.command()(demo_command(cli))
    return cli


app = build()


def main() -> None:
    app()
