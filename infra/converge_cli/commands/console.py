"""`converge console`: the operations console on a loopback port, against the same target as every command."""

from __future__ import annotations

import getpass
import logging
import os
import secrets
import sys
import tempfile
import webbrowser
from collections.abc import Iterator
from contextlib import contextmanager
from html import escape
from pathlib import Path
from typing import Annotated

import typer

from converge_cli.console.guard import Origins, is_loopback
from converge_cli.support.errors import UsageError, fails_cleanly
from converge_cli.support.options import on_deployment
from converge_cli.support.output import say, stdout, styled
from converge_cli.support.target import Target


@fails_cleanly
@on_deployment
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
    *,
    deployment: Target,
) -> None:
    """Serve the operations console: what needs attention, the receipts, and the actions to settle it.

    Loopback only, and only to whoever opens the URL it prints: that URL carries a secret made at
    each start (`/?token=...`), which signs the browser in; without it every page is refused. The
    console acts with your own AWS credentials (or the local cloud's), which never reach the
    browser; your IAM permissions decide what each action may do."""
    if not is_loopback(host):
        raise UsageError(f"--host {host!r} is not a loopback address; the console serves 127.0.0.1 or ::1 only")
    try:  # the web stack only for this command, from the `console` extra
        from werkzeug.serving import make_server

        from converge_cli.console.app import create_app
    except ImportError as missing:
        raise UsageError(f"converge console needs Flask ({missing}): pip install 'converge-jobs[console]'") from None

    deployment.outputs  # noqa: B018 - fail now, with the CLI's message, if the stack cannot be found
    server = make_server(host, port, None, threaded=True)  # bound first: the app must know its own port
    bound = int(server.server_port)
    name = f"[{host}]" if ":" in host else host
    secret = secrets.token_urlsafe(32)  # this start's key: shown once, on this terminal
    server.app = create_app(
        deployment,
        Origins.serving(name, bound),
        actor or default_actor(),
        secret=secret,
        cookie_name=f"converge_console_{bound}",  # cookies ignore ports: one name per console on this host
    )
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no access-log line per request (nor its token)
    url = f"http://{name}:{bound}/?token={secret}"
    if hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(line_buffering=True)
    say(stdout(), styled("console", "bold green"), " ", styled(url, "bold"), " (Ctrl-C to stop)")
    with opener(url) as page:
        if open_browser:
            webbrowser.open(page)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            server.server_close()
    say(stdout(), "console stopped")


@contextmanager
def opener(url: str) -> Iterator[str]:
    """A file only this user can read that sends the browser on to `url`, for as long as the console runs.

    The browser is opened on this file rather than on the URL, so the token is never on a command line
    (`ps` shows every process's arguments to every local user)."""
    descriptor, path = tempfile.mkstemp(prefix="converge-console-", suffix=".html")  # mode 0600
    try:
        with os.fdopen(descriptor, "w") as page:
            target = escape(url, quote=True)
            page.write(
                f'<!doctype html><meta charset="utf-8"><meta http-equiv="refresh" content="0;url={target}">'
                f'<title>converge console</title><p><a href="{target}">open the console</a></p>\n'
            )
        yield Path(path).as_uri()
    finally:
        Path(path).unlink(missing_ok=True)


def default_actor() -> str:
    try:
        return f"console:{getpass.getuser()}"
    except (KeyError, OSError):  # no login name (a container without a passwd entry)
        return "console:unknown"
