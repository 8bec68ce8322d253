"""{{name}}'s job catalogue: importing it registers every binding (CONVERGE_CATALOGUE names it)."""

from __future__ import annotations

from converge.registry import JobBinding, registry
from {{catalogue}}.greeting import GREETING

BINDINGS: tuple[JobBinding, ...] = (GREETING,)

for _binding in BINDINGS:
    registry.register(_binding)

LOCAL_HOOKS = "{{catalogue}}.local:hooks"
"""What `converge demo`, `converge local up` and the tests use locally; a string, so no Lambda imports it."""
