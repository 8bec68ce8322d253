"""The reference application's job catalogue: its bindings, which each converge runtime loads (BINDINGS),
and the rate limits they name (LIMITERS).

The bindings (catalogue.bindings) name each job's message model and runner, so importing the catalogue loads
none of its jobs' modules. Each of those holds one job (or one area): its message model, its runner over small
ports, and the AWS adapters of those ports.
"""

from __future__ import annotations

from catalogue.bindings import BINDINGS, LIMITERS

LOCAL_HOOKS = "catalogue.local:hooks"
"""What the local cloud and `converge demo` use from this catalogue; a string, so no Lambda imports it."""

__all__ = ["BINDINGS", "LIMITERS", "LOCAL_HOOKS"]
