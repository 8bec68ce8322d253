"""`converge local up`: the local cloud on a loopback port, for the AWS CLI and any SDK."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from converge_cli.errors import fails_cleanly
from converge_cli.options import console

local_app = typer.Typer(help="Run converge locally: the SAM template deployed into moto.", no_args_is_help=True)


@local_app.command("up")
@fails_cleanly
def up(
    port: Annotated[int, typer.Option("--port", help="Loopback port for the AWS endpoint.")] = 4566,
    outputs_file: Annotated[
        Path | None, typer.Option("--outputs-file", help="Write {endpoint_url, outputs, api_url} here when ready.")
    ] = None,
    no_seed: Annotated[
        bool, typer.Option("--no-seed", help="Do not seed the reference application's demo data.")
    ] = False,
    stage: Annotated[str, typer.Option("--stage", help="Template Stage parameter.")] = "dev",
) -> None:
    """Deploy template.yaml into a moto server on 127.0.0.1 and run the pipeline until Ctrl-C."""
    from localcloud.server import serve  # moto's server is heavy: import it only for this command

    if outputs_file is not None:
        outputs_file.parent.mkdir(parents=True, exist_ok=True)
    console.print(f"starting the local cloud on 127.0.0.1:{port} …")
    serve(port=port, outputs_file=outputs_file, seed=not no_seed, on_ready=_announce, stage=stage)
    console.print("local cloud stopped")


def _announce(info: dict[str, Any]) -> None:
    console.print(f"[bold green]ready[/] endpoint [bold]{info['endpoint_url']}[/]")
    if info.get("api_url"):
        console.print(f"enqueue API [bold]{info['api_url']}[/]")
    for key, value in sorted(info["outputs"].items()):
        console.print(f"  {key:<24} {value}")
    console.print(
        f"try: AWS_ENDPOINT_URL={info['endpoint_url']} AWS_ACCESS_KEY_ID=local AWS_SECRET_ACCESS_KEY=local "
        "AWS_REGION=us-east-1 converge ops list --state PAUSED"
    )
    console.print("Ctrl-C to stop")
