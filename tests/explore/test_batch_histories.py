"""Batches' histories written by hand, replayed through the explorer's rules: what each rule does to a batch, and
the promise checked after each step (each child counted once per final state it holds, the callback once and only
after every child is final, a batch that cannot finish listed after a reconciler pass)."""

from __future__ import annotations

from converge.model.batches import BatchState

from .machine import Explorer


def test_a_batch_runs_through_faults_and_operators_and_its_callback_comes_once(explorer: type[Explorer]) -> None:
    # Given a batch of three e-mails, the next holder crashing after its effect and the next look lost
    state = explorer()
    state.promise_kept()
    batch = state.producer_admits_batch(job="email", size=3, crash=False)
    state.promise_kept()
    state.holder_crashes_after_effect()
    state.completion_look_lost()
    state.promise_kept()
    # When one child is cancelled, the rest run, the same batch is admitted again and other content refused
    state.operator_cancels_child(batch=batch, which=2)
    state.promise_kept()
    state.everything_drains()
    state.promise_kept()
    state.producer_readmits_batch(batch=batch)
    state.producer_readmits_other_content(batch=batch)
    state.promise_kept()
    # Then at quiescence the batch is complete with one callback (teardown checks it)
    state.teardown()
    assert state.converge.require_batches().require(batch).state is BatchState.COMPLETE


def test_a_batch_whose_admission_stopped_halfway_is_listed_then_finished(explorer: type[Explorer]) -> None:
    # Given an admission that died after the batch's record
    state = explorer()
    state.promise_kept()
    batch = state.producer_admits_batch(job="money", size=2, crash=True)
    state.promise_kept()
    state.everything_drains()
    state.promise_kept()
    # When the batch is cancelled (refused while admitting) and the reconciler runs
    state.operator_cancels_batch(batch=batch)
    state.reconciler_runs()
    state.promise_kept()
    # Then, at quiescence, it is listed with the reason (teardown checks it)
    state.teardown()
    listed = state.converge.require_batches().require(batch)
    assert listed.state is BatchState.ADMITTING and "admission stopped" in (listed.attention or "")


def test_a_cancelled_batch_whose_failed_child_is_retried_and_resolved(explorer: type[Explorer]) -> None:
    state = explorer()
    state.promise_kept()
    batch = state.producer_admits_batch(job="upload", size=4, crash=False)
    state.promise_kept()
    state.queues_polled_once()
    state.stream_polled_once()
    state.promise_kept()
    state.operator_cancels_batch(batch=batch)
    state.promise_kept()
    state.everything_drains()
    state.promise_kept()
    state.operator_retries_child(batch=batch, which=0)
    state.promise_kept()
    state.operator_resolves_child(batch=batch, which=1, if_not_done="failed")
    state.promise_kept()
    state.everything_drains()
    state.promise_kept()
    state.teardown()


def test_a_batch_posted_to_the_api_twice_is_admitted_once_and_completes(explorer: type[Explorer]) -> None:
    # Given a caller that posts a batch of three e-mails to the enqueue API, then posts it again (a lost response)
    state = explorer()
    state.promise_kept()
    batch = state.caller_posts_batch_to_api(job="email", size=3)
    state.promise_kept()
    # When a holder crashes after its effect, one child is cancelled, and the rest run
    state.holder_crashes_after_effect()
    state.operator_cancels_child(batch=batch, which=1)
    state.everything_drains()
    state.promise_kept()
    # And a producer admits the same batch again under its id, and other content under it
    state.producer_readmits_batch(batch=batch)
    state.producer_readmits_other_content(batch=batch)
    state.promise_kept()
    # Then at quiescence the batch (its id derived from the caller and the name) is complete, its callback once
    state.teardown()
    admitted = state.converge.require_batches().require(batch)
    assert batch.startswith("api-") and admitted.state is BatchState.COMPLETE
    assert {state: n for state, n in admitted.counts.items() if n} == {"SUCCEEDED": 2, "CANCELLED": 1}
