"""What a request handler needs from the running console: its deployment and who acts."""

from __future__ import annotations

from flask import current_app

from converge_cli.support.target import Target
from localcloud.project import NoCatalogue


def deployment() -> Target:
    return current_app.extensions["converge"]["deployment"]  # type: ignore[no-any-return]


def job_types() -> list[str]:
    """The catalogue's job types, for a filter; none when no catalogue is found (a page that lists jobs says so)."""
    try:
        return [binding.job_type for binding in deployment().registry]
    except NoCatalogue:
        return []


def actor() -> str:
    return str(current_app.extensions["converge"]["actor"])
