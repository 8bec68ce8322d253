"""Job types by name, with a "did you mean" when a name is not registered."""

from __future__ import annotations

import difflib

from converge.errors import UnknownJobType
from converge.registry import JobBinding, Registry


def unknown_job_type(registry: Registry, name: str, listing: str = "converge jobs list") -> UnknownJobType:
    """The error for an unregistered name, suggesting the closest job types or toggle names."""
    known = sorted({binding.job_type for binding in registry} | {binding.toggle_key for binding in registry})
    close = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
    hint = f"; did you mean {' or '.join(repr(match) for match in close)}?" if close else ""
    return UnknownJobType(f"unknown job type {name!r}{hint} (`{listing}` shows the registered ones)")


def require_job_type(registry: Registry, name: str) -> JobBinding:
    if name not in registry:
        raise unknown_job_type(registry, name)
    return registry.get(name)


def find_binding(registry: Registry, name: str) -> JobBinding:
    """The binding a toggle name means: an exact job type, else the (latest) job with that toggle key."""
    if name in registry:
        return registry.get(name)
    matches = [binding for binding in registry if binding.toggle_key == name]
    if not matches:
        raise unknown_job_type(registry, name, "converge toggles list")
    return matches[-1]
