"""Job types by name, with a "did you mean" when a name is not registered (the CLI and operator actions)."""

from __future__ import annotations

import difflib

from converge.flow.registry import JobBinding, Registry
from converge.model.errors import UnknownJobType

SUGGESTIONS = 3


def unknown_job_type(
    registry: Registry, name: str, listing: str = "converge jobs list", toggle_names: bool = False
) -> UnknownJobType:
    """The error for an unregistered name, suggesting registered names close to it; never the name itself.

    Where a versioned job type is wanted, a name without its `.vN` (a toggle name) suggests the job types
    registered under it; `toggle_names` says that a toggle name would be accepted, so one may be suggested."""
    close = suggestions(registry, name, toggle_names)
    hint = f"; did you mean {' or '.join(repr(match) for match in close)}?" if close else ""
    return UnknownJobType(f"unknown job type {name!r}{hint} (`{listing}` shows the registered ones)")


def suggestions(registry: Registry, name: str, toggle_names: bool = False) -> list[str]:
    """Registered names close to `name`, closest first (at most SUGGESTIONS), never `name` itself."""
    versions = _versions_of(registry, name)
    if versions:  # the name without its version: its versions, newest first
        return versions[:SUGGESTIONS]
    job_types = {binding.job_type for binding in registry}
    toggles = {binding.toggle_key for binding in registry}
    # A typo of the bare name is closest to a toggle name: matched against both, then shown as what is accepted.
    close = difflib.get_close_matches(name, sorted(job_types | toggles), n=len(job_types | toggles), cutoff=0.6)
    shown: list[str] = []
    for match in close:
        named = [match] if match in job_types or toggle_names else _versions_of(registry, match)
        shown += [candidate for candidate in named if candidate != name and candidate not in shown]
    return shown[:SUGGESTIONS]


def _versions_of(registry: Registry, key: str) -> list[str]:
    """The job types registered under a toggle name, newest version first."""
    return sorted((b.job_type for b in registry if b.toggle_key == key), key=_version, reverse=True)


def _version(job_type: str) -> int:
    """N of a registered `<area>.<name>.vN` (compared as a number: v10 is newer than v9)."""
    return int(job_type.rsplit(".v", 1)[1])


def require_job_type(registry: Registry, name: str) -> JobBinding:
    if name not in registry:
        raise unknown_job_type(registry, name)
    return registry.get(name)


def find_binding(registry: Registry, name: str) -> JobBinding:
    """The binding a toggle name means: an exact job type, else the (latest) job with that toggle key."""
    if name in registry:
        return registry.get(name)
    versions = _versions_of(registry, name)
    if not versions:
        raise unknown_job_type(registry, name, "converge toggles list", toggle_names=True)
    return registry.get(versions[0])
