"""A hold (a job kept from starting by flow control) and a runner's wait between two steps, as the state table stores
them: the record each leaves, what refuses a hold, and which wait a signal brings forward.

A hold reads nothing first: its one conditional write is what keeps it from moving an operation it must not (settled,
paused, admitted with other content), so each refusal is checked here on the record as it stands afterwards.
"""

from __future__ import annotations

import pytest

from converge.model.clock import iso
from converge.model.records import HISTORY_LIMIT, Refused, Subject
from converge.model.request import fingerprint
from converge.model.states import OperationState

from .conftest import history, sent, state_item

PAYLOAD = {"user_id": "00000000-0000-4000-8000-000000000001"}
FP = fingerprint("mail.notice.v1", PAYLOAD)
ACCEPTED_AT = "2030-01-01T00:00:00.000Z"
SUBJECT = Subject("op-1", "mail.notice.v1", FP, ACCEPTED_AT)


# -- a hold -------------------------------------------------------------------------------------------------------


def test_a_hold_of_an_operation_with_no_record_creates_it_accepted_then_held_for_flow_control(store, tables, clock):
    # Given an operation the relay has not recorded yet
    run_at = clock.now() + 30
    # When its first delivery is held by a rate limit
    assert store.state.hold(SUBJECT, run_at, "held by a rate limit") is None
    # Then its record begins with its acceptance, at the producer's write, then the hold; SCHEDULED at its time, for
    # flow control (what a released key brings forward), with the content it was admitted with
    item = state_item(tables)
    assert history(item) == [f"{ACCEPTED_AT} ACCEPTED accepted", f"{iso(clock.now())} SCHEDULED held by a rate limit"]
    assert item["state"] == {"S": "SCHEDULED"}
    assert float(item["run_at"]["N"]) == run_at
    assert item["waiting_for"] == {"S": "flow-control"}
    assert (item["job_type"], item["fingerprint"]) == ({"S": "mail.notice.v1"}, {"S": FP})
    assert store.require("op-1").created_at == ACCEPTED_AT


@pytest.mark.parametrize("standing", [OperationState.SUCCEEDED, OperationState.PAUSED])
def test_a_hold_of_an_operation_settled_or_paused_is_refused_and_leaves_it_as_it_was(store, tables, clock, standing):
    # Given an operation that succeeded, or one paused by its kill switch (no lease on either, nothing ahead)
    if standing is OperationState.SUCCEEDED:
        store.state.settle(store.state.acquire(SUBJECT, "m-1", 30), OperationState.SUCCEEDED, "done")
    else:
        store.state.pause(SUBJECT, "kill switch is off")
    before = state_item(tables)
    # When a copy of its message is held by a rate limit
    with pytest.raises(Refused) as refused:
        store.state.hold(SUBJECT, clock.now() + 30, "held by a rate limit")
    # Then the hold is refused for the state it met: a hold moves only a job a delivery may still start
    assert refused.value.current.state is standing
    assert state_item(tables) == before


def test_a_hold_carrying_other_content_than_the_operation_was_admitted_with_is_refused(store, tables, clock):
    # Given an operation a delivery started with its content, then gave back for a retry (no lease, nothing ahead)
    store.state.release(store.state.acquire(SUBJECT, "m-1", 30), "attempt 1 failed; retrying", "TransientError: x")
    before = state_item(tables)
    # When a message with other content under its id is held
    other = Subject("op-1", "mail.notice.v1", "other-fp", ACCEPTED_AT)
    with pytest.raises(Refused) as refused:
        store.state.hold(other, clock.now() + 30, "held by a rate limit")
    # Then it is refused, and the record is as it was
    assert refused.value.current.fingerprint == FP
    assert state_item(tables) == before
    # And a hold of its own content is not: the operation waits SCHEDULED for its time
    store.state.hold(SUBJECT, clock.now() + 30, "held by a rate limit")
    assert state_item(tables)["state"] == {"S": "SCHEDULED"}


def test_a_hold_refused_for_what_the_record_holds_is_one_write_when_its_history_is_at_the_limit(store, tables, clock):
    # Given an operation retried until its history holds exactly the limit, and started again by a live delivery
    for attempt in range(1, 5):
        clock.advance(1)
        store.state.release(store.state.acquire(SUBJECT, f"m-{attempt}", 30), f"attempt {attempt} failed", "x")
    store.state.acquire(SUBJECT, "m-5", 30)
    before = state_item(tables)
    assert len(history(before)) == HISTORY_LIMIT
    calls = sent(store.state._client)
    # When a copy of its message is held meanwhile
    with pytest.raises(Refused) as refused:
        store.state.hold(SUBJECT, clock.now() + 60, "held by a cap")
    # Then it is refused for the live lease, in its one write: a history at the limit is no reason to write again (only
    # one past it is, its last entry replaced), and nothing was written
    assert refused.value.current.state is OperationState.IN_PROGRESS
    assert [name for name, _ in calls] == ["UpdateItem"]
    assert state_item(tables) == before


# -- a runner's wait between two steps ------------------------------------------------------------------------------


def test_a_wait_not_for_a_signal_stores_no_signal_to_wait_for_and_a_signal_does_not_bring_it_forward(
    store, tables, clock
):
    # Given a delivery that ran the first step
    lease = store.state.acquire(SUBJECT, "m-1", 30)
    run_at = clock.now() + 600
    # When its runner waits ten minutes after that step (not for a signal)
    store.state.wait(lease, run_at, "cooling-off", "waiting at 'cooling-off'")
    # Then the operation waits SCHEDULED after that step until its time, waiting for nothing else
    item = state_item(tables)
    assert (item["state"], item["waiting"]) == ({"S": "SCHEDULED"}, {"S": "cooling-off"})
    assert float(item["run_at"]["N"]) == run_at
    assert "waiting_for" not in item
    # And a signal sent to that wait brings nothing forward: the wait ends at its time alone
    assert store.state.wake("op-1", "cooling-off") is False
    assert float(state_item(tables)["run_at"]["N"]) == run_at


def test_a_wait_for_a_signal_stores_so_and_a_signal_brings_its_time_forward_to_now(store, tables, clock):
    # Given a delivery that ran the first step
    lease = store.state.acquire(SUBJECT, "m-1", 30)
    # When its runner waits up to an hour for the signal "approved"
    store.state.wait(lease, clock.now() + 3600, "approved", "waiting for signal 'approved'", for_signal=True)
    # Then the operation waits for a signal, and the signal brings its time forward to now
    assert state_item(tables)["waiting_for"] == {"S": "signal"}
    clock.advance(5)
    assert store.state.wake("op-1", "approved") is True
    assert float(state_item(tables)["run_at"]["N"]) == clock.now()
