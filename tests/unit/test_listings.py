"""The store's listings: attention keys by sparse index, overdue operations, and the operator's bounded scan.

Pages are forced small (DynamoDB stops a page at 1 MB; a table of a few rows never reaches it), so every
loop that follows `LastEvaluatedKey` is exercised, and the calls are counted: a listing costs what it
reads, nothing more.
"""

from __future__ import annotations

from typing import Any

import boto3
import pytest

from converge.model.clock import FakeClock
from converge.model.records import ConflictEntry, Subject
from converge.model.request import JobRequest, fingerprint
from converge.model.states import Flag, OperationState, StuckKind
from converge.store.listings import SCAN_PROJECTION, Listings, listing_row
from converge.store.operations import OperationStore

PAYLOAD = {"user_id": "00000000-0000-4000-8000-000000000001"}
JOB = "mail.notice.v1"
OTHER_JOB = "ledger.credit.v1"
ACCEPTED_AT = "2030-01-01T00:00:00.000Z"


class SmallPages:
    """The DynamoDB client, with every Query and Scan page cut to `page` items (as a 1 MB page would be cut),
    BatchGetItem answering part of each call as unprocessed when asked, and every call recorded."""

    def __init__(self, page: int | None = None, unprocessed_first: int = 0) -> None:
        self._client = boto3.client("dynamodb")
        self.page = page
        self.unprocessed_first = unprocessed_first  # the first BatchGetItem answers all but this many keys
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def query(self, **request: Any) -> dict[str, Any]:
        return self._paged("query", request)

    def scan(self, **request: Any) -> dict[str, Any]:
        return self._paged("scan", request)

    def _paged(self, name: str, request: dict[str, Any]) -> dict[str, Any]:
        self.calls.append((name, dict(request)))
        if self.page is not None:
            request = {**request, "Limit": min(request.get("Limit", self.page), self.page)}
        return getattr(self._client, name)(**request)

    def batch_get_item(self, **request: Any) -> dict[str, Any]:
        self.calls.append(("batch_get_item", request))
        [(table, ask)] = request["RequestItems"].items()
        held_back = ask["Keys"][: self.unprocessed_first]
        self.unprocessed_first = 0
        rest = ask["Keys"][len(held_back) :]
        # DynamoDB answers a call it read none of with no entry for the table in Responses
        response = (
            self._client.batch_get_item(RequestItems={table: {**ask, "Keys": rest}})
            if rest
            else {"Responses": {}, "UnprocessedKeys": {}}
        )
        if held_back:
            response["UnprocessedKeys"] = {table: {**ask, "Keys": held_back}}
        return response

    def named(self, name: str) -> list[dict[str, Any]]:
        return [request for call, request in self.calls if call == name]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


@pytest.fixture
def clock():
    return FakeClock()


@pytest.fixture
def store(tables, clock):
    return OperationStore(tables["jobs"], tables["state"], boto3.client("dynamodb"), clock=clock)


def listings(tables, client: SmallPages) -> Listings:
    return Listings(tables["jobs"], tables["state"], client)


def subject(operation_id: str, job_type: str = JOB) -> Subject:
    return Subject(operation_id, job_type, fingerprint(job_type, PAYLOAD), ACCEPTED_AT)


def failed(store, operation_id: str, job_type: str = JOB, error: str = "TransientError: down") -> None:
    lease = store.state.acquire(subject(operation_id, job_type), f"m-{operation_id}", 30)
    assert store.state.settle(lease, OperationState.FAILED, "gave up", error=error) is None


# -- attention keys ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("at_most", [1, 3, 4, 5, 100])
def test_count_reads_pages_until_it_has_at_most_and_stops_there(store, tables, at_most):
    # Given five FAILED operations, and pages of two entries
    for number in range(5):
        failed(store, f"op-{number}")
    client = SmallPages(page=2)
    # When they are counted up to at_most
    total = listings(tables, client).count(OperationState.FAILED, at_most=at_most)
    # Then whole pages are counted until at_most is reached (a page past it is never read), or all five
    pages = [2, 4, 5]
    expected = next((counted for counted in pages if counted >= at_most), 5)
    assert total == expected
    asked = client.named("query")
    assert len(asked) == pages.index(expected) + 1
    assert all(request["Select"] == "COUNT" and request["IndexName"] == "attention-index" for request in asked)
    assert "ExclusiveStartKey" not in asked[0]
    assert all("ExclusiveStartKey" in request for request in asked[1:])


def test_count_of_nothing_listed_is_zero_after_one_query(tables):
    client = SmallPages(page=2)
    assert listings(tables, client).count(OperationState.PAUSED, at_most=10) == 0
    assert len(client.named("query")) == 1


def test_count_asked_for_none_reads_nothing(store, tables):
    failed(store, "op-1")
    client = SmallPages()
    assert listings(tables, client).count(OperationState.FAILED, at_most=0) == 0
    assert client.calls == []


def test_conflicts_are_counted_on_their_own_index(store, tables):
    store.admit(JobRequest("op-1", JOB, PAYLOAD))
    entry = ConflictEntry("2030-01-01T00:00:01.000Z", "other", JOB, "jobs table: other content")
    assert store.state.record_conflict("op-1", entry, fingerprint(JOB, PAYLOAD))
    client = SmallPages()
    assert listings(tables, client).count(Flag.CONFLICT, at_most=10) == 1
    assert client.named("query")[0]["IndexName"] == "conflict-index"
    assert listings(tables, client).count(OperationState.FAILED, at_most=10) == 0


def test_iterating_an_attention_key_follows_every_page(store, tables):
    for number in range(5):
        failed(store, f"op-{number}")
    rows = list(listings(tables, SmallPages()).iter_attention(OperationState.FAILED, page_size=2))
    assert sorted(row["operation_id"] for row in rows) == [f"op-{number}" for number in range(5)]


# -- overdue ------------------------------------------------------------------------------------------------------


def scheduled(store, operation_id: str, run_at: float) -> None:
    assert store.state.schedule(subject(operation_id), run_at, "waits for its time") is None


def test_overdue_is_what_was_due_strictly_before_the_time_earliest_first(store, tables):
    # Given operations scheduled at 100, 200, 300 and 400 (written out of order)
    for operation_id, run_at in [("op-c", 300.0), ("op-a", 100.0), ("op-d", 400.0), ("op-b", 200.0)]:
        scheduled(store, operation_id, run_at)
    client = SmallPages()
    # When the operations due before 300 are asked for
    found = listings(tables, client).overdue(before=300, limit=10)
    # Then the two due strictly before it, earliest first, with their times (as numbers)
    assert found == [("op-a", 100.0), ("op-b", 200.0)]
    assert all(isinstance(run_at, float) for _, run_at in found)
    [request] = client.named("query")
    assert request["IndexName"] == "schedule-index" and request["Limit"] == 10


def test_overdue_stops_at_its_limit_and_asks_for_no_more_than_it_needs(store, tables):
    for number in range(5):
        scheduled(store, f"op-{number}", 100.0 + number)
    client = SmallPages(page=2)
    found = listings(tables, client).overdue(before=1000, limit=3)
    assert found == [("op-0", 100.0), ("op-1", 101.0), ("op-2", 102.0)]
    # Two pages: two found on the first, then only one more asked for
    assert [request["Limit"] for request in client.named("query")] == [3, 1]
    assert "ExclusiveStartKey" in client.named("query")[1]


def test_overdue_follows_pages_to_the_end_below_its_limit(store, tables):
    for number in range(5):
        scheduled(store, f"op-{number}", 100.0 + number)
    client = SmallPages(page=2)
    found = listings(tables, client).overdue(before=1000, limit=50)
    assert [operation_id for operation_id, _ in found] == [f"op-{number}" for number in range(5)]
    assert len(client.named("query")) == 3


def test_overdue_ignores_what_is_listed_under_other_keys(store, tables):
    scheduled(store, "op-due", 100.0)
    failed(store, "op-failed")
    assert store.state.pause(subject("op-paused"), "kill switch is off") is None
    assert listings(tables, SmallPages()).overdue(before=10**10, limit=10) == [("op-due", 100.0)]


# -- the operator's listing: one bounded call -----------------------------------------------------------------------


def test_listed_filters_by_job_type_and_since_through_the_sort_key(store, tables, clock):
    # Given FAILED operations of two job types, one listed earlier than the others
    failed(store, "op-early")
    since = clock.now() + 60
    clock.advance(120)
    failed(store, "op-late")
    failed(store, "op-other", job_type=OTHER_JOB)
    client = SmallPages()
    view = listings(tables, client)

    def ids(key: Any, job_type: str | None, since: float | None = None) -> list[str]:
        return sorted(row["operation_id"] for row in view.listed(key, job_type, since, 50, None).rows)

    # Then: by job type, by job type and since, and everything
    assert ids(OperationState.FAILED, JOB) == ["op-early", "op-late"]
    assert ids(OperationState.FAILED, JOB, since) == ["op-late"]
    assert ids(OperationState.FAILED, OTHER_JOB, since) == ["op-other"]
    assert ids(OperationState.FAILED, None) == ["op-early", "op-late", "op-other"]
    # And since without a job type is not served by the key: it lists everything under the key
    assert ids(OperationState.FAILED, None, since) == ["op-early", "op-late", "op-other"]
    assert ids(OperationState.PAUSED, JOB) == []


def test_listed_is_one_bounded_call_that_says_where_to_go_on(store, tables):
    for number in range(3):
        failed(store, f"op-{number}")
    client = SmallPages()
    view = listings(tables, client)
    first = view.listed(OperationState.FAILED, None, None, 2, None)
    assert len(first.rows) == 2 and first.evaluated == 2 and first.next_token is not None
    rest = view.listed(OperationState.FAILED, None, None, 2, first.next_token)
    assert len(rest.rows) == 1 and rest.next_token is None
    assert sorted(row["operation_id"] for row in first.rows + rest.rows) == ["op-0", "op-1", "op-2"]
    assert [request["Limit"] for request in client.named("query")] == [2, 2]
    assert client.named("query")[1]["ExclusiveStartKey"] == first.next_token
    # A limit below one still asks for one
    assert len(view.listed(OperationState.FAILED, None, None, 0, None).rows) == 1


def test_listed_conflicts_come_from_the_conflict_index_with_when_they_were_listed(store, tables):
    store.admit(JobRequest("op-1", JOB, PAYLOAD))
    entry = ConflictEntry("2030-01-01T00:00:01.000Z", "other", JOB, "jobs table: other content")
    assert store.state.record_conflict("op-1", entry, fingerprint(JOB, PAYLOAD))
    client = SmallPages()
    [row] = listings(tables, client).listed(Flag.CONFLICT, JOB, None, 10, None).rows
    assert row["operation_id"] == "op-1" and row["listed_at"]
    assert client.named("query")[0]["IndexName"] == "conflict-index"
    assert "begins_with(conflict_sk" in client.named("query")[0]["KeyConditionExpression"]


def test_a_stuck_row_carries_its_kind_and_reason_apart(store, tables):
    seen = store.state.record("op-1")
    assert store.state.mark_stuck(
        seen, StuckKind.DEAD_LETTERED, "its message is in the DLQ: redrive it", subject("op-1")
    )
    [row] = listings(tables, SmallPages()).listed(Flag.STUCK, None, None, 10, None).rows
    assert row["stuck_kind"] == "dead_lettered"
    assert row["stuck_reason"] == "its message is in the DLQ: redrive it"  # split on the first ": " only
    assert row["listed_at"] == row["attention_sk"].rpartition("#")[2]


def test_an_index_row_without_a_sort_key_has_no_listing_time():
    row = listing_row({"operation_id": {"S": "op-1"}, "attempts": {"N": "2"}})
    assert row == {"operation_id": "op-1", "attempts": 2, "listed_at": None}


def test_an_index_row_reads_the_conflict_sort_key_too():
    row = listing_row({"operation_id": {"S": "op-1"}, "conflict_sk": {"S": f"{JOB}#2030-01-02T00:00:00.000Z"}})
    assert row["listed_at"] == "2030-01-02T00:00:00.000Z"


# -- requests: the bounded scan of the jobs table ---------------------------------------------------------------------


def admitted(store) -> None:
    store.admit(JobRequest("op-1", JOB, PAYLOAD, correlation_id="order-1"))
    store.admit(JobRequest("op-2", JOB, PAYLOAD, correlation_id="order-2"))
    store.admit(JobRequest("op-3", OTHER_JOB, PAYLOAD, correlation_id="order-1"))
    store.admit(JobRequest("op-4", OTHER_JOB, PAYLOAD))


@pytest.mark.parametrize(
    ("job_type", "correlation_id", "expected"),
    [
        (None, None, ["op-1", "op-2", "op-3", "op-4"]),
        (JOB, None, ["op-1", "op-2"]),
        (None, "order-1", ["op-1", "op-3"]),
        (OTHER_JOB, "order-1", ["op-3"]),
        (JOB, "order-9", []),
        (None, "", []),  # an empty correlation id filters (it matches none), it is not "no filter"
    ],
)
def test_requests_scan_the_jobs_table_filtered_by_job_type_and_correlation_id(
    store, tables, job_type, correlation_id, expected
):
    admitted(store)
    client = SmallPages()
    found = listings(tables, client).requests(job_type, correlation_id, 100, None)
    assert sorted(row["operation_id"] for row in found.rows) == expected
    assert found.evaluated == 4 and found.next_token is None
    [request] = client.named("scan")
    assert request["TableName"] == tables["jobs"] and request["Limit"] == 100
    assert ("FilterExpression" in request) is (job_type is not None or correlation_id is not None)


def test_requests_rows_hold_the_projected_strings_only(store, tables):
    admitted(store)
    rows = {row["operation_id"]: row for row in listings(tables, SmallPages()).requests(None, None, 100, None).rows}
    assert rows["op-1"] == {"operation_id": "op-1", "job_type": JOB, "correlation_id": "order-1"}
    assert rows["op-4"] == {"operation_id": "op-4", "job_type": OTHER_JOB}


def test_requests_evaluate_at_most_their_limit_and_go_on_from_the_token(store, tables):
    admitted(store)
    client = SmallPages()
    view = listings(tables, client)
    # A filtered scan evaluates `limit` items, whatever it keeps of them
    first = view.requests(OTHER_JOB, None, 2, None)
    assert first.evaluated == 2 and first.next_token is not None
    seen = [row["operation_id"] for row in first.rows]
    token = first.next_token
    while token:
        page = view.requests(OTHER_JOB, None, 2, token)
        seen += [row["operation_id"] for row in page.rows]
        token = page.next_token
    assert sorted(seen) == ["op-3", "op-4"]
    assert client.named("scan")[1]["ExclusiveStartKey"] == first.next_token


def test_requests_are_joined_with_their_correlation_ids_and_their_records(store, tables):
    # Given requests, one taken and failed, one stuck, one never taken
    admitted(store)
    failed(store, "op-1")
    seen = store.state.record("op-3")
    assert store.state.mark_stuck(
        seen, StuckKind.UNDISPATCHED, "its schedule could not be made", subject("op-3", OTHER_JOB)
    )
    view = listings(tables, SmallPages())
    # When index rows are given their correlation ids (which only the jobs table holds)
    rows = view.with_correlation_ids([{"operation_id": "op-1"}, {"operation_id": "op-4"}, {"operation_id": "gone"}])
    assert [row.get("correlation_id") for row in rows] == ["order-1", None, None]
    # And scanned requests are joined with their state records
    joined = {
        row["operation_id"]: row
        for row in view.with_records(
            [
                {"operation_id": "op-1", "job_type": JOB, "correlation_id": "order-1"},
                {"operation_id": "op-3", "job_type": OTHER_JOB, "correlation_id": "order-1"},
                {"operation_id": "op-4", "job_type": OTHER_JOB},
            ]
        )
    }
    # Then a taken one shows its record, a stuck one its reason, one never taken is ACCEPTED with no attempts
    assert joined["op-1"]["state"] == "FAILED" and joined["op-1"]["attempts"] == 1
    assert joined["op-1"]["last_error"] == "TransientError: down" and joined["op-1"]["updated_at"]
    assert joined["op-1"]["correlation_id"] == "order-1" and "stuck_kind" not in joined["op-1"]
    assert joined["op-3"]["stuck_kind"] == "undispatched"
    assert joined["op-3"]["stuck_reason"] == "its schedule could not be made"
    assert joined["op-4"] == {
        "operation_id": "op-4",
        "job_type": OTHER_JOB,
        "correlation_id": None,
        "state": "ACCEPTED",
        "attempts": 0,
        "last_error": None,
        "updated_at": None,
    }


def test_a_record_without_a_job_type_shows_the_requests(store, tables):
    # A stuck mark written from the request alone (no delivery yet) may carry no job type of its own
    store.admit(JobRequest("op-1", JOB, PAYLOAD))
    assert store.state.mark_stuck(store.state.record("op-1"), StuckKind.UNDISPATCHED, "not sent")
    assert store.state.record("op-1").job_type in (None, "")
    [row] = listings(tables, SmallPages()).with_records([{"operation_id": "op-1", "job_type": JOB}])
    assert (row["job_type"], row["state"], row["stuck_kind"]) == (JOB, "ACCEPTED", "undispatched")


def test_joins_read_a_hundred_ids_a_call_and_ask_again_for_what_was_left_unprocessed(store, tables):
    # Given 130 requests, and a DynamoDB that leaves 7 keys of its first answer unprocessed
    for number in range(130):
        store.admit(JobRequest(f"op-{number:03}", JOB, PAYLOAD, correlation_id=f"order-{number}"))
    client = SmallPages(unprocessed_first=7)
    rows = [{"operation_id": f"op-{number:03}"} for number in range(130)]
    # When they are given their correlation ids
    listings(tables, client).with_correlation_ids(rows)
    # Then every row has its own, from three calls: 100 asked (7 left), the 7 again, then the last 30
    assert [row["correlation_id"] for row in rows] == [f"order-{number}" for number in range(130)]
    asked = [len(request["RequestItems"][tables["jobs"]]["Keys"]) for request in client.named("batch_get_item")]
    assert asked == [100, 7, 30]


def test_joins_project_only_what_they_show(store, tables):
    store.admit(JobRequest("op-1", JOB, PAYLOAD))
    client = SmallPages()
    view = listings(tables, client)
    view.with_records([{"operation_id": "op-1"}])
    view.with_correlation_ids([{"operation_id": "op-1"}])
    records, requests = client.named("batch_get_item")
    [(_, ask)] = records["RequestItems"].items()
    assert sorted(ask["ExpressionAttributeNames"].values()) == sorted(SCAN_PROJECTION)
    assert ask["ProjectionExpression"] == ", ".join(ask["ExpressionAttributeNames"])
    [(_, ask)] = requests["RequestItems"].items()
    assert sorted(ask["ExpressionAttributeNames"].values()) == ["correlation_id", "operation_id"]


def test_a_join_of_no_rows_reads_nothing(tables):
    client = SmallPages()
    assert listings(tables, client).with_records([]) == []
    assert client.calls == []


def test_a_join_whose_every_key_was_left_unprocessed_asks_again_for_all(store, tables):
    # Given a DynamoDB that reads none of the first call's keys (throttled: its answer names no table)
    for number in range(3):
        store.admit(JobRequest(f"op-{number}", JOB, PAYLOAD, correlation_id=f"order-{number}"))
    client = SmallPages(unprocessed_first=3)
    rows = [{"operation_id": f"op-{number}"} for number in range(3)]
    # When the rows are given their correlation ids
    listings(tables, client).with_correlation_ids(rows)
    # Then the second call reads them all
    assert [row["correlation_id"] for row in rows] == ["order-0", "order-1", "order-2"]
    assert len(client.named("batch_get_item")) == 2


def test_a_request_attribute_a_producer_wrote_as_another_type_is_left_out_of_its_row(store, tables):
    # Given a producer's raw item whose correlation id is a number (the relay refuses it; the jobs table holds it)
    boto3.client("dynamodb").put_item(
        TableName=tables["jobs"],
        Item={"operation_id": {"S": "op-raw"}, "job_type": {"S": JOB}, "correlation_id": {"N": "42"}},
    )
    # When the operator's scan lists the jobs table
    [row] = listings(tables, SmallPages()).requests(None, None, 10, None).rows
    # Then the row holds what it can show, and the rest of the listing is unharmed
    assert row == {"operation_id": "op-raw", "job_type": JOB}
