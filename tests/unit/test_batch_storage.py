"""A batch as stored: the items of the batches table under their names, the manifest's fingerprint as a stable
value, and the children's BatchWriteItem when DynamoDB leaves some of them unprocessed.

The operator's tools, the reconciler's sweeps and an admission made by a later version of converge read these
items back by name, and compare the fingerprint an earlier version stored: a write that stores an attribute
under another name, or a fingerprint computed another way, breaks them as surely as a lost write would.
"""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from converge.model.batches import BatchCallback, BatchChange, BatchChild, manifest_fingerprint
from converge.model.errors import OperationNotFound
from converge.model.request import JobRequest
from converge.model.states import OperationState
from converge.store.batches import BatchesTable, batch_from_item

from .batch_fixtures import CALLBACK, children
from .conftest import ClientProxy, sent

AT = "2030-01-01T00:00:00.000Z"


def batches_item(table: str, pk: str) -> dict[str, Any]:
    return boto3.client("dynamodb").get_item(TableName=table, Key={"pk": {"S": pk}}).get("Item", {})


# -- the manifest's fingerprint ------------------------------------------------------------------------------------


def test_a_manifests_fingerprint_is_the_same_value_release_after_release():
    # A batch id admitted by one version is compared, when enqueued again, with the fingerprint that version
    # stored: the value of a fixed manifest is pinned, so a change to how it is computed is seen here first.
    two = [BatchChild(f"p-{i}", "mail.statement.v1", {"partner_id": f"p-{i}"}) for i in range(2)]
    assert manifest_fingerprint(two, CALLBACK) == "0814e500263bd8b3235aa0d4d311a463"
    assert manifest_fingerprint([], CALLBACK) == "05d7c371003079b975f535570bcd2117"


def test_every_part_of_a_manifest_changes_its_fingerprint():
    base = [BatchChild("p-0", "mail.statement.v1", {"partner_id": "p-0"})]
    fingerprint = manifest_fingerprint(base, CALLBACK)
    others = [
        ([BatchChild("p-9", "mail.statement.v1", {"partner_id": "p-0"})], CALLBACK),
        ([BatchChild("p-0", "mail.other.v1", {"partner_id": "p-0"})], CALLBACK),
        ([BatchChild("p-0", "mail.statement.v1", {"partner_id": "p-9"})], CALLBACK),
        (base, BatchCallback(CALLBACK.job_type, {"month": "2026-12"})),
        (base, BatchCallback("mail.other-summary.v1", dict(CALLBACK.payload))),
        (base + base, CALLBACK),
    ]
    found = [manifest_fingerprint(kids, callback) for kids, callback in others]
    assert fingerprint not in found and len(set(found)) == len(found)
    assert len(fingerprint) == 32


# -- the items of the batches table ------------------------------------------------------------------------------


def test_a_batchs_record_its_shards_and_its_chunks_of_keys_are_stored_under_their_names(bapp):
    # When a batch of three children is admitted
    bapp.enqueue_batch("b-items", children(3), CALLBACK)
    table = bapp.settings.batches_table
    # Then its record holds each attribute under its name (written counts the children, chunks the key pages)
    record = batches_item(table, "b-items")
    assert {name: next(iter(value.values())) for name, value in record.items() if name != "callback_payload"} == {
        "pk": "b-items",
        "kind": "batch",
        "state": "open",
        "fingerprint": manifest_fingerprint(children(3), CALLBACK),
        "total": "3",
        "shards": "1",
        "callback_job_type": CALLBACK.job_type,
        "created_at": record["created_at"]["S"],
        "opened_at": record["opened_at"]["S"],
        "written": "3",
        "chunks": "1",
    }
    # And its one counting shard says what it is and has a place for each child it counts ("-": not final yet); its
    # chunk of keys likewise
    items = boto3.client("dynamodb").scan(TableName=table)["Items"]
    shards = [item for item in items if item.get("kind", {}).get("S") == "shard"]
    assert [(item["kind"]["S"], [place["S"] for place in item["children"]["L"]]) for item in shards] == [
        ("shard", ["-", "-", "-"])
    ]
    keys = [item for item in items if item.get("kind", {}).get("S") == "keys"]
    assert [[key["S"] for key in item["keys"]["L"]] for item in keys] == [["p-0", "p-1", "p-2"]]


def test_a_new_record_starts_with_nothing_written(bapp):
    table: BatchesTable = bapp.require_batches().table
    assert table.begin("b-new", "fp", 3, 1, CALLBACK.job_type, dict(CALLBACK.payload), AT) is None
    record = batches_item(bapp.settings.batches_table, "b-new")
    assert (record["written"], record["chunks"], record["state"]) == ({"N": "0"}, {"N": "0"}, {"S": "admitting"})


def test_a_chunk_written_again_adds_nothing_and_raises_nothing(bapp):
    # Given a record and one chunk of its children written
    table: BatchesTable = bapp.require_batches().table
    table.begin("b-chunk", "fp", 2, 1, CALLBACK.job_type, dict(CALLBACK.payload), AT)
    requests = [JobRequest(f"b-chunk::0:p-{i}", "mail.statement.v1", {"partner_id": f"p-{i}"}) for i in range(2)]
    table.write_chunk("b-chunk", 0, ["p-0", "p-1"], requests)
    # When the same chunk is written again (a retried admission) / Then its count is not added twice
    table.write_chunk("b-chunk", 0, ["p-0", "p-1"], requests)
    record = batches_item(bapp.settings.batches_table, "b-chunk")
    assert (record["written"], record["chunks"]) == ({"N": "2"}, {"N": "1"})


# -- an id that exists already -------------------------------------------------------------------------------------


def test_an_id_that_exists_answers_with_the_record_the_refused_put_returned_and_reads_nothing(bapp):
    table: BatchesTable = bapp.require_batches().table
    table.begin("b-twice", "first", 3, 1, CALLBACK.job_type, dict(CALLBACK.payload), AT)
    calls = sent(bapp.clients.dynamodb)
    held = table.begin("b-twice", "second", 3, 1, CALLBACK.job_type, dict(CALLBACK.payload), AT)
    assert held is not None and held.fingerprint == "first" and held.callback_payload == dict(CALLBACK.payload)
    assert [name for name, _ in calls] == ["PutItem"]
    assert calls[0][1]["ReturnValuesOnConditionCheckFailure"] == "ALL_OLD"


class WithoutOldItem(ClientProxy):
    """The DynamoDB client, but a refused put's error carries no item (as a service that ignores
    ReturnValuesOnConditionCheckFailure answers)."""

    def put_item(self, **params: Any) -> Any:
        try:
            return self._client.put_item(**params)
        except ClientError as exc:
            exc.response.pop("Item", None)
            raise


def test_an_id_that_exists_is_read_when_the_refusal_carries_no_item(bapp):
    table = bapp.require_batches().table
    table.begin("b-read", "first", 3, 1, CALLBACK.job_type, dict(CALLBACK.payload), AT)
    bare = BatchesTable(bapp.settings.batches_table, "converge-jobs", WithoutOldItem(bapp.clients.dynamodb))
    held = bare.begin("b-read", "second", 3, 1, CALLBACK.job_type, dict(CALLBACK.payload), AT)
    assert held is not None and held.fingerprint == "first"


def test_a_batch_that_does_not_exist_is_named_in_the_error(bapp):
    with pytest.raises(OperationNotFound, match="no batch 'b-missing'"):
        bapp.require_batches().require("b-missing")


# -- children left unprocessed ----------------------------------------------------------------------------------


class Unprocessing(ClientProxy):
    """The DynamoDB client, but BatchWriteItem leaves its last `leave` puts unprocessed (as DynamoDB does under
    throttling), on its first `times` calls (all of them when None): the puts it keeps are written, the rest
    come back in UnprocessedItems."""

    def __init__(self, client: Any, leave: int, times: int | None = None) -> None:
        super().__init__(client)
        self.leave = leave
        self.times = times
        self.sizes: list[int] = []

    def batch_write_item(self, RequestItems: dict[str, list[Any]]) -> dict[str, Any]:
        ((table, puts),) = RequestItems.items()
        self.sizes.append(len(puts))
        leave = self.leave if self.times is None or len(self.sizes) <= self.times else 0
        keep = puts[: max(0, len(puts) - leave)]
        if keep:
            self._client.batch_write_item(RequestItems={table: keep})
        left = puts[len(keep) :]
        return {"UnprocessedItems": {table: left} if left else {}}


def _requests(count: int) -> list[JobRequest]:
    return [JobRequest(f"b-u::0:p-{i}", "mail.statement.v1", {"partner_id": f"p-{i}"}) for i in range(count)]


def test_children_unprocessed_once_are_all_written(bapp):
    # A client that leaves the last two puts unprocessed on its first call only
    client = Unprocessing(bapp.clients.dynamodb, leave=2, times=1)
    slept: list[float] = []
    table = BatchesTable(bapp.settings.batches_table, "converge-jobs", client, sleep=slept.append)
    table.begin("b-u", "fp", 5, 1, CALLBACK.job_type, {}, AT)
    table.write_chunk("b-u", 0, [f"p-{i}" for i in range(5)], _requests(5))
    # Then the two left are sent again once, after one short pause, and every child is in the jobs table
    assert client.sizes == [5, 2] and slept == [0.05]
    written = boto3.client("dynamodb").scan(TableName="converge-jobs")["Items"]
    assert sorted(item["operation_id"]["S"] for item in written) == [f"b-u::0:p-{i}" for i in range(5)]


def test_children_never_processed_stop_the_admission_after_eight_attempts(bapp):
    client = Unprocessing(bapp.clients.dynamodb, leave=25)
    slept: list[float] = []
    table = BatchesTable(bapp.settings.batches_table, "converge-jobs", client, sleep=slept.append)
    table.begin("b-u", "fp", 3, 1, CALLBACK.job_type, {}, AT)
    with pytest.raises(
        RuntimeError, match=r"^the jobs table left children unprocessed after 8 attempts; enqueue the batch again$"
    ):
        table.write_chunk("b-u", 0, ["p-0", "p-1", "p-2"], _requests(3))
    # Eight calls, each after a longer pause (capped at a second), and the record's progress is not moved
    assert client.sizes == [3] * 8
    assert slept == [0.05, 0.1, 0.2, 0.4, 0.8, 1.0, 1.0, 1.0]
    assert batches_item(bapp.settings.batches_table, "b-u")["written"] == {"N": "0"}


class UnreadKeys(ClientProxy):
    """The DynamoDB client, but BatchGetItem leaves its last `leave` keys unprocessed (as DynamoDB does under
    throttling or past its 16 MB), on its first `times` calls (all of them when None). An answer that read
    nothing carries no `Responses` at all when `bare`, else `Responses` without the table."""

    def __init__(self, client: Any, leave: int, times: int | None = None, bare: bool = False) -> None:
        super().__init__(client)
        self.leave, self.times, self.bare = leave, times, bare
        self.sizes: list[int] = []

    def batch_get_item(self, RequestItems: dict[str, dict[str, Any]]) -> dict[str, Any]:
        ((table, request),) = RequestItems.items()
        keys = request["Keys"]
        self.sizes.append(len(keys))
        leave = self.leave if self.times is None or len(self.sizes) <= self.times else 0
        read, left = keys[: max(0, len(keys) - leave)], keys[max(0, len(keys) - leave) :]
        answer: dict[str, Any] = {} if self.bare and not read else {"Responses": {}}
        if read:
            answer = self._client.batch_get_item(RequestItems={table: {**request, "Keys": read}})
        answer["UnprocessedKeys"] = {table: {**request, "Keys": left}} if left else {}
        return answer


def _counted_shards(bapp, client: Any, slept: list[float]) -> BatchesTable:
    """A batch "b-c" of 3 shards expecting 2, 2 and 1 children, the first with one SUCCEEDED; read via `client`."""
    table = BatchesTable(bapp.settings.batches_table, "converge-jobs", client, sleep=slept.append)
    table.ensure_shards("b-c", [2, 2, 1])
    boto3.client("dynamodb").update_item(
        TableName=bapp.settings.batches_table,
        Key={"pk": {"S": "b-c#s0"}},
        UpdateExpression="SET children[1] = :succeeded",
        ExpressionAttributeValues={":succeeded": {"S": "S"}},
    )
    return table


def test_shards_left_unread_once_are_read_again_and_all_come_back(bapp):
    # Given a client that leaves the last two shard keys unread on its first call only
    client, slept = UnreadKeys(bapp.clients.dynamodb, leave=2, times=1), []
    table = _counted_shards(bapp, client, slept)
    # When every shard's counts are read
    counts = table.all_counts("b-c", 3)
    # Then the two left are asked for again once, after one short pause, and every shard comes back in order
    assert client.sizes == [3, 2] and slept == [0.05]
    assert counts == [(2, {"SUCCEEDED": 1}), (2, {}), (1, {})]


@pytest.mark.parametrize("bare", [False, True], ids=["responses-without-the-table", "no-responses"])
def test_shards_never_read_are_asked_for_eight_times_and_left_out(bapp, bare):
    # Given a client that never reads any of the three shard keys
    client, slept = UnreadKeys(bapp.clients.dynamodb, leave=3, bare=bare), []
    table = _counted_shards(bapp, client, slept)
    # When every shard's counts are read
    counts = table.all_counts("b-c", 3)
    # Then eight calls, each after a longer pause (capped at a second), and no shard comes back (an answer that
    # reads nothing is no error): the caller sees fewer shards than the batch has
    assert client.sizes == [3] * 8
    assert slept == [0.05, 0.1, 0.2, 0.4, 0.8, 1.0, 1.0, 1.0]
    assert counts == []


def test_a_batch_opened_again_or_already_complete_is_left_as_it_is(bapp):
    # Given a batch's record opened once
    table = BatchesTable(bapp.settings.batches_table, "converge-jobs", bapp.clients.dynamodb)
    table.begin("b-o", "fp", 1, 1, CALLBACK.job_type, {}, AT)
    table.open("b-o", AT)
    assert batches_item(bapp.settings.batches_table, "b-o")["state"] == {"S": "open"}
    # When it is opened again, later (a retried admission)
    table.open("b-o", "2030-01-02T00:00:00.000Z")
    # Then nothing is raised and the record keeps its first opening, which the batch shows
    assert batches_item(bapp.settings.batches_table, "b-o")["opened_at"] == {"S": AT}
    assert bapp.require_batches().require("b-o").opened_at == AT


def test_a_chunk_of_keys_is_read_strongly_consistent_only_when_asked(bapp):
    # Given a chunk of a batch's child keys written
    table = BatchesTable(bapp.settings.batches_table, "converge-jobs", bapp.clients.dynamodb)
    table.write_chunk("b-k", 0, ["k-0", "k-1"], [])
    calls = sent(bapp.clients.dynamodb)
    # When it is read by default (paging a batch's children), then asked consistent (a chunk written a moment ago)
    assert table.keys("b-k", 0) == ["k-0", "k-1"]
    assert table.keys("b-k", 0, consistent=True) == ["k-0", "k-1"]
    # Then the first read is eventually consistent (half the read's cost), the second strongly consistent
    assert [params.get("ConsistentRead") for name, params in calls if name == "GetItem"] == [False, True]


class Throttled(ClientProxy):
    """The DynamoDB client, but UpdateItem is refused for throughput (not for its condition)."""

    def update_item(self, **_: Any) -> dict[str, Any]:
        error = {"Error": {"Code": "ProvisionedThroughputExceededException", "Message": "slow down"}}
        raise ClientError(error, "UpdateItem")


def test_opening_a_batch_refused_for_another_reason_than_its_state_raises(bapp):
    table = BatchesTable(bapp.settings.batches_table, "converge-jobs", Throttled(bapp.clients.dynamodb))
    with pytest.raises(ClientError, match="ProvisionedThroughputExceeded"):
        table.open("b-t", AT)


def test_a_record_missing_its_attributes_reads_as_empty_text_and_no_summary():
    # Given a batch's record that holds nothing but its key (or whose attributes were lost)
    batch = batch_from_item({"pk": {"S": "b-bare"}}, {})
    # Then its texts are empty (never made up), its numbers zero, and it has no summary, opening or changes
    assert (batch.batch_id, batch.fingerprint, batch.callback_job_type, batch.created_at) == ("b-bare", "", "", "")
    assert (batch.total, batch.shards, batch.written, batch.chunks) == (0, 0, 0, 0)
    assert (batch.summary, batch.opened_at, batch.completed_at, batch.changes) == (None, None, None, ())
    assert batch_from_item({}, {}).batch_id == ""
    # And a number that does not read as one counts as zero
    assert batch_from_item({"pk": {"S": "b"}, "total": {"N": "many"}, "shards": {"N": None}}, {}).total == 0
    assert batch_from_item({"pk": {"S": "b"}, "shards": {"N": None}}, {}).shards == 0


def test_changes_after_the_callback_of_the_wrong_shape_read_as_empty_changes():
    # Given a record whose changes are not a list, and one whose list holds an entry that is not a map, an empty
    # map and a whole change
    assert batch_from_item({"pk": {"S": "b"}, "changes": {"S": "not a list"}}, {}).changes == ()
    whole = {"M": {"at": {"S": "t"}, "child": {"S": "c"}, "before": {"S": "FAILED"}, "after": {"S": "SUCCEEDED"}}}
    item = {"pk": {"S": "b"}, "changes": {"L": [{"S": "not a map"}, {"M": {}}, whole]}}
    # Then each entry is a change, its missing fields empty text
    assert batch_from_item(item, {}).changes == (
        BatchChange("", "", "", ""),
        BatchChange("", "", "", ""),
        BatchChange("t", "c", "FAILED", "SUCCEEDED"),
    )


# -- counting ---------------------------------------------------------------------------------------------------


def test_places_set_again_count_nothing_twice_and_say_what_they_held(bapp):
    # Given a shard of three places
    table: BatchesTable = bapp.require_batches().table
    table.ensure_shards("b-p", [3])
    # When two children are placed, and one of them again, then moved (an operator reopened it, it settled again)
    assert table.place("b-p", 0, {0: OperationState.FAILED, 2: OperationState.SUCCEEDED}) == ("---", "F-S")
    assert table.place("b-p", 0, {2: OperationState.SUCCEEDED}) == ("F-S", "F-S")
    assert table.place("b-p", 0, {0: OperationState.SUCCEEDED, 1: OperationState.UNKNOWN}) == ("F-S", "SUS")
    # Then each child is counted once, as it stands
    assert table.all_counts("b-p", 1) == [(3, {"SUCCEEDED": 2, "UNKNOWN": 1})]


def test_a_place_past_its_shards_end_writes_nothing(bapp):
    # (a child of no batch never gets here: the counter finds no place for it, `ReservedIds.place`)
    table: BatchesTable = bapp.require_batches().table
    table.ensure_shards("b-q", [2])
    assert table.place("b-q", 0, {2: OperationState.SUCCEEDED}) is None
    assert table.all_counts("b-q", 1) == [(2, {})]


def test_more_places_than_one_write_takes_are_set_in_writes_of_a_hundred(bapp):
    table: BatchesTable = bapp.require_batches().table
    table.ensure_shards("b-r", [250])
    calls = sent(bapp.clients.dynamodb)
    before, after = table.place("b-r", 0, {place: OperationState.NOOP for place in range(250)}) or ("", "")
    assert [name for name, _ in calls] == ["UpdateItem"] * 3
    assert (before, after) == ("-" * 250, "N" * 250)
    assert table.all_counts("b-r", 1) == [(250, {"NOOP": 250})]


def test_one_shards_counts_are_read_strongly_consistent_right_after_its_places_are_set(bapp):
    # Given a shard of two places, one child just placed (a worker's counter update)
    table: BatchesTable = bapp.require_batches().table
    table.ensure_shards("b-s", [2])
    table.place("b-s", 0, {1: OperationState.SUCCEEDED})
    calls = sent(bapp.clients.dynamodb)
    # When that shard's counts are read
    counts = table.shard_counts("b-s", 0)
    # Then they include the place just set, read in one GetItem that asks for a strongly consistent read (an eventually
    # consistent one may miss a write a moment old: DynamoDB's, not moto's, which is always consistent)
    assert counts == (2, {"SUCCEEDED": 1})
    assert [(name, params.get("ConsistentRead")) for name, params in calls] == [("GetItem", True)]


def test_a_batchs_record_is_read_strongly_consistent(bapp):
    # Given a batch's record just written (its admission, or a condition that failed on it a moment ago)
    table = BatchesTable(bapp.settings.batches_table, "converge-jobs", bapp.clients.dynamodb)
    table.begin("b-c", "fp", 1, 1, CALLBACK.job_type, {}, AT)
    calls = sent(bapp.clients.dynamodb)
    # When the batch is read without its counts
    found = table.batch("b-c", with_counts=False)
    # Then the record is there, read in one GetItem that asks for a strongly consistent read (an eventually consistent
    # one may miss the write a moment old, on DynamoDB; moto is always consistent)
    assert found is not None and found.batch_id == "b-c"
    assert [(name, params.get("ConsistentRead")) for name, params in calls] == [("GetItem", True)]
    # And with its counts, its shards are read strongly consistent too (a child placed a moment ago counts)
    calls.clear()
    assert table.batch("b-c") is not None
    batch_gets = [params["RequestItems"] for name, params in calls if name == "BatchGetItem"]
    assert batch_gets and all(request["ConsistentRead"] for items in batch_gets for request in items.values())


def test_a_shards_places_are_read_by_their_letters_and_a_malformed_place_counts_as_not_final(bapp):
    # Given a shard of four places (as a hand edit or a partial restore might leave it): a child SUCCEEDED, one whose
    # place is a number, one whose place is not a value at all, and one FAILED; it also holds an earlier converge's
    # child count and numbers, which its places supersede
    shard = {
        "pk": {"S": "b-m#s0"},
        "kind": {"S": "shard"},
        "children": {"L": [{"S": "S"}, {"N": "1"}, {"L": []}, {"S": "F"}]},
        "expected": {"N": "9"},
        "SUCCEEDED": {"N": "7"},
    }
    boto3.client("dynamodb").put_item(TableName=bapp.settings.batches_table, Item=shard)
    table = BatchesTable(bapp.settings.batches_table, "converge-jobs", bapp.clients.dynamodb)
    # When its counts are read / Then four children, one SUCCEEDED and one FAILED: the malformed places are not final
    # (nothing raised), and the earlier shape's numbers are not read where places are
    assert table.all_counts("b-m", 1) == [(4, {"SUCCEEDED": 1, "FAILED": 1})]
