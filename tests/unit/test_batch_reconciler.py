"""The reconciler's pass over batches not complete: a missing callback written exactly once, and a batch that
cannot finish by itself listed with the reason (an admission stopped halfway, children UNKNOWN or STUCK), the
reason taken off once it no longer holds; counted in the reconciler's summary."""

from __future__ import annotations

import pytest

from converge.model.batches import ADMISSION_GRACE_SECONDS, BatchState, callback_id
from converge.model.outcomes import Outcome
from converge.model.states import StuckKind

from .batch_fixtures import CALLBACK, child_ids, children, counted, deliver_all, jobs_items


def listed(app) -> dict[str, str]:
    """What `converge batches list --attention` lists: batch id -> reason."""
    page, _ = app.require_batches().table.batches(100, None, listed_only=True)
    return {batch.batch_id: batch.attention or "" for batch in page}


def test_a_complete_batch_whose_callback_is_missing_gets_it_from_the_reconciler_once(bapp, monkeypatch):
    # Given a batch whose children all settled, every look at the batch after them lost
    bapp.enqueue_batch("r-1", children(3), CALLBACK)
    batches = bapp.require_batches()
    monkeypatch.setattr(batches, "observe", lambda *_: False)
    assert set(deliver_all(bapp, child_ids(bapp, "r-1"))) == {Outcome.SUCCEEDED}
    monkeypatch.undo()
    assert batches.require("r-1").state is BatchState.OPEN
    # When the reconciler runs, twice
    first = bapp.reconciler.run()
    second = bapp.reconciler.run()
    # Then the first wrote the callback (counted in its summary), the second nothing: one callback in all
    assert (first.batches_examined, first.batch_callbacks_written) == (1, 1)
    assert (second.batches_examined, second.batch_callbacks_written) == (0, 0)
    assert batches.require("r-1").state is BatchState.COMPLETE
    assert len(jobs_items(callback_id("r-1"))) == 1
    assert bapp.operations.require(callback_id("r-1")).payload["batch_succeeded"] == 3


def test_an_admission_stopped_halfway_is_listed_with_the_reason_once_it_is_old_and_unlisted_once_finished(bapp):
    # Given an admission that crashed after its first chunk of 100 children (of 150)
    table = bapp.require_batches().table
    real = table.write_chunk

    def crash_on_second(batch_id, chunk, keys, requests):
        if chunk == 1:
            raise ConnectionError("the producer died mid-admission")
        return real(batch_id, chunk, keys, requests)

    table.write_chunk = crash_on_second  # type: ignore[method-assign]
    with pytest.raises(ConnectionError):
        bapp.enqueue_batch("r-2", children(150), CALLBACK)
    table.write_chunk = real  # type: ignore[method-assign]
    # When the reconciler runs at once / Then it leaves it alone (an admission may still be under way)
    assert bapp.reconciler.run().batch_admissions_stopped == 0 and listed(bapp) == {}
    # When it runs once the admission is older than the grace
    bapp.clock.advance(ADMISSION_GRACE_SECONDS + 1)
    summary = bapp.reconciler.run()
    # Then the batch is listed with why and what finishes it (its children are not stored: only the producer can)
    assert (summary.batch_admissions_stopped, summary.batches_listed) == (1, 1)
    reason = listed(bapp)["r-2"]
    assert "admission stopped at 100 of 150" in reason and "enqueue the batch again" in reason
    # When the producer admits it again, and the reconciler runs
    assert bapp.enqueue_batch("r-2", children(150), CALLBACK).batch.state is BatchState.OPEN
    assert bapp.reconciler.run().batches_listed == 0
    # Then it is no longer listed
    assert listed(bapp) == {}


def test_a_batch_with_an_unknown_child_is_listed_until_an_operator_resolves_it(bapp, outcomes):
    # Given a batch of two: one SUCCEEDED, one UNKNOWN
    bapp.enqueue_batch("r-3", children(2), CALLBACK)
    first, second = child_ids(bapp, "r-3")
    outcomes.unknowable.add(second)
    deliver_all(bapp, [first, second])
    # When the reconciler runs / Then the batch is listed with the reason, and no callback is written
    summary = bapp.reconciler.run()
    assert (summary.batches_listed, summary.batch_callbacks_written) == (1, 0)
    assert listed(bapp)["r-3"].startswith("1 children UNKNOWN: resolve them")
    assert bapp.operations.jobs.item(callback_id("r-3")) is None
    # When an operator resolves it / Then the batch completes and is no longer listed
    assert bapp.operator("cli:alice").resolve(second, "succeeded", "the provider delivered it").applied
    counted(bapp)
    assert bapp.require_batches().require("r-3").state is BatchState.COMPLETE
    assert listed(bapp) == {} and bapp.reconciler.run().batches_examined == 0


def test_a_batch_with_a_stuck_child_is_listed_with_the_child(bapp):
    # Given a batch of two: one SUCCEEDED, the other listed under STUCK (its dispatch failed)
    bapp.enqueue_batch("r-4", children(2), CALLBACK)
    first, second = child_ids(bapp, "r-4")
    deliver_all(bapp, [first])
    state = bapp.operations.state
    assert state.mark_stuck(
        state.record(second), StuckKind.UNDISPATCHED, "SQS refused it", job_type="mail.statement.v1"
    )
    # When the reconciler runs
    summary = bapp.reconciler.run()
    # Then the batch is listed, naming the stuck child
    assert summary.batches_listed == 1
    assert listed(bapp)["r-4"] == f"1 children STUCK ({second}): converge ops list --state STUCK"
    # When the child runs after all and the reconciler runs again / Then the batch is complete and unlisted
    deliver_all(bapp, [second])
    bapp.reconciler.run()
    assert bapp.require_batches().require("r-4").state is BatchState.COMPLETE and listed(bapp) == {}


def test_a_batch_whose_children_wait_paused_is_listed_until_their_job_is_on(bapp):
    # Given a batch of two whose job is switched off: its children wait PAUSED
    from converge.flow.registry import toggle_key

    from .conftest import set_toggle

    set_toggle(toggle_key("mail.statement.v1"), "off")
    bapp.enqueue_batch("r-5", children(2), CALLBACK)
    assert deliver_all(bapp, child_ids(bapp, "r-5")) == [Outcome.PAUSED] * 2
    # When the reconciler runs / Then the batch is listed, saying why and what moves it on
    assert bapp.reconciler.run().batches_listed == 1
    reason = listed(bapp)["r-5"]
    assert reason.startswith("2 children PAUSED (their job's kill switch is off")
    assert "converge ops list --state PAUSED" in reason
    # When the job is on again and its children run / Then the batch completes and is no longer listed
    set_toggle(toggle_key("mail.statement.v1"), "on")
    assert deliver_all(bapp, child_ids(bapp, "r-5")) == [Outcome.SUCCEEDED] * 2
    assert bapp.require_batches().require("r-5").state is BatchState.COMPLETE and listed(bapp) == {}


def test_a_batch_whose_callback_id_holds_a_request_it_never_wrote_is_listed_saying_so(bapp):
    # Given a batch whose callback's id holds another request (written there before the batch completed)
    from converge.model.request import JobRequest

    bapp.enqueue_batch("r-9", children(2), CALLBACK)
    foreign = JobRequest(callback_id("r-9"), "mail.statement-summary.v1", {"month": "1999-01"})
    bapp.operations.jobs.put(bapp.operations.jobs.put_request(foreign))
    # When every child is final and the reconciler runs
    assert set(deliver_all(bapp, child_ids(bapp, "r-9"))) == {Outcome.SUCCEEDED}
    bapp.reconciler.run()
    # Then the batch is listed, saying its callback's id holds a request the batch did not write
    assert listed(bapp)["r-9"] == (
        f"every child is final, but the callback's id {callback_id('r-9')} holds a request the batch did not write "
        "(the relay refused it: converge ops show it); delete that request and its state record, then "
        "converge batches complete"
    )
    assert bapp.require_batches().require("r-9").state is BatchState.OPEN
