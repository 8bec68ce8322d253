"""A batch as an operator meets it: the reconciler's findings over several batches at once, the reason a batch
is listed with (word for word), what a cancel answers, the callback's state, and the batch record's writes
that may be refused (a reason for a batch that moved on, the changes after the callback past their limit)."""

from __future__ import annotations

import boto3
import pytest
from botocore.exceptions import ClientError

from converge.model.batches import ADMISSION_GRACE_SECONDS, BatchChange, BatchState, callback_id
from converge.model.outcomes import Outcome
from converge.store import batches as batches_store

from .batch_fixtures import CALLBACK, child_ids, children, counted, deliver_all
from .conftest import sent


def stop_admission(app, batch_id: str, total: int) -> None:
    """Admit `total` children, the producer dying after the first chunk (of 100)."""
    table = app.require_batches().table
    real = table.write_chunk

    def crash_on_second(batch_id, chunk, keys, requests):
        if chunk == 1:
            raise ConnectionError("the producer died mid-admission")
        return real(batch_id, chunk, keys, requests)

    table.write_chunk = crash_on_second
    try:
        with pytest.raises(ConnectionError):
            app.enqueue_batch(batch_id, children(total), CALLBACK)
    finally:
        table.write_chunk = real


def settle_unobserved(app, monkeypatch, batch_id: str, count: int) -> None:
    """Admit a batch and settle every child, counted, the counter's look at the batch after them lost."""
    app.enqueue_batch(batch_id, children(count), CALLBACK)
    batches = app.require_batches()
    monkeypatch.setattr(batches, "observe", lambda *_: False)
    assert set(deliver_all(app, child_ids(app, batch_id))) == {Outcome.SUCCEEDED}
    monkeypatch.undo()


def test_one_reconciler_pass_finds_and_counts_every_batch_that_needs_it(bapp, monkeypatch):
    # Given two admissions stopped halfway, exactly the grace period ago
    stop_admission(bapp, "s-1", 150)
    stop_admission(bapp, "s-2", 120)
    bapp.clock.advance(ADMISSION_GRACE_SECONDS)
    # and a third stopped just now (perhaps still under way), and two batches settled whose callback is missing
    stop_admission(bapp, "s-0", 130)
    settle_unobserved(bapp, monkeypatch, "c-1", 2)
    settle_unobserved(bapp, monkeypatch, "c-2", 3)
    batches = bapp.require_batches()
    # (the fresh admission read first: what comes after it is examined as well)
    real = batches.table.unfinished
    monkeypatch.setattr(
        batches.table, "unfinished", lambda: iter(sorted(real(), key=lambda batch: batch.batch_id, reverse=True))
    )
    # When the reconciler's pass over batches runs
    found = batches.reconcile({})
    # Then it examined all five, wrote both callbacks, and listed both stopped admissions (the grace is over)
    assert (found.examined, found.callbacks_written, found.admissions_stopped, found.listed) == (5, 2, 2, 2)
    assert sorted((entry["batch_id"], entry["action"]) for entry in found.details) == [
        ("c-1", "callback_written"),
        ("c-2", "callback_written"),
        ("s-1", "listed"),
        ("s-2", "listed"),
    ]
    # and each stopped admission is listed with the whole reason, word for word
    s1 = batches.require("s-1")
    assert s1.listed == (
        f"admission stopped at 100 of 150 children (begun {s1.created_at}): converge stores the manifest's "
        "fingerprint, not its children, so only the producer can finish it: enqueue the batch again with the same "
        "children and callback"
    )
    assert batches.require("s-0").listed is None
    assert {batches.require(b).state for b in ("c-1", "c-2")} == {BatchState.COMPLETE}


def test_a_batch_held_by_many_children_names_three_of_them(bapp):
    # Given a batch whose children are listed under STUCK, four of them, and another whose three are
    bapp.enqueue_batch("h-1", children(4), CALLBACK)
    bapp.enqueue_batch("h-2", children(3), CALLBACK)
    held = {"h-1": {"STUCK": ["d", "b", "c", "a"]}, "h-2": {"STUCK": ["c", "a", "b"]}}
    # When the reconciler looks
    found = bapp.require_batches().reconcile(held)
    # Then each is listed, naming the first three children in order, and saying when there are more
    batches = bapp.require_batches()
    assert found.listed == 2
    assert batches.require("h-1").listed == "4 children STUCK (a, b, c …): converge ops list --state STUCK"
    assert batches.require("h-2").listed == "3 children STUCK (a, b, c): converge ops list --state STUCK"


def test_every_reason_a_batch_is_held_is_given_and_recorded_in_the_findings(bapp, outcomes):
    # Given a batch of three: one child UNKNOWN, and two listed under STUCK
    bapp.enqueue_batch("j-1", children(3), CALLBACK)
    first, second, third = child_ids(bapp, "j-1")
    outcomes.unknowable.add(first)
    deliver_all(bapp, [first])
    # When the reconciler looks
    found = bapp.require_batches().reconcile({"j-1": {"STUCK": [third, second]}})
    # Then the batch is listed with both reasons, and the findings say so
    reason = (
        "1 children UNKNOWN: resolve them (converge ops resolve), the callback follows; "
        f"2 children STUCK ({second}, {third}): converge ops list --state STUCK"
    )
    assert found.details == [{"batch_id": "j-1", "action": "listed", "reason": reason}]
    assert bapp.require_batches().require("j-1").listed == reason


def test_the_batches_not_complete_are_read_page_after_page(bapp, monkeypatch):
    # Given four batches, one of them complete, and DynamoDB answering a scan two items at a time
    for batch_id in ("u-1", "u-2", "u-3", "u-4"):
        bapp.enqueue_batch(batch_id, children(1), CALLBACK)
    deliver_all(bapp, child_ids(bapp, "u-4"))
    table = bapp.require_batches().table
    client = table._client
    real_scan = client.scan
    pages: list[int] = []

    def small_pages(**request):
        answer = real_scan(**request, Limit=2)
        pages.append(len(answer["Items"]))
        return answer

    monkeypatch.setattr(client, "scan", small_pages)
    # When the batches not complete are read
    unfinished = sorted(batch.batch_id for batch in table.unfinished())
    # Then every page was read, and the three open batches found
    assert unfinished == ["u-1", "u-2", "u-3"] and len(pages) > 2


def test_the_listing_of_batches_goes_on_from_where_its_page_ended(bapp, monkeypatch):
    # Given five batches, and DynamoDB answering a scan three items at a time (records, shards and keys alike)
    for batch_id in ("v-1", "v-2", "v-3", "v-4", "v-5"):
        bapp.enqueue_batch(batch_id, children(1), CALLBACK)
    table = bapp.require_batches().table
    real_scan = table._client.scan
    monkeypatch.setattr(table._client, "scan", lambda **request: real_scan(**request, Limit=3))
    # When they are listed two a page
    first, token = table.batches(2, None, listed_only=False)
    second, token_2 = table.batches(2, token, listed_only=False)
    third, token_3 = table.batches(2, token_2, listed_only=False)
    # Then each page goes on from the last one's end, and the last says there is no more
    pages = [[batch.batch_id for batch in page] for page in (first, second, third)]
    assert [len(page) for page in pages] == [2, 2, 1] and token_3 is None
    assert sorted(id_ for page in pages for id_ in page) == ["v-1", "v-2", "v-3", "v-4", "v-5"]
    assert token == pages[0][-1] and token_2 == pages[1][-1]


def test_a_cancel_answers_with_what_it_did_and_the_callback_state_follows_the_batch(bapp):
    # Given a batch of two, one settled
    bapp.enqueue_batch("k-1", children(2), CALLBACK)
    first, _ = child_ids(bapp, "k-1")
    deliver_all(bapp, [first])
    batches = bapp.require_batches()
    # Then while it is open its callback has no state
    assert batches.callback_state(batches.require("k-1"), bapp.operations.state) is None
    # When it is cancelled / Then the answer says what happened, as `--json` prints it (the callback is the
    # counter's to write, once it reads the cancel from the stream)
    assert bapp.cancel_batch("k-1", "not this month", "cli:alice").to_json() == {
        "batch_id": "k-1",
        "cancelled": 1,
        "too_late": 1,
        "callback_written": False,
    }
    counted(bapp)
    # And the callback's state is the callback operation's own
    assert batches.callback_state(batches.require("k-1"), bapp.operations.state) == "ACCEPTED"
    assert bapp.operations.state.record(callback_id("k-1")).state.value == "ACCEPTED"


def test_a_reason_is_set_only_on_a_batch_still_as_it_was_read(bapp):
    # Given an open batch
    bapp.enqueue_batch("l-1", children(1), CALLBACK)
    table = bapp.require_batches().table
    # When the reconciler lists it as read open / Then it is set
    assert table.list_reason("l-1", "2 children UNKNOWN", BatchState.OPEN) is True
    assert table.batch("l-1").listed == "2 children UNKNOWN"
    # When a reason comes for it as read admitting (it moved on since) / Then nothing changes, and it says so
    assert table.list_reason("l-1", None, BatchState.ADMITTING) is False
    assert table.batch("l-1").listed == "2 children UNKNOWN"
    # And any other failure is raised, never taken for "it moved"
    other = batches_store.BatchesTable("no-such-table", "no-such-jobs", boto3.client("dynamodb"))
    with pytest.raises(ClientError, match="ResourceNotFoundException"):
        other.list_reason("l-1", None, BatchState.OPEN)


def test_changes_after_the_callback_are_kept_by_name_up_to_the_limit_and_all_counted(bapp, monkeypatch):
    # Given a batch's record, and a limit of two changes kept by name
    bapp.enqueue_batch("m-1", children(1), CALLBACK)
    table = bapp.require_batches().table
    monkeypatch.setattr(batches_store, "CHANGES_LIMIT", 2)
    # When three children change after the callback
    changes = [BatchChange(f"2026-12-0{i}T00:00:00Z", f"m-1::0::p-{i}", "FAILED", "SUCCEEDED") for i in range(3)]
    for change in changes:
        table.record_change("m-1", change)
    # Then the first two are kept, each whole, and all three are counted
    batch = table.batch("m-1")
    assert batch.changes == tuple(changes[:2])
    assert batch.changes_after_callback == 3


def test_a_batch_cancel_records_when_who_and_why_and_says_word_for_word_why_it_refuses(bapp, clock):
    from converge.model.clock import iso
    from converge.model.errors import InvalidAction

    # Given a batch whose admission stopped halfway, and an admitted one
    stop_admission(bapp, "o-1", 150)
    bapp.enqueue_batch("o-2", children(1), CALLBACK)
    # When an operator cancels without a reason, or cancels the one still admitting / Then each is refused, saying why
    with pytest.raises(InvalidAction) as no_reason:
        bapp.cancel_batch("o-2", "  ", "cli:alice")
    assert str(no_reason.value) == "a cancel needs a reason (it is recorded on the batch and on each child)"
    with pytest.raises(InvalidAction) as admitting:
        bapp.cancel_batch("o-1", "not this month", "cli:alice")
    assert str(admitting.value) == "batch 'o-1' is still admitting: enqueue it again to finish it, then cancel"
    # When the admitted one is cancelled / Then its record says when, by whom and why (the reason trimmed)
    bapp.cancel_batch("o-2", "  not this month ", "cli:alice")
    assert bapp.require_batches().require("o-2").cancelled == f"{iso(clock.now())} by cli:alice: not this month"


def test_a_completed_batch_records_when_and_a_shard_never_written_reads_as_none(bapp, clock):
    from converge.model.clock import iso

    # Given a batch of one, run to completion
    bapp.enqueue_batch("p-1", children(1), CALLBACK)
    deliver_all(bapp, child_ids(bapp, "p-1"))
    batches = bapp.require_batches()
    # Then its record is complete, and says when
    completed = batches.require("p-1")
    assert (completed.state, completed.completed_at) == (BatchState.COMPLETE, iso(clock.now()))
    # And a counting shard no batch wrote has no counts (None), where one written has its expected children, read
    # strongly consistent (a count just added is in it)
    calls = sent(bapp.clients.get("dynamodb"))
    assert batches.table.shard_counts("p-1", 0) == (1, {"SUCCEEDED": 1})
    assert [(name, params.get("ConsistentRead")) for name, params in calls] == [("GetItem", True)]
    assert batches.table.shard_counts("p-1", 1) is None
    assert batches.table.shard_counts("no-such-batch", 0) is None


@pytest.mark.parametrize("how", ["the child's cancel", "the batch's cancel"])
def test_a_failed_child_retried_and_cancelled_while_it_waits_is_counted_once(bapp, outcomes, how: str):
    # Given a batch of two: the first fails for good, the second is not delivered yet; an operator retries the
    # first, which now waits between its steps
    bapp.enqueue_batch("k-9", children(2), CALLBACK)
    first, _ = child_ids(bapp, "k-9")
    outcomes.failing.add(first)
    assert deliver_all(bapp, [first]) == [Outcome.FAILED]
    outcomes.failing.discard(first)
    outcomes.waiting.add(first)
    assert bapp.operator("cli:alice").retry(first, "the address is fixed").applied
    assert deliver_all(bapp, [first]) == [Outcome.WAITING]
    # When it is cancelled while it waits
    if how == "the child's cancel":
        assert bapp.operator("cli:alice").cancel(first, "sent by hand").applied
    else:
        assert bapp.cancel_batch("k-9", "sent by hand", "cli:alice").cancelled == 2
    counted(bapp)
    # Then its count moved from FAILED to CANCELLED: each child counted once, as it stands
    counts = {name: n for name, n in bapp.require_batches().require("k-9").counts.items() if n}
    expected = {"CANCELLED": 1} if how == "the child's cancel" else {"CANCELLED": 2}
    assert counts == expected
    # And the batch completes only once every child is final (never while the second has not run)
    complete = bapp.require_batches().require("k-9").state is BatchState.COMPLETE
    assert complete is (how == "the batch's cancel") and outcomes.callbacks == []


def test_a_cancel_of_a_complete_batch_cancels_nothing_and_records_nothing(bapp):
    # Given a batch run to completion
    bapp.enqueue_batch("k-10", children(2), CALLBACK)
    deliver_all(bapp, child_ids(bapp, "k-10"))
    batches = bapp.require_batches()
    before = batches.table.record_item("k-10")
    assert batches.require("k-10").state is BatchState.COMPLETE
    # When an operator cancels it / Then nothing was left to cancel, and its record is as it was (no "cancelled by")
    done = bapp.cancel_batch("k-10", "too late now", "cli:alice")
    assert (done.cancelled, done.too_late, done.callback_written) == (0, 2, False)
    assert batches.table.record_item("k-10") == before and batches.require("k-10").cancelled is None
