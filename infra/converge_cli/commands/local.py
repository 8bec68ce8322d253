"""`converge local up`: the local cloud on a loopback port, for the AWS CLI and any SDK."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from converge_cli.support.errors import Unavailable, fails_cleanly
from converge_cli.support.output import say, stdout, styled
from localcloud.project import current

local_app = typer.Typer(help="Run converge locally: the SAM template deployed into moto.", no_args_is_help=True)


@local_app.command("up")
@fails_cleanly
def up(
    port: Annotated[
        int,
        typer.Option(
            "--port",
            min=0,
            max=65535,
            help="Loopback port for the AWS endpoint; 0 picks a free one (the outputs file names it).",
        ),
    ] = 4566,
    outputs_file: Annotated[
        Path | None,
        typer.Option(
            "--outputs-file", help="Write {endpoint_url, region, outputs, api_url} here when ready (removed on stop)."
        ),
    ] = None,
    no_seed: Annotated[
        bool, typer.Option("--no-seed", help="Do not seed the catalogue's demo data (its local hooks' seed).")
    ] = False,
    stage: Annotated[str, typer.Option("--stage", help="Template Stage parameter.")] = "dev",
    logs: Annotated[
        bool, typer.Option("--logs", help="Stream every function's log lines, each prefixed with its name.")
    ] = False,
) -> None:
    """Deploy template.yaml into a moto server on 127.0.0.1 and run the pipeline until Ctrl-C."""
    from localcloud.collector import collect_less_often
    from localcloud.server import PortInUse, ensure_port_free, serve  # moto's server: only for this command

    try:
        if port:
            ensure_port_free(port)
    except PortInUse as exc:
        raise Unavailable(f"{exc}: stop whatever holds it (another `converge local up`?) or pass --port") from None
    if outputs_file is not None:
        outputs_file.parent.mkdir(parents=True, exist_ok=True)
    if hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(line_buffering=True)  # a stream of lines for a pipe too, not a block at exit
    console = stdout()
    project = current()
    where = f"127.0.0.1:{port}" if port else "a free port of 127.0.0.1"
    collect_less_often()  # the cloud runs until stopped: its long-lived objects are walked less often
    say(console, f"starting the local cloud on {where} from {project.template} …")
    try:
        serve(
            template_path=project.template,
            catalogue=project.catalogue,
            port=port,
            outputs_file=outputs_file,
            seed=not no_seed,
            on_ready=_ready,
            stage=stage,
            on_log=_log_printer(stdout(sys.stdout)) if logs else None,
        )
    except PortInUse as exc:  # taken between the check and the bind
        raise Unavailable(f"{exc}: pass another --port") from None
    say(console, "local cloud stopped" + (f"; removed {outputs_file}" if outputs_file else ""))


def _log_printer(console: Console) -> Callable[[str, str], None]:
    """Prints a function's log line as `sam logs --tail` does: the function's name, then the line.

    The console holds the command's own stdout: the lines come while sys.stdout is the function's capture."""

    def print_line(function: str, line: str) -> None:
        say(console, styled(function, "cyan"), " ", line)

    return print_line


def _ready(info: dict[str, Any]) -> None:
    """Deployed and seeded: what is alive now stays alive until the command stops (out of the collector's
    walks from here on); then the endpoint and outputs are printed."""
    from localcloud.collector import freeze_survivors

    freeze_survivors()
    _announce(info)


def _announce(info: dict[str, Any]) -> None:
    console = stdout()
    say(console, styled("ready", "bold green"), " endpoint ", styled(info["endpoint_url"], "bold"))
    if info.get("api_url"):
        say(console, "enqueue API ", styled(info["api_url"], "bold"))
    for key, value in sorted(info["outputs"].items()):
        say(console, f"  {key:<24} ", value)
    say(
        console,
        f"try: AWS_ENDPOINT_URL={info['endpoint_url']} AWS_ACCESS_KEY_ID=local AWS_SECRET_ACCESS_KEY=local "
        f"AWS_REGION={info['region']} AWS_DEFAULT_REGION={info['region']} converge ops list --state PAUSED",
    )
    say(console, "Ctrl-C to stop")
