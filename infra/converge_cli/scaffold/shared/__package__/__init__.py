"""{{name}}'s job catalogue: its bindings, which converge loads where CONVERGE_CATALOGUE names this package."""

from __future__ import annotations

from converge import JobBinding
from {{catalogue}}.greeting import GREETING

BINDINGS: tuple[JobBinding, ...] = (GREETING,)
"""Every job of the catalogue; a new job's binding is added here."""

LOCAL_HOOKS = "{{catalogue}}.local:hooks"
"""What `converge demo`, `converge local up` and the tests use locally; a string, so no Lambda imports it."""
