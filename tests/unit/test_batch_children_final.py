"""Every way a batch's child reaches a final state outside a worker's settle counts it on its batch exactly once,
from its state record's change on the stream (`batch_of` gives the counter the stream first): an operator's, a
caller's (the API's and `converge.cancel`'s), the console's and a bulk cancel, an expiry, a relay's refusal and an
operator's resolve; so no batch waits for a child that will never settle."""

from __future__ import annotations

import json

from converge.flow.registry import toggle_key
from converge.model.batches import BatchState, callback_id
from converge.model.outcomes import Outcome
from converge.model.request import JobRequest
from converge.model.states import OperationState
from converge.operate.cancel import bulk_cancel

from .batch_fixtures import CALLBACK, child_ids, children, counted, deliver_all, jobs_items
from .conftest import body_of, deliver, set_toggle

_S = OperationState


def batch_of(app, batch_id: str):
    """The batch once the counter has read the state table's stream."""
    counted(app)
    return app.require_batches().require(batch_id)


def test_an_operator_cancel_of_one_child_counts_it_and_the_batch_completes_with_one_callback(bapp):
    # Given a batch of three, two of its children done, the third not started
    bapp.enqueue_batch("c-1", children(3), CALLBACK)
    ids = child_ids(bapp, "c-1")
    deliver_all(bapp, ids[:2])
    # When an operator cancels the third on its own (`converge ops cancel`, the console's cancel)
    result = bapp.operator("cli:alice").cancel(ids[2], "the partner closed the account")
    # Then it is CANCELLED and counted in the same write, and the batch completes: one callback with the counts
    assert result.applied and result.after == "CANCELLED"
    batch = batch_of(bapp, "c-1")
    assert batch.state is BatchState.COMPLETE
    assert batch.counts == {"SUCCEEDED": 2, "CANCELLED": 1}
    payload = bapp.operations.require(callback_id("c-1")).payload
    assert (payload["batch_succeeded"], payload["batch_cancelled"]) == (2, 1)
    assert len(jobs_items(callback_id("c-1"))) == 1
    # And its message, when it arrives, runs nothing and counts nothing more
    assert deliver(bapp, ids[2]).outcome is Outcome.DUPLICATE
    assert batch_of(bapp, "c-1").counts == {"SUCCEEDED": 2, "CANCELLED": 1}
    # And a second cancel is too late and counts nothing
    assert not bapp.operator("cli:alice").cancel(ids[2], "again").applied
    assert batch_of(bapp, "c-1").counts == {"SUCCEEDED": 2, "CANCELLED": 1}


def test_a_callers_cancel_counts_the_child_as_the_api_cancels_it(bapp):
    # Given a batch of two, one child done
    bapp.enqueue_batch("c-2", children(2), CALLBACK)
    first, second = child_ids(bapp, "c-2")
    deliver(bapp, first)
    # When a caller cancels the other (`converge.cancel`, which `POST /operations/{id}/cancel` calls)
    result = bapp.cancel(second, "withdrawn", actor="api:billing")
    # Then it is counted and the batch completes
    assert result.applied
    assert batch_of(bapp, "c-2").counts == {"SUCCEEDED": 1, "CANCELLED": 1}
    assert batch_of(bapp, "c-2").state is BatchState.COMPLETE


def test_a_bulk_cancel_of_paused_children_counts_each_once(bapp):
    # Given a batch of three whose job is switched off: its children wait PAUSED
    set_toggle(toggle_key("mail.statement.v1"), "off")
    bapp.enqueue_batch("c-3", children(3), CALLBACK)
    ids = child_ids(bapp, "c-3")
    assert deliver_all(bapp, ids) == [Outcome.PAUSED] * 3
    # When an operator cancels every PAUSED operation at once
    report = bulk_cancel(
        bapp.operations, bapp.delays, _S.PAUSED, "not this month", dry_run=False, settlement=bapp.settlement
    )
    # Then each is counted CANCELLED once and the batch completes
    assert report.cancelled == 3
    batch = batch_of(bapp, "c-3")
    assert batch.counts == {"CANCELLED": 3} and batch.state is BatchState.COMPLETE
    assert len(jobs_items(callback_id("c-3"))) == 1
    # And the same bulk cancel again finds nothing and counts nothing
    again = bulk_cancel(bapp.operations, bapp.delays, _S.PAUSED, "again", dry_run=False, settlement=bapp.settlement)
    assert again.cancelled == 0 and batch_of(bapp, "c-3").counts == {"CANCELLED": 3}


def test_a_child_not_started_by_its_expires_at_is_counted_expired(bapp):
    # Given a batch of two, one done, the other's message carrying an expires_at already past
    bapp.enqueue_batch("c-4", children(2), CALLBACK)
    first, second = child_ids(bapp, "c-4")
    deliver(bapp, first)
    body = json.loads(body_of(bapp, second))
    body["expires_at"] = "2000-01-01T00:00:00Z"
    # When it is delivered
    outcome = deliver(bapp, second, body=json.dumps(body)).outcome
    # Then it ends EXPIRED, counted in the same write, and the batch completes with the count in its summary
    assert outcome is Outcome.EXPIRED
    batch = batch_of(bapp, "c-4")
    assert batch.counts == {"SUCCEEDED": 1, "EXPIRED": 1} and batch.state is BatchState.COMPLETE
    assert bapp.operations.require(callback_id("c-4")).payload["batch_expired"] == 1


def test_an_operator_resolve_of_an_unknown_child_moves_its_count_once(bapp, outcomes):
    # Given a batch of two: one SUCCEEDED, one UNKNOWN (counted UNKNOWN, holding the callback back)
    bapp.enqueue_batch("c-5", children(2), CALLBACK)
    first, second = child_ids(bapp, "c-5")
    outcomes.unknowable.add(second)
    deliver_all(bapp, [first, second])
    assert batch_of(bapp, "c-5").counts == {"SUCCEEDED": 1, "UNKNOWN": 1}
    # When an operator resolves it as failed, and again (a double click)
    operator = bapp.operator("cli:alice")
    assert operator.resolve(second, "failed", "the provider has no record of it").applied
    assert not operator.resolve(second, "failed", "again").applied
    # Then its count moved once, and the batch completes with one callback
    batch = batch_of(bapp, "c-5")
    assert batch.counts == {"SUCCEEDED": 1, "FAILED": 1} and batch.state is BatchState.COMPLETE
    assert len(jobs_items(callback_id("c-5"))) == 1


def test_a_cancel_under_a_batch_id_form_no_batch_admitted_counts_nowhere(bapp):
    # Given an operation under a child's id form whose batch was never admitted (its request written by hand)
    jobs = bapp.operations.jobs
    jobs.put(jobs.put_request(JobRequest("ghost::0:p-1", "mail.statement.v1", {"partner_id": "p-1"})))
    # When an operator cancels it
    result = bapp.operator("cli:alice").cancel("ghost::0:p-1", "not ours")
    # Then it is cancelled as any operation is, and the counter, given its change, writes nothing: no batch wrote it
    assert result.applied
    reason = bapp.operations.require("ghost::0:p-1").history[-1].reason
    assert "exists already" not in reason and "count" not in reason
    assert len(counted(bapp)) == 1
    assert bapp.require_batches().get("ghost") is None


def test_a_reopened_child_the_relay_rejects_moves_its_count_and_is_not_counted_twice(bapp, outcomes):
    # Given a batch of two whose first child FAILED and was retried by an operator (counted FAILED until it settles)
    from converge.flow.relay import Reject
    from converge.model.records import Subject

    bapp.enqueue_batch("c-7", children(2), CALLBACK)
    first, _ = child_ids(bapp, "c-7")
    outcomes.failing.add(first)
    deliver(bapp, first)
    assert batch_of(bapp, "c-7").counts == {"FAILED": 1}
    assert bapp.operator("cli:alice").retry(first, "the address is fixed").applied
    # When the relay refuses its request (its job type is gone from a deployment since)
    fingerprint = bapp.operations.state.record(first).fingerprint or ""
    bapp.relay._reject(Reject("seq-1", Subject(first, "mail.statement.v1", fingerprint), "unknown job type"))
    # Then its count moved from FAILED to REJECTED: one child final, not two (counted FAILED before: moved)
    batch = batch_of(bapp, "c-7")
    assert bapp.operations.state.record(first).state is _S.REJECTED
    assert {state: n for state, n in batch.counts.items() if n} == {"REJECTED": 1} and batch.final == 1


def test_the_last_child_the_relay_rejects_completes_its_batch_with_one_callback(bapp):
    # Given a batch of two, one child settled, the other's request refused by the relay (its job type gone)
    from converge.flow.relay import Reject
    from converge.model.records import Subject

    bapp.enqueue_batch("c-8", children(2), CALLBACK)
    first, second = child_ids(bapp, "c-8")
    assert deliver(bapp, first).outcome is Outcome.SUCCEEDED
    fingerprint = bapp.operations.require(second).request.fingerprint
    # When the relay rejects it
    bapp.relay._reject(Reject("seq-2", Subject(second, "mail.statement.v1", fingerprint), "unknown job type"))
    # Then the counter counted it from the rejection's write and completed the batch: one callback, with the counts
    assert batch_of(bapp, "c-8").state is BatchState.COMPLETE
    assert len(jobs_items(callback_id("c-8"))) == 1
    payload = bapp.operations.require(callback_id("c-8")).payload
    assert (payload["batch_succeeded"], payload["batch_rejected"]) == (1, 1)


def test_an_expiry_under_a_batch_id_form_no_batch_admitted_ends_expired_and_counts_nowhere(bapp):
    # Given an operation under a child's id form whose batch was never admitted, its expires_at past
    jobs = bapp.operations.jobs
    jobs.put(jobs.put_request(JobRequest("ghost::0:p-2", "mail.statement.v1", {"partner_id": "p-2"})))
    body = json.loads(body_of(bapp, "ghost::0:p-2"))
    body["expires_at"] = "2000-01-01T00:00:00Z"
    # When it is delivered
    outcome = deliver(bapp, "ghost::0:p-2", body=json.dumps(body)).outcome
    # Then it ends EXPIRED as any operation does, and the counter, given its change, writes nothing
    assert outcome is Outcome.EXPIRED
    assert bapp.operations.state.record("ghost::0:p-2").state is _S.EXPIRED
    reason = bapp.operations.require("ghost::0:p-2").history[-1].reason
    assert reason.startswith("not started by its expires_at 2000-01-01T00:00:00Z")
    assert len(counted(bapp)) == 1 and bapp.require_batches().get("ghost") is None
