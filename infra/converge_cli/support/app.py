"""The `converge` application object: conventions every command shares.

`-h`/`--help`, `--version`, shell completion (`--install-completion`, `--show-completion`), framework
logs kept off stdout, and errors in one shape: a usage error (an unknown option, a missing argument)
under `--json` is the same `{"error", "message"}` object on stderr as any other failure, with the
same exit code (2).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from converge_cli.support.errors import ExitCode, Failure, report
from converge_cli.support.quiet import logs_off_stdout, quiet_logs
from localcloud import project

try:
    from typer._click.exceptions import ClickException
except ImportError:  # typer releases that use click itself
    from click.exceptions import ClickException  # type: ignore[no-redef]

# Commands that run the functions and keep their logs at the template's level: the benchmark measures
# their volume, and `local up` serves them (`--logs`) as CloudWatch would hold them.
KEEP_LOG_LEVEL = {"bench", "local"}


class ConvergeGroup(TyperGroup):
    def main(self, args: Sequence[str] | None = None, *rest: Any, **kwargs: Any) -> Any:
        argv = list(sys.argv[1:] if args is None else args)
        if "--json" not in argv:
            return super().main(argv, *rest, **kwargs)
        kwargs["standalone_mode"] = False
        try:
            code = super().main(argv, *rest, **kwargs)
        except ClickException as exc:
            report(Failure("usage", exc.format_message(), ExitCode(exc.exit_code or 2)), as_json=True)
            sys.exit(exc.exit_code)
        except typer.Abort:
            report(Failure("aborted", "aborted", ExitCode.FAILED), as_json=True)
            sys.exit(ExitCode.FAILED)
        sys.exit(code if isinstance(code, int) else 0)


def package_version() -> str:
    try:
        return version("converge-jobs")
    except PackageNotFoundError:
        return "unknown"


def _show_version(value: bool) -> None:
    if value:
        typer.echo(f"converge {package_version()}")
        raise typer.Exit(0)


def root(
    ctx: typer.Context,
    _version: Annotated[
        bool,
        typer.Option("--version", callback=_show_version, is_eager=True, help="Print the version and exit."),
    ] = False,
    template: Annotated[
        Path | None,
        typer.Option(
            "--template",
            envvar="CONVERGE_TEMPLATE",
            help="The project's SAM template (default: template.yaml in this directory or the nearest above it).",
        ),
    ] = None,
    catalogue: Annotated[
        str | None,
        typer.Option(
            "--catalogue",
            envvar="CONVERGE_CATALOGUE",
            help="The job catalogue's module (default: what the template's functions set as CONVERGE_CATALOGUE).",
        ),
    ] = None,
) -> None:
    """Background jobs on AWS serverless that stay correct when every handler runs twice."""
    project.select(template, catalogue)
    ctx.with_resource(logs_off_stdout())
    if ctx.invoked_subcommand not in KEEP_LOG_LEVEL:
        ctx.with_resource(quiet_logs())


def new_app() -> typer.Typer:
    app = typer.Typer(
        name="converge",
        cls=ConvergeGroup,
        no_args_is_help=True,
        pretty_exceptions_enable=False,
        add_completion=True,
        context_settings={"help_option_names": ["-h", "--help"]},
    )
    app.callback()(root)
    return app
