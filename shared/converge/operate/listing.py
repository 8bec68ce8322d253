"""Operations listed by state, job type, correlation id and age, one bounded page at a time.

An attention key (FAILED, UNKNOWN, PAUSED, REJECTED, STUCK, CONFLICT) is a Query on its sparse
index, so it costs the result. Any other state, or every state ("recent"), has no index: the happy
path writes none (an index on every state would double its write cost), so those listings Scan the
state table, a page at a time, and each call evaluates at most `budget` items; the next token
continues where it stopped. Filters the key cannot serve (an age without a job type, a correlation
id, which lives in the request) are applied to each page, within the same budget, so a page may hold
fewer rows than asked for while a next token remains.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from converge.model import states
from converge.model.clock import iso
from converge.model.errors import InvalidListing
from converge.model.states import LISTED_STATES, OperationState
from converge.store.listings import Listings, Slice

DEFAULT_BUDGET = 1000
"""Items a listing call evaluates at most (index entries or state records)."""


def listable() -> list[str]:
    """Every value `state` takes: the attention keys (an index) and every other state (a bounded scan)."""
    return [*states.ATTENTION_KEYS, *sorted(set(OperationState) - LISTED_STATES)]


@dataclass(frozen=True)
class Filters:
    state: str | None = None  # an attention key or a state; None: every state
    job_type: str | None = None
    correlation_id: str | None = None
    since: float | None = None  # epoch seconds: changed (or, for attention keys, listed) at or after this

    @property
    def indexed(self) -> bool:
        return self.state in states.ATTENTION_KEYS


@dataclass(frozen=True)
class ListingPage:
    operations: list[dict[str, Any]]
    next_token: dict[str, Any] | None
    evaluated: int  # index entries or state records read for this page
    source: str  # "index" or "scan"


class Listing:
    """Pages of operations for operators (never on the happy path)."""

    def __init__(self, listings: Listings) -> None:
        self._listings = listings

    def page(
        self,
        filters: Filters,
        limit: int = 50,
        start: dict[str, Any] | None = None,
        budget: int = DEFAULT_BUDGET,
    ) -> ListingPage:
        if filters.state is not None and filters.state not in listable():
            raise InvalidListing(f"{filters.state!r} is not a state; choose one of {', '.join(listable())}")
        source = "index" if filters.indexed else "scan"
        rows: list[dict[str, Any]] = []
        evaluated = 0
        token = start
        while True:
            # Each call evaluates at most what is left of both the page and the budget, so the rows never
            # exceed `limit` and the token resumes exactly after the last item evaluated.
            found = self._call(filters, min(limit - len(rows), budget - evaluated), token)
            evaluated += found.evaluated
            rows += self._refine(found.rows, filters, source)
            token = found.next_token
            if not token or len(rows) >= limit or evaluated >= budget:
                break
        if source == "scan":
            rows.sort(key=lambda row: str(row.get("updated_at") or ""), reverse=True)
        return ListingPage(rows, token, evaluated, source)

    def _call(self, filters: Filters, limit: int, start: dict[str, Any] | None) -> Slice:
        if filters.indexed:
            return self._listings.listed(str(filters.state), filters.job_type, filters.since, limit, start)
        return self._listings.requests(filters.job_type, filters.correlation_id, limit, start)

    def _refine(self, rows: list[dict[str, Any]], filters: Filters, source: str) -> list[dict[str, Any]]:
        """Join each row with the record the other table holds, then apply the filters neither key served."""
        if not rows:
            return rows
        if source == "index":
            rows = self._listings.with_correlation_ids(rows)
            if filters.correlation_id is not None:
                rows = [row for row in rows if row["correlation_id"] == filters.correlation_id]
        else:
            rows = self._listings.with_records(rows)
            if filters.state is not None:
                rows = [row for row in rows if row["state"] == filters.state]
        if filters.since is not None:
            cutoff = iso(filters.since)
            rows = [row for row in rows if str(row.get("listed_at") or row.get("updated_at") or "") >= cutoff]
        return rows
