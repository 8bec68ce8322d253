"""What a request handler needs from the running console: its deployment and who acts."""

from __future__ import annotations

from flask import current_app

from converge_cli.target import Target


def deployment() -> Target:
    return current_app.extensions["converge"]["deployment"]  # type: ignore[no-any-return]


def actor() -> str:
    return str(current_app.extensions["converge"]["actor"])
