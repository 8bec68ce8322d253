"""`converge console`: the operations console on a loopback port, against the same target as every command."""

from __future__ import annotations

import getpass
import logging
import sys
import webbrowser
from typing import Annotated

import typer

from converge_cli.errors import UsageError, fails_cleanly
from converge_cli.options import Endpoint, Profile, Region, Stack, target
from converge_cli.output import say, stdout, styled
from converge_console.guard import Origins, is_loopback


@fails_cleanly
def console(
    port: Annotated[int, typer.Option("--port", min=0, max=65535, help="Loopback port; 0 picks a free one.")] = 0,
    host: Annotated[str, typer.Option("--host", help="Loopback address to listen on (nothing else is allowed).")] = (
        "127.0.0.1"
    ),
    open_browser: Annotated[bool, typer.Option("--open", help="Open the console in the default browser.")] = False,
    actor: Annotated[
        str | None,
        typer.Option("--actor", envvar="CONVERGE_ACTOR", help="Who acts, in every receipt (default: console:<user>)."),
    ] = None,
    endpoint_url: Endpoint = None,
    stack: Stack = "converge",
    region: Region = None,
    profile: Profile = None,
) -> None:
    """Serve the operations console: what needs attention, the receipts, and the actions to settle it.

    Loopback only. The console acts with your own AWS credentials (or the local cloud's), which
    never reach the browser; your IAM permissions decide what each action may do."""
    if not is_loopback(host):
        raise UsageError(f"--host {host!r} is not a loopback address; the console serves 127.0.0.1 or ::1 only")
    try:  # the web stack only for this command, from the `console` extra
        from werkzeug.serving import make_server

        from converge_console.app import create_app
    except ImportError as missing:
        raise UsageError(f"converge console needs Flask ({missing}): pip install 'converge-jobs[console]'") from None

    deployment = target(endpoint_url, stack, region, profile)
    deployment.outputs  # noqa: B018 - fail now, with the CLI's message, if the stack cannot be found
    server = make_server(host, port, None, threaded=True)  # bound first: the app must know its own port
    bound = int(server.server_port)
    name = f"[{host}]" if ":" in host else host
    server.app = create_app(deployment, Origins.serving(name, bound), actor or default_actor())
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no access-log line per request on the terminal
    url = f"http://{name}:{bound}/"
    if hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(line_buffering=True)
    say(stdout(), styled("console", "bold green"), " ", styled(url, "bold"), " (Ctrl-C to stop)")
    if open_browser:
        webbrowser.open(url)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    say(stdout(), "console stopped")


def default_actor() -> str:
    try:
        return f"console:{getpass.getuser()}"
    except (KeyError, OSError):  # no login name (a container without a passwd entry)
        return "console:unknown"
