"""Listing operations on moto: attention keys from their index, any state by a bounded scan, every filter."""

from __future__ import annotations

import pytest

from converge.model.errors import InvalidListing
from converge.model.states import OperationState
from converge.operate.listing import Filters, Listing

from .conftest import operation_in

S = OperationState


def every_page(listing: Listing, filters: Filters, limit: int, budget: int = 1000) -> list[list[str]]:
    """The ids of each page, following the token to the end."""
    pages, token = [], None
    while True:
        page = listing.page(filters, limit, token, budget=budget)
        pages.append([row["operation_id"] for row in page.operations])
        token = page.next_token
        if token is None:
            return pages


def test_any_state_is_listed_by_a_bounded_scan_and_the_pages_cover_it_once(app):
    # Given five SUCCEEDED operations among others
    done = [operation_in(app, f"op-done-{n}", S.SUCCEEDED).operation_id for n in range(5)]
    operation_in(app, "op-failed", S.FAILED)
    operation_in(app, "op-other-job", S.SUCCEEDED, job_type="files.copy.v1")
    listing = Listing(app.operations.listings)
    # When SUCCEEDED ones of one job type are listed two at a time
    filters = Filters(state="SUCCEEDED", job_type="mail.notice.v1")
    pages = every_page(listing, filters, limit=2)
    # Then every page holds at most two, and together they hold each of the five exactly once
    assert all(len(page) <= 2 for page in pages)
    assert sorted(operation_id for page in pages for operation_id in page) == sorted(done)
    # And the scan says so, and never evaluates more than its budget
    page = listing.page(filters, limit=50, budget=3)
    assert page.source == "scan" and page.evaluated <= 3 and page.next_token is not None


def test_recent_operations_are_newest_first_and_since_excludes_older_changes(app, clock):
    # Given an operation settled an hour ago and two settled now
    operation_in(app, "op-old", S.SUCCEEDED)
    clock.advance(3600)
    operation_in(app, "op-new-1", S.FAILED)
    clock.advance(1)
    operation_in(app, "op-new-2", S.SUCCEEDED)
    listing = Listing(app.operations.listings)
    # When every state is listed, then those of the last ten minutes
    everything = listing.page(Filters(), limit=50)
    recent = listing.page(Filters(since=clock.now() - 600), limit=50)
    # Then the listing is newest first, and the age filter leaves the old one out
    assert [row["operation_id"] for row in everything.operations] == ["op-new-2", "op-new-1", "op-old"]
    assert [row["operation_id"] for row in recent.operations] == ["op-new-2", "op-new-1"]
    assert recent.operations[1]["state"] == "FAILED" and recent.operations[1]["last_error"] == "boom"


def test_an_attention_key_is_a_query_and_its_age_is_served_by_the_key_with_a_job_type(app, clock):
    # Given FAILED operations listed an hour apart, of two job types
    operation_in(app, "op-f-old", S.FAILED)
    clock.advance(3600)
    operation_in(app, "op-f-new", S.FAILED)
    operation_in(app, "op-f-files", S.FAILED, job_type="files.copy.v1")
    listing = Listing(app.operations.listings)
    # When FAILED ones of the last ten minutes are listed, with and without a job type
    mine = listing.page(Filters(state="FAILED", job_type="mail.notice.v1", since=clock.now() - 600))
    every = listing.page(Filters(state="FAILED", since=clock.now() - 600))
    # Then both come from the index; with the job type the key served the age (only the match was read)
    assert (mine.source, [row["operation_id"] for row in mine.operations], mine.evaluated) == (
        "index",
        ["op-f-new"],
        1,
    )
    assert sorted(row["operation_id"] for row in every.operations) == ["op-f-files", "op-f-new"]
    assert every.evaluated == 3


def test_the_correlation_id_filter_reads_the_requests(app):
    # Given two FAILED operations with their own correlation ids (corr-<id>)
    operation_in(app, "op-c1", S.FAILED)
    operation_in(app, "op-c2", S.FAILED)
    listing = Listing(app.operations.listings)
    # When one correlation id is asked for, from the index and from the scan
    by_index = listing.page(Filters(state="FAILED", correlation_id="corr-op-c2"))
    by_scan = listing.page(Filters(correlation_id="corr-op-c2"))
    # Then only its operation is listed, with its correlation id
    assert [(row["operation_id"], row["correlation_id"]) for row in by_index.operations] == [("op-c2", "corr-op-c2")]
    assert [row["operation_id"] for row in by_scan.operations] == ["op-c2"]


def test_a_state_that_does_not_exist_is_refused(app):
    with pytest.raises(InvalidListing, match="not a state"):
        Listing(app.operations.listings).page(Filters(state="DONE"))


def test_an_operation_no_worker_has_taken_yet_is_listed_as_accepted(app):
    # Given an admitted operation with no state record yet
    app.enqueue("files.copy.v1", "op-waiting", {"user_id": "u-9"}, "corr-waiting")
    # When ACCEPTED operations are listed
    page = Listing(app.operations.listings).page(Filters(state="ACCEPTED"))
    # Then it is there, from its request, with nothing recorded yet
    [row] = page.operations
    assert (row["operation_id"], row["job_type"], row["state"], row["updated_at"]) == (
        "op-waiting",
        "files.copy.v1",
        "ACCEPTED",
        None,
    )
