"""How operations link: a continuation's id is derived from its parent's, so it can be written only once."""

from __future__ import annotations

import hashlib

ON_SUCCESS = "next"
ON_FAILURE = "on-failure"
OUTCOMES = (ON_SUCCESS, ON_FAILURE)
"""What a continuation follows: its parent SUCCEEDED (`next`), or ended FAILED or UNKNOWN (`on-failure`)."""

ID_LIMIT = 128


def continuation_id(parent_id: str, outcome: str) -> str:
    """The id of the operation that follows `parent_id` on `outcome`: "<parent>:<outcome>", or, for a parent
    whose id leaves no room for the suffix, a digest of it in its place (the same parent, the same id, always)."""
    if outcome not in OUTCOMES:
        raise ValueError(f"a continuation follows one of {', '.join(OUTCOMES)}, not {outcome!r}")
    derived = f"{parent_id}:{outcome}"
    if len(derived) <= ID_LIMIT:
        return derived
    return f"{hashlib.sha256(parent_id.encode()).hexdigest()[:48]}:{outcome}"
