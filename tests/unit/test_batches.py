"""Batches over moto: admission (idempotent, chunked, resumable), each child counted exactly once by the counter
reading the state table's stream (`counted`: the stream given to it, as its mapping would), and the callback
written exactly once, never before every child is final."""

from __future__ import annotations

import pytest

from converge.model.batches import CHILDREN_PER_SHARD, BatchCallback, BatchChild, BatchState, callback_id, parse_child
from converge.model.errors import IdentityConflict, InvalidMessage
from converge.model.outcomes import Outcome
from converge.model.states import OperationState

from .batch_fixtures import CALLBACK, StateStream, child_ids, children, counted, deliver_all, jobs_items
from .conftest import body_of, deliver

_S = OperationState


def state_of(app, operation_id: str) -> OperationState:
    return app.operations.state.record(operation_id).state


# -- admission ---------------------------------------------------------------------------------------------------


def test_a_batch_is_admitted_with_its_record_its_shards_and_every_child_once(bapp):
    # When a batch of 600 children is admitted
    admitted = bapp.enqueue_batch("statements-2026-11", children(600), CALLBACK)
    # Then it is open, with one counting shard per 250 children, and every child's request is in the jobs table once
    batch = admitted.batch
    assert admitted.created and batch.state is BatchState.OPEN
    assert (batch.total, batch.written, batch.shards) == (600, 600, 3)
    requests = jobs_items("statements-2026-11::")
    assert len(requests) == 600
    assert {item["correlation_id"]["S"] for item in requests} == {"statements-2026-11"}
    # and each child's id names its batch and shard, derived from its key
    ids = child_ids(bapp, "statements-2026-11")
    assert len(set(ids)) == 600 and all(
        parse_child(operation_id).batch_id == "statements-2026-11" for operation_id in ids
    )
    assert CHILDREN_PER_SHARD >= 600 / 3


def test_admitting_the_same_batch_again_writes_nothing_and_answers_with_it(bapp):
    # Given an admitted batch
    bapp.enqueue_batch("b-1", children(30), CALLBACK)
    calls: list[str] = []
    bapp.clients.dynamodb.meta.events.register(
        "provide-client-params.dynamodb", lambda model, **_: calls.append(model.name)
    )
    # When it is admitted again, the same children and callback
    again = bapp.enqueue_batch("b-1", children(30), CALLBACK)
    # Then it answers with the batch as it stands, and wrote nothing (one refused put of the record, then reads)
    assert not again.created and again.batch.state is BatchState.OPEN
    assert [name for name in calls if name not in ("GetItem", "BatchGetItem")] == ["PutItem"]
    assert len(jobs_items("b-1::")) == 30


def test_other_content_under_the_same_batch_id_is_an_identity_conflict(bapp):
    bapp.enqueue_batch("b-2", children(3), CALLBACK)
    with pytest.raises(IdentityConflict):
        bapp.enqueue_batch("b-2", children(4), CALLBACK)
    with pytest.raises(IdentityConflict):
        bapp.enqueue_batch("b-2", children(3), BatchCallback("mail.statement-summary.v1", {"month": "2026-12"}))
    assert len(jobs_items("b-2::")) == 3


@pytest.mark.parametrize(
    ("batch_id", "members", "callback", "says"),
    [
        ("b:3", children(1), CALLBACK, "batch id"),
        ("b-3", [], CALLBACK, "1-10000 children"),
        ("b-3", [*children(2), BatchChild("p-0", "mail.statement.v1", {"partner_id": "x"})], CALLBACK, "twice"),
        ("b-3", [BatchChild("p-0", "mail.statement.v1", {"partner": "x"})], CALLBACK, "child 'p-0'"),
        ("b-3", [BatchChild("a:b", "mail.statement.v1", {"partner_id": "x"})], CALLBACK, "child key"),
        ("b-3", children(1), BatchCallback("mail.statement.v1", {"partner_id": "x"}), "BatchSummary"),
        ("b-3", children(1), BatchCallback("mail.statement-summary.v1", {"month": "x", "batch_total": 1}), "may not"),
    ],
)
def test_an_invalid_batch_is_refused_with_the_reason_and_nothing_written(bapp, batch_id, members, callback, says):
    with pytest.raises(InvalidMessage, match=says):
        bapp.enqueue_batch(batch_id, members, callback)
    assert bapp.require_batches().get(batch_id) is None and not jobs_items("b-3")


def test_a_plain_enqueue_refuses_the_batches_id_form(bapp):
    with pytest.raises(InvalidMessage, match="batches' own"):
        bapp.enqueue("mail.statement.v1", "b-9::0:p-1", {"partner_id": "p-1"})


def test_an_admission_stopped_halfway_is_listed_admitting_and_a_retry_completes_it(bapp):
    # Given an admission that crashes after writing its first chunk of 100 children (of 250)
    table = bapp.require_batches().table
    real = table.write_chunk
    written: list[int] = []

    def crash_on_second(batch_id, chunk, keys, requests):
        if chunk == 1:
            raise ConnectionError("the producer died mid-admission")
        written.append(chunk)
        return real(batch_id, chunk, keys, requests)

    table.write_chunk = crash_on_second  # type: ignore[method-assign]
    with pytest.raises(ConnectionError):
        bapp.enqueue_batch("b-4", children(250), CALLBACK)
    # Then the batch is admitting, with what was written and why it cannot finish by itself
    stopped = bapp.require_batches().require("b-4")
    assert (stopped.state, stopped.written, stopped.chunks) == (BatchState.ADMITTING, 100, 1)
    assert "admission stopped at 100 of 250" in (stopped.attention or "")
    # and the children written can run and are counted, but no callback comes while it is admitting
    first = [stopped.child_id(position, key) for position, key in enumerate(table.keys("b-4", 0) or [])]
    assert set(deliver_all(bapp, first)) == {Outcome.SUCCEEDED}
    assert bapp.operations.jobs.item(callback_id("b-4")) is None
    # When the producer admits the same batch again
    again: list[int] = []

    def recorded(batch_id, chunk, keys, requests):
        again.append(chunk)
        return real(batch_id, chunk, keys, requests)

    table.write_chunk = recorded  # type: ignore[method-assign]
    resumed = bapp.enqueue_batch("b-4", children(250), CALLBACK)
    # Then it finishes from the chunk that stopped (the first is not sent again): open, every child written once
    assert not resumed.created and resumed.batch.state is BatchState.OPEN
    assert (resumed.batch.written, resumed.batch.chunks) == (250, 3)
    assert len(jobs_items("b-4::")) == 250 and written == [0] and again == [1, 2]


# -- counting and the callback -------------------------------------------------------------------------------------


@pytest.mark.slow  # 300 children delivered one by one
def test_each_child_is_counted_once_and_the_callback_written_once_when_the_last_is_final(bapp, outcomes):
    # Given a batch of 300 children, two of which will fail
    bapp.enqueue_batch("b-5", children(300), CALLBACK)
    ids = child_ids(bapp, "b-5")
    outcomes.failing |= {ids[7], ids[250]}
    # When all but the last are delivered, some of them twice
    deliver_all(bapp, ids[:-1])
    assert set(deliver_all(bapp, ids[:20])) == {Outcome.DUPLICATE}
    # Then they are counted once each, and no callback yet
    batch = bapp.require_batches().require("b-5")
    assert batch.counts == {"SUCCEEDED": 297, "FAILED": 2} and batch.state is BatchState.OPEN
    assert bapp.operations.jobs.item(callback_id("b-5")) is None
    # When the last child settles, and the counter reads it
    assert deliver(bapp, ids[-1]).outcome is Outcome.SUCCEEDED
    counted(bapp)
    # Then the batch is complete and its callback's request is written once, with the summary
    done = bapp.require_batches().require("b-5")
    assert done.state is BatchState.COMPLETE and done.summary == {"SUCCEEDED": 298, "FAILED": 2}
    callback = bapp.operations.require(callback_id("b-5"))
    assert callback.payload["month"] == "2026-11"
    assert callback.payload == {
        "month": "2026-11",
        "batch_id": "b-5",
        "batch_total": 300,
        "batch_succeeded": 298,
        "batch_noop": 0,
        "batch_failed": 2,
        "batch_rejected": 0,
        "batch_cancelled": 0,
        "batch_expired": 0,
    }
    # and copies of the last child, the stream's records given again, and anyone else who looks, write nothing more
    assert deliver(bapp, ids[-1]).outcome is Outcome.DUPLICATE
    bapp.batch_counter.handle({"Records": StateStream().records()})
    assert bapp.require_batches().require("b-5").counts == {"SUCCEEDED": 298, "FAILED": 2}
    assert bapp.require_batches().observe("b-5") is False
    assert len(jobs_items(callback_id("b-5"))) == 1
    # and the callback runs once with the batch's summary
    deliver(bapp, callback_id("b-5"))
    assert outcomes.callbacks == [callback.payload]


def test_an_unknown_child_holds_the_callback_back_until_an_operator_resolves_it(bapp, outcomes):
    # Given a batch whose one child ends UNKNOWN
    bapp.enqueue_batch("b-6", children(5), CALLBACK)
    ids = child_ids(bapp, "b-6")
    outcomes.unknowable.add(ids[2])
    deliver_all(bapp, ids)
    # Then every child is final but the batch waits, listed with the reason, and no callback is written
    batch = bapp.require_batches().require("b-6")
    assert batch.counts == {"SUCCEEDED": 4, "UNKNOWN": 1} and batch.state is BatchState.OPEN
    assert "1 children UNKNOWN" in (batch.attention or "")
    assert bapp.operations.jobs.item(callback_id("b-6")) is None
    # When an operator resolves it as succeeded
    bapp.operator("cli:alice").resolve(ids[2], "succeeded", "the provider's log shows the message sent")
    counted(bapp)
    # Then its count moves from UNKNOWN to SUCCEEDED and the callback is written
    done = bapp.require_batches().require("b-6")
    assert done.counts == {"SUCCEEDED": 5} and done.state is BatchState.COMPLETE
    assert bapp.operations.require(callback_id("b-6")).payload["batch_succeeded"] == 5


def test_a_failed_child_retried_after_the_callback_is_recorded_on_the_batch_and_no_second_callback(bapp, outcomes):
    # Given a complete batch with one FAILED child
    bapp.enqueue_batch("b-7", children(4), CALLBACK)
    ids = child_ids(bapp, "b-7")
    outcomes.failing.add(ids[1])
    deliver_all(bapp, ids)
    assert bapp.require_batches().require("b-7").state is BatchState.COMPLETE
    # When an operator retries it and it succeeds this time
    outcomes.failing.clear()
    assert bapp.operator("cli:alice").retry(ids[1], "the address is fixed").applied
    assert deliver(bapp, ids[1], message_id="m-2").outcome is Outcome.SUCCEEDED
    counted(bapp)
    # Then the batch's counts follow it, the change is recorded, and the callback keeps what it was given
    batch = bapp.require_batches().require("b-7")
    assert batch.counts == {"SUCCEEDED": 4}
    assert batch.summary == {"SUCCEEDED": 3, "FAILED": 1}
    assert batch.changes_after_callback == 1
    assert [(change.child, change.before, change.after) for change in batch.changes] == [
        (ids[1], "FAILED", "SUCCEEDED")
    ]
    assert len(jobs_items(callback_id("b-7"))) == 1


def test_a_childs_settle_is_one_plain_write_and_the_counter_counts_it_from_the_stream(bapp):
    # Given a batch child about to settle, and every call the pipeline makes observed
    bapp.enqueue_batch("b-8", children(2), CALLBACK)
    ids = child_ids(bapp, "b-8")
    client = bapp.clients.dynamodb
    calls: list[str] = []
    client.meta.events.register("provide-client-params.dynamodb", lambda model, **_: calls.append(model.name))
    # When it settles
    deliver(bapp, ids[0])
    # Then its settle wrote the state table alone, as a plain job's does: no transaction, nothing on the batch
    assert "TransactWriteItems" not in calls
    assert bapp.require_batches().require("b-8").counts == {}
    # When the counter reads the stream
    (record,) = counted(bapp)
    # Then the child is counted, from its state record's change
    assert record["dynamodb"]["Keys"]["operation_id"]["S"] == ids[0]
    assert bapp.require_batches().require("b-8").counts == {"SUCCEEDED": 1}


def test_a_stream_batch_given_again_counts_nothing_twice(bapp):
    # Given a batch of three, two children final and counted
    bapp.enqueue_batch("b-9", children(3), CALLBACK)
    ids = child_ids(bapp, "b-9")
    deliver_all(bapp, ids[:2])
    records = StateStream().records()
    # When the counter is given the same stream batch again, whole and in parts (a failed call retried)
    bapp.batch_counter.handle({"Records": records})
    bapp.batch_counter.handle({"Records": records[:1]})
    # Then each child is counted once, and the batch waits for its third
    batch = bapp.require_batches().require("b-9")
    assert batch.counts == {"SUCCEEDED": 2} and batch.state is BatchState.OPEN
    # When the last settles and is counted, and everything is given again
    deliver_all(bapp, ids[2:])
    bapp.batch_counter.handle({"Records": StateStream().records()})
    # Then the batch completes once, with three
    batch = bapp.require_batches().require("b-9")
    assert batch.counts == {"SUCCEEDED": 3} and batch.state is BatchState.COMPLETE
    assert len(jobs_items(callback_id("b-9"))) == 1


def test_a_counter_that_fails_before_its_look_completes_the_batch_when_the_stream_batch_is_given_again(
    bapp, monkeypatch
):
    # Given a batch whose last child settles, and the counter dies after setting its place, before it looks
    bapp.enqueue_batch("b-10", children(3), CALLBACK)
    ids = child_ids(bapp, "b-10")
    batches = bapp.require_batches()
    deliver_all(bapp, ids[:-1])
    assert deliver(bapp, ids[-1]).outcome is Outcome.SUCCEEDED
    real = batches.observe

    def die(*_, **__):
        raise ConnectionError("the counter's environment was frozen")

    monkeypatch.setattr(batches, "observe", die)
    records = StateStream().records()
    with pytest.raises(ConnectionError):
        bapp.batch_counter.handle({"Records": records})
    # Then the child is counted, and the batch is still open, with no callback
    batch = batches.require("b-10")
    assert batch.counts == {"SUCCEEDED": 3} and batch.state is BatchState.OPEN
    assert bapp.operations.jobs.item(callback_id("b-10")) is None
    # When Lambda gives the counter the failed stream batch again
    monkeypatch.setattr(batches, "observe", real)
    bapp.batch_counter.handle({"Records": records})
    # Then that call completes the batch: the callback is written, once, with each child counted once
    assert batches.require("b-10").state is BatchState.COMPLETE
    assert batches.require("b-10").counts == {"SUCCEEDED": 3}
    assert len(jobs_items(callback_id("b-10"))) == 1


def test_two_observers_of_completion_write_one_callback(bapp):
    # Given a batch all of whose children are final, its completion not yet written
    bapp.enqueue_batch("b-11", children(2), CALLBACK)
    ids = child_ids(bapp, "b-11")
    batches = bapp.require_batches()
    real = batches.observe
    batches.observe = lambda *_, **__: False  # type: ignore[method-assign]
    deliver_all(bapp, ids)
    batches.observe = real  # type: ignore[method-assign]
    # When two workers observe completion at once (each read the batch open)
    table = batches.table
    from converge.model.request import JobRequest
    from converge.screening.summary import summary_fields

    payload = {"month": "x", **summary_fields("b-11", 2, {"SUCCEEDED": 2})}
    request = JobRequest(callback_id("b-11"), "mail.statement-summary.v1", payload)
    assert table.complete("b-11", request, {"SUCCEEDED": 2}, "2026-12-01T00:00:00Z") is True
    assert table.complete("b-11", request, {"SUCCEEDED": 2}, "2026-12-01T00:00:01Z") is False
    assert real("b-11") is False
    # Then one callback request exists
    assert len(jobs_items(callback_id("b-11"))) == 1


def test_a_small_batch_admitted_after_its_children_finished_completes_at_its_admission(bapp):
    # Given an admission resumed after its only chunk's children had all run (the record still admitting)
    table = bapp.require_batches().table
    real_open = table.open
    table.open = lambda *_: (_ for _ in ()).throw(ConnectionError("died before opening"))  # type: ignore[method-assign]
    with pytest.raises(ConnectionError):
        bapp.enqueue_batch("b-12", children(3), CALLBACK)
    deliver_all(bapp, child_ids(bapp, "b-12"))
    assert bapp.operations.jobs.item(callback_id("b-12")) is None  # never before the batch is open
    # When the admission is retried
    table.open = real_open  # type: ignore[method-assign]
    again = bapp.enqueue_batch("b-12", children(3), CALLBACK)
    # Then it opens the batch and, every child being final, writes the callback
    assert again.batch.state is BatchState.COMPLETE
    assert len(jobs_items(callback_id("b-12"))) == 1


def test_a_child_the_worker_rejects_is_counted_and_the_batch_completes(bapp, settings, batches_table, clock):
    # Given a batch of two, and a worker deployed since without the children's job type
    from converge.flow.registry import Registry
    from converge.runtime import Converge

    bapp.enqueue_batch("b-13", children(2), CALLBACK)
    first, second = child_ids(bapp, "b-13")
    deliver(bapp, first)
    summary_only = Registry([bapp.registry.get("mail.statement-summary.v1")])
    with_batches = settings.model_copy(update={"batches_table": batches_table})
    newer = Converge(with_batches, registry=summary_only, clients=bapp.clients, clock=clock)
    # When that worker receives the second child
    assert deliver(newer, second, body=body_of(bapp, second)).outcome is Outcome.REJECTED
    counted(bapp)
    # Then the child is REJECTED and counted, and the batch completes with it
    assert state_of(bapp, second) is _S.REJECTED
    batch = bapp.require_batches().require("b-13")
    assert batch.state is BatchState.COMPLETE and batch.counts == {"SUCCEEDED": 1, "REJECTED": 1}
    assert bapp.operations.require(callback_id("b-13")).payload["batch_rejected"] == 1
    # and a copy of the child rejected again counts nothing more
    assert deliver(newer, second, body=body_of(bapp, second), message_id="m-2").outcome is Outcome.REJECTED
    counted(bapp)
    assert bapp.require_batches().require("b-13").counts == {"SUCCEEDED": 1, "REJECTED": 1}


def test_a_runner_fans_out_with_enqueue_batch_and_a_retry_of_it_admits_nothing_twice(bapp, monkeypatch):
    # Given a job whose runner admits a batch named after its own operation (the public API, as in a Lambda)
    import converge
    from converge.flow.registry import JobBinding, Policy, Queue

    from .batch_fixtures import Statement

    class FanOut:
        def load(self, message, ctx):
            return "ready"

        def run(self, message, loaded, ctx):
            converge.enqueue_batch(f"fan-{ctx.operation_id}", children(3, prefix=message.partner_id), CALLBACK)
            if ctx.attempt == 1:
                raise ConnectionError("the worker lost its connection after admitting the batch")

    bapp.registry.register(JobBinding("mail.fan-out.v1", Statement, FanOut, Queue.CRITICAL, Policy.EFFECT_THEN_CLAIM))
    monkeypatch.setattr(converge, "_runtime", lambda: bapp)
    bapp.enqueue("mail.fan-out.v1", "monthly-1", {"partner_id": "q"})
    # When it runs, fails after admitting, and runs again
    assert deliver(bapp, "monthly-1").outcome is Outcome.RETRY
    assert deliver(bapp, "monthly-1", attempt=2, message_id="m-2").outcome is Outcome.SUCCEEDED
    # Then the batch was admitted once: three children, open
    batch = bapp.require_batches().require("fan-monthly-1")
    assert (batch.state, batch.total) == (BatchState.OPEN, 3)
    assert len(jobs_items("fan-monthly-1::")) == 3


def test_a_batch_whose_last_look_was_lost_is_listed_and_completed_on_request(bapp, monkeypatch):
    # Given a batch whose last child settled and was acknowledged, its look at the batch having failed
    bapp.enqueue_batch("b-14", children(2), CALLBACK)
    batches = bapp.require_batches()
    monkeypatch.setattr(batches, "observe", lambda *_: (_ for _ in ()).throw(ConnectionError("lost")))
    with pytest.raises(ConnectionError):
        deliver_all(bapp, child_ids(bapp, "b-14"))
    monkeypatch.undo()
    # Then the batch says why it is not complete, and what completes it
    batch = batches.require("b-14")
    assert batch.state is BatchState.OPEN and "converge batches complete b-14" in (batch.attention or "")
    # When the operator's command looks (what `converge batches complete` calls), twice
    assert batches.observe("b-14") is True and batches.observe("b-14") is False
    # Then the callback is written once
    assert batches.require("b-14").state is BatchState.COMPLETE and len(jobs_items(callback_id("b-14"))) == 1


def test_a_look_at_a_batch_that_cannot_complete_yet_writes_nothing_and_says_so(bapp):
    # Given a batch of two children, one of them final
    bapp.enqueue_batch("b-15", children(2), CALLBACK)
    first, _ = child_ids(bapp, "b-15")
    assert deliver(bapp, first).outcome is Outcome.SUCCEEDED
    batches = bapp.require_batches()
    counted(bapp)
    # When a look at the batch, still counting the other, and a look at a batch no one admitted
    # Then neither writes a callback, and each says it did not
    assert batches.observe("b-15") is False
    assert batches.observe("b-none") is False
    assert jobs_items(callback_id("b-15")) == [] and jobs_items(callback_id("b-none")) == []


def test_cancelling_a_batch_cancels_its_children_not_started_and_the_callback_runs_with_the_counts(bapp):
    # Given a batch of five: two done, one running (its lease held), two not started
    bapp.enqueue_batch("b-15", children(5), CALLBACK)
    ids = child_ids(bapp, "b-15")
    deliver_all(bapp, ids[:2])
    from .sqs_deliveries import hold_lease

    hold_lease(bapp, ids[2], "busy-worker", 1)
    batches = bapp.require_batches()
    # When an operator cancels the batch
    done = bapp.cancel_batch("b-15", "the month's statements were sent by hand", "cli:alice")
    counted(bapp)
    # Then the two not started are CANCELLED, the others carry on, and no callback while one still runs
    assert (done.cancelled, done.too_late, done.callback_written) == (2, 3, False)
    assert [state_of(bapp, child) for child in ids] == [
        _S.SUCCEEDED,
        _S.SUCCEEDED,
        _S.IN_PROGRESS,
        _S.CANCELLED,
        _S.CANCELLED,
    ]
    batch = batches.require("b-15")
    assert batch.counts == {"SUCCEEDED": 2, "CANCELLED": 2} and "cli:alice" in (batch.cancelled or "")
    # and a cancelled child's message, when it arrives, runs nothing
    assert deliver(bapp, ids[3]).outcome is Outcome.DUPLICATE
    # When the running child finishes (its lease expired, a later delivery)
    bapp.clock.advance(120)
    assert deliver(bapp, ids[2], attempt=2, message_id="m-2").outcome is Outcome.SUCCEEDED
    counted(bapp)
    # Then the batch completes and its callback carries the counts, cancelled ones included
    payload = bapp.operations.require(callback_id("b-15")).payload
    assert (payload["batch_succeeded"], payload["batch_cancelled"]) == (3, 2)
    # And a second cancel changes nothing
    assert bapp.cancel_batch("b-15", "again", "cli:alice").cancelled == 0
    assert len(jobs_items(callback_id("b-15"))) == 1


def test_cancelling_a_batch_cancels_a_child_waiting_between_steps_as_one_cancel_would(bapp, outcomes, clock):
    # Given a batch of two: one child waiting between its steps (it started, its lease given back), one not started
    bapp.enqueue_batch("b-16", children(2), CALLBACK)
    ids = child_ids(bapp, "b-16")
    outcomes.waiting.add(ids[0])
    assert deliver(bapp, ids[0]).outcome is Outcome.WAITING
    # When an operator cancels the batch
    done = bapp.cancel_batch("b-16", "the partners were told by phone", "cli:alice")
    # Then both are CANCELLED (a wait is cancellable: every step before it is claimed, none in flight), the
    # waiting child's receipt says where it waited, and once the counter reads the stream the callback is written
    # with the counts (the cancel's own look comes before the counter's)
    assert (done.cancelled, done.too_late, done.callback_written) == (2, 0, False)
    counted(bapp)
    assert [state_of(bapp, child) for child in ids] == [_S.CANCELLED, _S.CANCELLED]
    reason = bapp.operations.require(ids[0]).history[-1].reason
    assert "while waiting at 'cool-off'" in reason and "with its batch b-16" in reason
    assert bapp.operations.require(callback_id("b-16")).payload["batch_cancelled"] == 2
    # And the waiting child's resumption, when it comes, runs nothing
    clock.advance(600)
    assert deliver(bapp, ids[0], message_id="m-2").outcome is Outcome.DUPLICATE
    assert outcomes.ran == []


def test_cancelling_a_batch_needs_a_reason_and_an_admitted_batch(bapp):
    from converge.model.errors import InvalidAction, OperationNotFound

    with pytest.raises(OperationNotFound):
        bapp.cancel_batch("b-none", "why", "cli:alice")
    bapp.enqueue_batch("b-17", children(1), CALLBACK)
    with pytest.raises(InvalidAction, match="reason"):
        bapp.cancel_batch("b-17", "  ", "cli:alice")
    assert state_of(bapp, child_ids(bapp, "b-17")[0]) is _S.ACCEPTED


def test_a_failed_child_retried_and_then_rejected_moves_its_count_and_is_not_counted_twice(
    bapp, outcomes, settings, batches_table, clock
):
    # Given a batch of two whose first child FAILED, retried by an operator before the batch completes
    from converge.flow.registry import Registry
    from converge.runtime import Converge

    bapp.enqueue_batch("b-16", children(2), CALLBACK)
    first, second = child_ids(bapp, "b-16")
    outcomes.failing.add(first)
    deliver(bapp, first)
    counted(bapp)
    assert bapp.require_batches().require("b-16").counts == {"FAILED": 1}
    assert bapp.operator("cli:alice").retry(first, "the address is fixed").applied
    # When a worker deployed since without the job type receives it again
    summary_only = Registry([bapp.registry.get("mail.statement-summary.v1")])
    newer = Converge(
        settings.model_copy(update={"batches_table": batches_table}),
        registry=summary_only,
        clients=bapp.clients,
        clock=clock,
    )
    assert deliver(newer, first, body=body_of(bapp, first), message_id="m-2").outcome is Outcome.REJECTED
    counted(bapp)
    # Then its count moved from FAILED to REJECTED: one child final of two, no callback before the second is
    batch = bapp.require_batches().require("b-16")
    assert batch.counts == {"REJECTED": 1} and batch.final == 1 and batch.state is BatchState.OPEN
    assert bapp.operations.jobs.item(callback_id("b-16")) is None
    deliver(bapp, second)
    counted(bapp)
    assert bapp.require_batches().require("b-16").state is BatchState.COMPLETE
