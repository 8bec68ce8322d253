"""The state record exactly as the conflict and STUCK writes leave it: every attribute, under its name.

The operator's tools, the listings and a re-dispatch read these attributes back by name, so a write
that stores one under another name (or not at all) loses it as surely as a failed write would.
"""

from __future__ import annotations

import boto3
import pytest
from botocore.exceptions import ClientError

from converge.model.clock import iso
from converge.model.errors import InvalidTransition
from converge.model.records import CONFLICTS_LIMIT, HISTORY_LIMIT, ConflictEntry, ExtraRefused, Lease, Refused, Subject
from converge.model.request import JobRequest, fingerprint
from converge.model.states import Flag, OperationState, StuckKind
from converge.store.codecs import entry_value, request_item
from converge.store.transact import TransactItem

from .conftest import ClientProxy, history, state_item

PAYLOAD = {"user_id": "00000000-0000-4000-8000-000000000001"}
FP = fingerprint("mail.notice.v1", PAYLOAD)
ACCEPTED_AT = "2030-01-01T00:00:00.000Z"
CONFLICT_AT = "2030-01-01T00:00:05.000Z"


def other_content(at: str = CONFLICT_AT, job_type: str = "mail.notice.v1") -> ConflictEntry:
    return ConflictEntry(at, "other-fp", job_type, "jobs table: other content")


# -- conflicts ------------------------------------------------------------------------------------------------


def test_a_conflict_before_any_state_creates_the_record_with_the_original_kept(store, tables):
    # Given an operation whose request was rewritten before the relay recorded anything
    original = JobRequest("op-1", "mail.notice.v1", PAYLOAD, correlation_id="corr-1")
    # When the conflict is recorded, with the original request to keep
    assert store.state.record_conflict("op-1", other_content(), FP, original=original) is True
    # Then the record is created ACCEPTED, with the admitted fingerprint and job type, the original request
    # (less its key), the conflict entry, and the listing keys of the CONFLICT index
    item = state_item(tables)
    assert item["state"] == {"S": "ACCEPTED"}
    assert item["fingerprint"] == {"S": FP}
    assert item["job_type"] == {"S": "mail.notice.v1"}
    assert history(item) == [f"{CONFLICT_AT} ACCEPTED accepted"]
    kept = dict(request_item(original))
    del kept["operation_id"]
    assert item["original"] == {"M": kept}
    assert item["conflicts"] == {"L": [entry_value(other_content())]}
    assert item["conflict"] == {"S": Flag.CONFLICT.value}
    assert item["conflict_sk"] == {"S": f"mail.notice.v1#{CONFLICT_AT}"}
    assert "conflicts_dropped" not in item
    # And it reads back as the operator sees it
    receipt = store.require("op-1")
    assert receipt.fingerprint == FP and receipt.conflicts == (other_content(),)


def test_a_conflict_is_listed_under_the_original_job_type_not_the_rewritten_one(store, tables):
    # Given a rewrite that also changed the job type
    original = JobRequest("op-1", "mail.notice.v1", PAYLOAD)
    # When it is recorded
    store.state.record_conflict("op-1", other_content(job_type="files.copy.v1"), FP, original=original)
    # Then the record and its listing key name the job type the operation was admitted as
    item = state_item(tables)
    assert item["job_type"] == {"S": "mail.notice.v1"}
    assert item["conflict_sk"] == {"S": f"mail.notice.v1#{CONFLICT_AT}"}
    [row] = store.listings.list_attention(Flag.CONFLICT, job_type="mail.notice.v1").operations
    assert (row["operation_id"], row["listed_at"]) == ("op-1", CONFLICT_AT)


def test_without_an_original_the_conflicting_job_type_is_recorded(store, tables):
    store.state.record_conflict("op-1", other_content(job_type="files.copy.v1"), FP)
    item = state_item(tables)
    assert item["job_type"] == {"S": "files.copy.v1"}
    assert item["conflict_sk"] == {"S": f"files.copy.v1#{CONFLICT_AT}"}
    assert "original" not in item


def test_a_conflict_on_a_recorded_operation_keeps_its_state_history_and_fingerprint(store, tables, clock):
    # Given an operation already recorded (SUCCEEDED) with its own fingerprint
    store.admit(JobRequest("op-1", "mail.notice.v1", PAYLOAD))
    lease = store.state.acquire(Subject("op-1", "mail.notice.v1", FP, ACCEPTED_AT), "m-1", 30)
    store.state.settle(lease, OperationState.SUCCEEDED, "done")
    before = state_item(tables)
    # When a later rewrite is recorded as a conflict
    assert store.state.record_conflict(
        "op-1", other_content(), FP, original=JobRequest("op-1", "mail.notice.v1", PAYLOAD)
    )
    # Then its state, history and fingerprint are as they were; the job type (which the happy path leaves
    # unwritten) and the original request are added, for the listing and for any later re-dispatch
    after = state_item(tables)
    for name in ("state", "history", "fingerprint"):
        assert after[name] == before[name], name
    assert "job_type" not in before and after["job_type"] == {"S": "mail.notice.v1"}
    assert after["original"]["M"]["payload"] == request_item(JobRequest("op-1", "mail.notice.v1", PAYLOAD))["payload"]
    assert after["conflicts"] == {"L": [entry_value(other_content())]}


def test_content_that_is_the_operations_own_is_no_conflict_and_writes_nothing(store, tables):
    # Given a recorded conflict
    store.state.record_conflict("op-1", other_content(), FP)
    before = state_item(tables)
    # When "other" content with the operation's own fingerprint comes
    own = ConflictEntry("2030-01-01T00:00:09.000Z", FP, "mail.notice.v1", "jobs table")
    # Then it is not recorded, and the record is unchanged
    assert store.state.record_conflict("op-1", own, FP) is False
    assert state_item(tables) == before


def test_past_the_cap_a_conflict_is_counted_and_its_listing_refreshed(store, tables):
    # Given an operation holding as many conflicts as the receipt keeps
    for index in range(CONFLICTS_LIMIT):
        store.state.record_conflict("op-1", other_content(at=f"2030-01-01T00:00:{index:02d}.000Z"), FP)
    # When one more comes, later
    late = "2030-01-01T00:01:00.000Z"
    assert store.state.record_conflict("op-1", other_content(at=late), FP) is True
    # Then it is counted, not kept, and the listing carries its time
    item = state_item(tables)
    assert len(item["conflicts"]["L"]) == CONFLICTS_LIMIT
    assert item["conflicts_dropped"] == {"N": "1"}
    assert item["conflict"] == {"S": Flag.CONFLICT.value}
    assert item["conflict_sk"] == {"S": f"mail.notice.v1#{late}"}


# -- STUCK marks ----------------------------------------------------------------------------------------------


def test_stuck_before_any_state_creates_the_record_accepted_when_the_producer_wrote(store, tables, clock):
    # Given an operation the relay never recorded (its message went to the relay's failure queue)
    seen = store.state.record("op-1")
    subject = Subject("op-1", "mail.notice.v1", FP, ACCEPTED_AT)
    # When it is marked stuck
    assert store.state.mark_stuck(seen, StuckKind.DEAD_LETTERED, "its message is in the DLQ", subject=subject) is True
    # Then the record is ACCEPTED since the producer's write, identified, and listed under STUCK with the reason
    now = iso(clock.now())
    item = state_item(tables)
    assert item["state"] == {"S": "ACCEPTED"}
    assert history(item) == [f"{ACCEPTED_AT} ACCEPTED accepted"]
    assert item["job_type"] == {"S": "mail.notice.v1"}
    assert item["fingerprint"] == {"S": FP}
    assert item["attention"] == {"S": Flag.STUCK.value}
    assert item["attention_sk"] == {"S": f"mail.notice.v1#{now}"}
    assert item["stuck"] == {"S": "dead_lettered: its message is in the DLQ"}
    assert "redrives" not in item  # a mark is not a redrive


def test_stuck_without_a_subject_names_the_given_job_type_and_now(store, tables, clock):
    seen = store.state.record("op-1")
    clock.advance(7)
    assert store.state.mark_stuck(seen, StuckKind.DEAD_LETTERED, "lost", job_type="files.copy.v1")
    now = iso(clock.now())
    item = state_item(tables)
    assert item["job_type"] == {"S": "files.copy.v1"}
    assert history(item) == [f"{now} ACCEPTED accepted"]
    assert item["attention_sk"] == {"S": f"files.copy.v1#{now}"}


def test_a_stuck_mark_counts_a_redrive_only_when_asked(store, tables):
    seen = store.state.record("op-1")
    subject = Subject("op-1", "mail.notice.v1", FP, ACCEPTED_AT)
    store.state.mark_stuck(seen, StuckKind.DEAD_LETTERED, "redriven", subject=subject, count_redrive=True)
    assert state_item(tables)["redrives"] == {"N": "1"}


def test_stuck_on_a_recorded_operation_keeps_its_state_and_needs_it_unchanged(store, tables):
    # Given a recorded open operation (PAUSED), read
    subject = Subject("op-1", "mail.notice.v1", FP, ACCEPTED_AT)
    store.state.pause(subject, "kill switch is off")
    seen = store.state.record("op-1")
    before = state_item(tables)
    # When it is marked stuck from that read
    assert store.state.mark_stuck(seen, StuckKind.DEAD_LETTERED, "no message", subject=subject)
    # Then its state and history are unchanged, and the mark is there
    item = state_item(tables)
    assert item["state"] == before["state"] == {"S": "PAUSED"}
    assert item["history"] == before["history"]
    assert item["stuck"] == {"S": "dead_lettered: no message"}
    # And a mark from a read older than a change is refused
    store.state.acquire(subject, "m-1", 30)
    assert store.state.mark_stuck(seen, StuckKind.DEAD_LETTERED, "stale", subject=subject) is False
    assert state_item(tables)["state"] == {"S": "IN_PROGRESS"}


def test_a_repaired_stuck_operation_is_listed_under_its_state_again(store, tables, clock):
    # Given a SCHEDULED operation marked stuck
    subject = Subject("op-1", "mail.notice.v1", FP, ACCEPTED_AT)
    store.state.schedule(subject, clock.now() + 7200, "waiting")
    store.state.mark_stuck(store.state.record("op-1"), StuckKind.UNDISPATCHED, "no schedule", subject=subject)
    seen = store.state.record("op-1")
    before = state_item(tables)
    # When the mark is cleared from that read
    clock.advance(5)
    assert store.state.clear_stuck(seen) is True
    # Then it is listed SCHEDULED again (now), the mark gone, its state and history unchanged
    item = state_item(tables)
    assert item["attention"] == {"S": "SCHEDULED"}
    assert item["attention_sk"] == {"S": f"mail.notice.v1#{iso(clock.now())}"}
    assert "stuck" not in item
    assert (item["state"], item["history"]) == (before["state"], before["history"])
    # And clearing again (not marked), or from a read older than a change, is refused and changes nothing
    assert store.state.clear_stuck(seen) is False
    store.state.mark_stuck(store.state.record("op-1"), StuckKind.UNDISPATCHED, "again", subject=subject)
    clock.advance(7200)
    assert isinstance(store.state.acquire(subject, "m-1", 30), Lease)
    assert store.state.clear_stuck(seen) is False
    assert state_item(tables)["state"] == {"S": "IN_PROGRESS"}


def test_a_repaired_operation_in_an_unlisted_state_is_unlisted(store, tables):
    # Given an IN_PROGRESS operation marked stuck / When the mark is cleared / Then it is listed nowhere
    subject = Subject("op-1", "mail.notice.v1", FP, ACCEPTED_AT)
    store.state.acquire(subject, "m-1", 30)
    store.state.mark_stuck(store.state.record("op-1"), StuckKind.UNDISPATCHED, "lost", subject=subject)
    assert store.state.clear_stuck(store.state.record("op-1")) is True
    item = state_item(tables)
    assert "attention" not in item and "attention_sk" not in item and "stuck" not in item


def test_a_settled_operation_cannot_be_stuck_and_the_refusal_names_it(store):
    subject = Subject("op-1", "mail.notice.v1", FP, ACCEPTED_AT)
    store.state.settle(store.state.acquire(subject, "m-1", 30), OperationState.SUCCEEDED, "done")
    with pytest.raises(InvalidTransition, match=r"only open operations are stuck; op-1 is SUCCEEDED"):
        store.state.mark_stuck(store.state.record("op-1"), StuckKind.DEAD_LETTERED, "no", subject=subject)


# -- moves a delivery makes without reading first: REJECTED, EXPIRED, SCHEDULED, PAUSED ------------------------

SUBJECT = Subject("op-1", "mail.notice.v1", FP, ACCEPTED_AT)


def test_a_rejection_before_any_state_stores_the_whole_record_with_its_error(store, tables, clock):
    # When a delivery refuses an operation no one recorded yet
    assert store.state.reject(SUBJECT, "payload: field required") is None
    # Then the record holds the state, both history entries, the reason as the last error and in the list
    # of errors (attempt 0: it never ran), its identity, and the listing keys
    at = iso(clock.now())
    item = state_item(tables)
    assert item["state"] == {"S": "REJECTED"}
    assert history(item) == [f"{ACCEPTED_AT} ACCEPTED accepted", f"{at} REJECTED payload: field required"]
    assert item["last_error"] == {"S": "payload: field required"}
    assert item["errors"] == {
        "L": [{"M": {"at": {"S": at}, "attempt": {"N": "0"}, "error": {"S": "payload: field required"}}}]
    }
    assert (item["job_type"], item["fingerprint"]) == ({"S": "mail.notice.v1"}, {"S": FP})
    assert (item["attention"], item["attention_sk"]) == ({"S": "REJECTED"}, {"S": f"mail.notice.v1#{at}"})
    # And the receipt reads the error back as written: attempt 0, it never ran
    [error] = store.require("op-1").state_record.errors
    assert (error.at, error.attempt, error.error) == (at, 0, "payload: field required")


def test_a_blind_move_on_an_existing_record_appends_one_entry_and_keeps_its_identity(store, tables, clock):
    # Given a PAUSED operation (created by the pause, with its job type and fingerprint)
    store.state.pause(SUBJECT, "kill switch is off")
    paused_at = iso(clock.now())
    clock.advance(3)
    # When a later delivery finds it expired, carrying another job type name and acceptance time
    other = Subject("op-1", "files.copy.v1", FP, "2030-01-02T00:00:00.000Z")
    assert store.state.expire(other, "not started by its expires_at") is None
    # Then one entry is appended (no second ACCEPTED), and the identity it was created with is kept
    at = iso(clock.now())
    item = state_item(tables)
    assert history(item) == [
        f"{ACCEPTED_AT} ACCEPTED accepted",
        f"{paused_at} PAUSED kill switch is off",
        f"{at} EXPIRED not started by its expires_at",
    ]
    assert item["job_type"] == {"S": "mail.notice.v1"}


def test_an_expiry_stores_expired_listed_with_the_reason(store, tables, clock):
    assert store.state.expire(SUBJECT, "not started by its expires_at") is None
    at = iso(clock.now())
    item = state_item(tables)
    assert item["state"] == {"S": "EXPIRED"}
    assert history(item) == [f"{ACCEPTED_AT} ACCEPTED accepted", f"{at} EXPIRED not started by its expires_at"]
    assert (item["attention"], item["attention_sk"]) == ({"S": "EXPIRED"}, {"S": f"mail.notice.v1#{at}"})
    assert (item["job_type"], item["fingerprint"]) == ({"S": "mail.notice.v1"}, {"S": FP})
    assert "last_error" not in item and "errors" not in item  # an expiry is no error
    # And it is final: a later delivery cannot take it
    with pytest.raises(Refused) as refused:
        store.state.acquire(SUBJECT, "m-1", 30)
    assert refused.value.current.state is OperationState.EXPIRED


def test_a_schedule_stores_its_time_and_lists_it(store, tables, clock):
    run_at = clock.now() + 7200
    assert store.state.schedule(SUBJECT, run_at, "waiting for its run_at") is None
    at = iso(clock.now())
    item = state_item(tables)
    assert item["state"] == {"S": "SCHEDULED"}
    assert float(item["run_at"]["N"]) == run_at
    assert history(item) == [f"{ACCEPTED_AT} ACCEPTED accepted", f"{at} SCHEDULED waiting for its run_at"]
    assert (item["attention"], item["attention_sk"]) == ({"S": "SCHEDULED"}, {"S": f"mail.notice.v1#{at}"})
    assert store.require("op-1").to_json()["run_at"] == iso(run_at)
    # And no delivery takes it before its time
    with pytest.raises(Refused) as refused:
        store.state.acquire(SUBJECT, "m-1", 30)
    assert refused.value.current.state is OperationState.SCHEDULED


def test_a_blind_move_refuses_other_content_and_a_live_lease(store, tables, clock):
    # Given an operation a delivery holds
    store.state.acquire(SUBJECT, "m-1", 30)
    # When another delivery tries to pause it, or one with other content to reject it
    with pytest.raises(Refused) as refused:
        store.state.pause(SUBJECT, "kill switch is off")
    # Then neither applies: the live lease and the admitted content win
    assert refused.value.current.state is OperationState.IN_PROGRESS
    clock.advance(60)  # the lease has expired; the content still differs
    other = Subject("op-1", "mail.notice.v1", "other-fp", ACCEPTED_AT)
    with pytest.raises(Refused) as refused:
        store.state.reject(other, "bad")
    assert refused.value.current.state is OperationState.IN_PROGRESS
    assert state_item(tables)["state"] == {"S": "IN_PROGRESS"}


# -- an operator's moves (resume, redrive, resolve) -----------------------------------------------------------


def test_an_operator_move_records_the_state_job_type_history_error_and_listing(store, tables, clock):
    # Given an UNKNOWN operation (its delivery could not tell what the provider did)
    store.state.settle(store.state.acquire(SUBJECT, "m-1", 30), OperationState.UNKNOWN, "cannot tell")
    clock.advance(5)
    # When an operator resolves it as failed, with an error
    operation = store.require("op-1")
    assert store.state.transition(
        operation, OperationState.FAILED, "given up by hand", error="Operator: no longer wanted"
    )
    # Then the record holds the new state, its job type, the appended history, the error and the FAILED listing
    at = iso(clock.now())
    item = state_item(tables)
    assert item["state"] == {"S": "FAILED"}
    assert item["job_type"] == {"S": "mail.notice.v1"}
    assert history(item)[-1] == f"{at} FAILED given up by hand"
    assert item["last_error"] == {"S": "Operator: no longer wanted"}
    assert (item["attention"], item["attention_sk"]) == ({"S": "FAILED"}, {"S": f"mail.notice.v1#{at}"})
    [row] = store.listings.list_attention(OperationState.FAILED).operations
    assert (row["operation_id"], row["listed_at"]) == ("op-1", at)


def test_a_reopened_operation_can_be_listed_stuck_until_a_worker_takes_it(store, tables, clock):
    # Given a FAILED operation
    store.state.settle(
        store.state.acquire(SUBJECT, "m-1", 30), OperationState.FAILED, "gave up", error="TransientError: x"
    )
    clock.advance(5)
    # When an operator redrives it, listing it STUCK until its message is taken
    operation = store.require("op-1")
    assert store.state.transition(
        operation, OperationState.ACCEPTED, "redriven", count_redrive=True, stuck=("redriven", "waiting for a worker")
    )
    # Then it is open again, counted, and listed under STUCK (not FAILED) with the reason
    at = iso(clock.now())
    item = state_item(tables)
    assert item["state"] == {"S": "ACCEPTED"}
    assert item["redrives"] == {"N": "1"}
    assert (item["attention"], item["attention_sk"]) == ({"S": Flag.STUCK.value}, {"S": f"mail.notice.v1#{at}"})
    assert item["stuck"] == {"S": "redriven: waiting for a worker"}
    [row] = store.listings.list_attention(Flag.STUCK).operations
    assert (row["operation_id"], row["listed_at"], row["stuck_reason"]) == ("op-1", at, "waiting for a worker")


def test_forgetting_the_lease_is_asked_for_and_otherwise_the_lease_is_kept(store, tables, clock):
    # Given an operation a delivery holds, marked UNKNOWN by hand twice: once keeping the lease, once forgetting it
    store.state.acquire(SUBJECT, "m-1", 300)
    assert store.state.transition(store.require("op-1"), OperationState.UNKNOWN, "cannot tell")
    kept = state_item(tables)
    assert "lease_owner" in kept and "lease_until" in kept
    assert store.state.transition(
        store.require("op-1"), OperationState.SUCCEEDED, "applied, per the provider", forget_lease=True
    )
    # Then only the move that asked dropped the holder's lease (both attributes)
    forgotten = state_item(tables)
    assert "lease_owner" not in forgotten and "lease_until" not in forgotten
    assert forgotten["state"] == {"S": "SUCCEEDED"}


def test_a_success_after_an_operator_recorded_an_error_under_the_lease_clears_that_error(store, tables, clock):
    # Given a delivery that holds the lease of a first attempt (its record has no error yet)
    lease = store.state.acquire(SUBJECT, "m-1", 300)
    # And an operator who, meanwhile, marks it UNKNOWN with an error (keeping the holder's lease)
    assert store.state.transition(store.require("op-1"), OperationState.UNKNOWN, "worker silent", error="Operator: x")
    assert state_item(tables)["last_error"] == {"S": "Operator: x"}
    # When the holder finishes and settles SUCCEEDED
    assert store.state.settle(lease, OperationState.SUCCEEDED, "sent") is None
    # Then the succeeded record carries no current error, and the error stays in the history of errors
    item = state_item(tables)
    assert item["state"] == {"S": "SUCCEEDED"}
    assert "last_error" not in item
    assert [entry["M"]["error"]["S"] for entry in item["errors"]["L"]] == ["Operator: x"]


def test_a_move_of_an_unrecorded_operation_creates_its_record_with_the_requests_fingerprint(store, tables):
    # Given an operation the producer wrote but nothing recorded yet
    store.admit(JobRequest("op-1", "mail.notice.v1", PAYLOAD))
    operation = store.require("op-1")
    # When an operator pauses it before the relay has read it
    assert store.state.transition(operation, OperationState.PAUSED, "held back")
    # Then the record is created with the request's fingerprint
    assert state_item(tables)["fingerprint"] == {"S": FP}
    # And the same move from the same (now stale) read is refused: the record exists
    assert store.state.transition(operation, OperationState.PAUSED, "again") is False
    assert [line.split(" ", 1)[1] for line in history(state_item(tables))] == ["PAUSED held back"]


@pytest.mark.parametrize("to", [OperationState.CANCELLED, OperationState.EXPIRED])
def test_a_cancel_or_expiry_before_the_relay_leaves_the_fingerprint_to_the_relay(store, tables, to):
    # Given an operation the producer wrote but nothing recorded yet (a rewrite may have replaced what it first wrote)
    store.admit(JobRequest("op-1", "mail.notice.v1", PAYLOAD))
    operation = store.require("op-1")
    # When it is cancelled or expires before the relay has read it
    assert store.state.transition(operation, to, "not wanted")
    # Then the record says so, without adopting the stored request's content as the operation's
    item = state_item(tables)
    assert item["state"] == {"S": to.value} and "fingerprint" not in item
    assert [line.split(" ", 1)[1] for line in history(item)] == [f"{to.value} not wanted"]


# -- a delivery's lease and the listings ----------------------------------------------------------------------


def test_taking_the_lease_takes_the_operation_off_every_listing_at_once(store, tables, clock):
    # Given an open operation listed under STUCK (its message went to the DLQ), its record naming that listing
    seen = store.state.record("op-1")
    assert store.state.mark_stuck(seen, StuckKind.DEAD_LETTERED, "its message is in the DLQ", subject=SUBJECT)
    assert store.state.record("op-1").attention == Flag.STUCK.value
    # When a delivery takes its lease (and still holds it)
    assert store.state.acquire(SUBJECT, "m-1", 30).attempt == 1
    # Then the lease's own write leaves neither listing key nor the mark, and nothing lists it any more
    item = state_item(tables)
    assert item["state"] == {"S": "IN_PROGRESS"}
    assert not {"attention", "attention_sk", "stuck"} & set(item)
    assert store.state.record("op-1").attention is None
    assert store.listings.list_attention(Flag.STUCK).operations == []


def test_a_stuck_mark_with_no_job_type_known_is_listed_under_none(store, tables, clock):
    # Given an operation whose record names no job type (a lease given back: the happy path writes none)
    store.state.release(store.state.acquire(SUBJECT, "m-1", 30), "attempt 1 failed; retrying", "TransientError: x")
    seen = store.state.record("op-1")
    assert seen.job_type is None
    clock.advance(5)
    # When it is marked stuck without a job type or a message to take one from
    assert store.state.mark_stuck(seen, StuckKind.REOPENED, "re-dispatched")
    # Then its listing key names no job type (an unfiltered listing finds it, at the time of the mark),
    # and no job type is made up for its record
    now = iso(clock.now())
    item = state_item(tables)
    assert item["attention_sk"] == {"S": f"#{now}"}
    assert "job_type" not in item
    [row] = store.listings.list_attention(Flag.STUCK).operations
    assert (row["operation_id"], row["listed_at"]) == ("op-1", now)


def test_an_operator_move_names_the_job_type_on_a_record_that_had_none(store, tables, clock):
    # Given an admitted operation a delivery holds: its record names no job type yet
    store.admit(JobRequest("op-1", "mail.notice.v1", PAYLOAD))
    store.state.acquire(SUBJECT, "m-1", 30)
    assert "job_type" not in state_item(tables)
    # When an operator resolves it by hand
    assert store.state.transition(store.require("op-1"), OperationState.UNKNOWN, "cannot tell, by hand")
    # Then the record names the operation's job type
    assert state_item(tables)["job_type"] == {"S": "mail.notice.v1"}


def test_past_the_cap_a_conflict_changes_only_the_count_and_the_listing_time(store, tables):
    # Given an operation holding as many conflicts as the receipt keeps
    for index in range(CONFLICTS_LIMIT):
        store.state.record_conflict("op-1", other_content(at=f"2030-01-01T00:00:{index:02d}.000Z"), FP)
    before = state_item(tables)
    # When one more comes, later
    late = "2030-01-01T00:01:00.000Z"
    assert store.state.record_conflict("op-1", other_content(at=late), FP)
    # Then the record gains the count and a new listing time, and every other attribute is as it was
    after = state_item(tables)
    assert set(after) == set(before) | {"conflicts_dropped"}
    assert after["conflict_sk"] == {"S": f"mail.notice.v1#{late}"}
    for name in set(before) - {"conflict_sk"}:
        assert after[name] == before[name], name


def test_a_conflict_is_listed_at_its_time_whatever_the_rewritten_job_type_holds(store, tables):
    # Given a rewrite whose job type (the producer's own text) contains the listing key's separator
    store.state.record_conflict("op-1", other_content(job_type="mail#notice.v1"), FP)
    # When conflicts are listed
    [row] = store.listings.list_attention(Flag.CONFLICT).operations
    # Then the row says when it was listed: the time after the last separator, not the job type's tail
    assert (row["operation_id"], row["listed_at"]) == ("op-1", CONFLICT_AT)


def test_a_stuck_reason_that_holds_a_colon_is_listed_and_shown_whole(store, tables):
    # Given an operation marked stuck with a reason that itself holds ": "
    seen = store.state.record("op-1")
    reason = "re-dispatch refused: queue: not found"
    assert store.state.mark_stuck(seen, StuckKind.UNRUNNABLE, reason, subject=SUBJECT)
    # When it is listed under STUCK, and shown
    [row] = store.listings.list_attention(Flag.STUCK).operations
    shown = store.require("op-1").to_json()["stuck"]
    # Then the kind is what precedes the first ": ", and the reason is the rest, whole
    assert (row["stuck_kind"], row["stuck_reason"]) == (StuckKind.UNRUNNABLE.value, reason)
    assert shown == {"kind": StuckKind.UNRUNNABLE.value, "reason": reason}


# -- what every move leaves behind: the bounded history, the listing keys, the mark, the stored times ----------


def test_past_the_limit_the_history_keeps_the_acceptance_and_the_latest_changes(store, tables, clock):
    # Given an operation whose attempts keep failing and being retried, each one a start and a give-back
    expected = [f"{ACCEPTED_AT} ACCEPTED accepted"]
    for attempt in range(1, 7):
        clock.advance(1)
        lease = store.state.acquire(SUBJECT, f"m-{attempt}", 30)
        expected.append(f"{iso(clock.now())} IN_PROGRESS started")
        assert store.state.release(lease, f"attempt {attempt} failed; retrying", "TransientError: x") is None
        expected.append(f"{iso(clock.now())} IN_PROGRESS attempt {attempt} failed; retrying")
    # Then the stored history is HISTORY_LIMIT entries: the acceptance, then the latest changes in order
    assert len(expected) > HISTORY_LIMIT
    assert history(state_item(tables)) == [expected[0], *expected[-(HISTORY_LIMIT - 1) :]]
    assert store.require("op-1").created_at == ACCEPTED_AT


def test_a_move_to_a_state_no_one_lists_takes_the_operation_off_its_listing(store, tables, clock):
    # Given a FAILED operation, listed under FAILED
    store.state.settle(
        store.state.acquire(SUBJECT, "m-1", 30), OperationState.FAILED, "gave up", error="PermanentError: x"
    )
    assert {"attention", "attention_sk"} <= set(state_item(tables))
    clock.advance(5)
    # When an operator redrives it without listing it STUCK
    assert store.state.transition(store.require("op-1"), OperationState.ACCEPTED, "redriven")
    # Then neither listing key is left on the record, and nothing lists it
    item = state_item(tables)
    assert item["state"] == {"S": "ACCEPTED"}
    assert not {"attention", "attention_sk"} & set(item)
    assert store.listings.list_attention(OperationState.FAILED).operations == []
    assert store.state.record("op-1").attention is None


def test_any_move_clears_the_stuck_mark(store, tables, clock):
    # Given an operation listed under STUCK, its message in the DLQ
    seen = store.state.record("op-1")
    assert store.state.mark_stuck(seen, StuckKind.DEAD_LETTERED, "its message is in the DLQ", subject=SUBJECT)
    clock.advance(5)
    # When a copy of its message finds the kill switch off, and pauses it
    assert store.state.pause(SUBJECT, "kill switch is off") is None
    # Then it is listed PAUSED, and the mark (with its reason) is gone from the record and the receipt
    item = state_item(tables)
    assert (item["state"], item["attention"]) == ({"S": "PAUSED"}, {"S": "PAUSED"})
    assert "stuck" not in item
    assert store.require("op-1").to_json()["stuck"] is None


def test_a_lease_is_stored_until_a_time_to_the_millisecond(store, tables, clock):
    # Given a clock a fraction of a millisecond past a whole second
    clock.advance(0.0004)
    # When a delivery takes a 30-second lease
    store.state.acquire(SUBJECT, "m-1", 30)
    # Then the record holds its end to the millisecond, as every stored time is
    whole = 1_800_000_030.0
    assert float(state_item(tables)["lease_until"]["N"]) == whole
    assert store.state.record("op-1").lease_until == whole


# -- started work never ends CANCELLED or EXPIRED -------------------------------------------------------------


def test_a_cancel_or_an_expiry_of_started_work_is_refused_by_the_write_itself(store, tables, clock):
    # Given a PAUSED operation that never ran, as a cancel reads it (no attempt: "not started")
    assert store.state.pause(SUBJECT, "kill switch is off") is None
    stale = store.require("op-1")
    assert stale.state is OperationState.PAUSED and not stale.state_record.started
    # And, before the cancel writes, a delivery starts it (a lease: attempts 1) and, once that lease has
    # run out, the next delivery pauses it again: PAUSED, as the cancel read it
    assert isinstance(store.state.acquire(SUBJECT, "holder-1", 5), Lease) and store.state.record("op-1").attempts == 1
    clock.advance(10)
    assert store.state.pause(SUBJECT, "kill switch is off") is None
    # When the cancel's conditional write is made, and a late copy tries to expire it
    cancelled = store.state.transition(stale, OperationState.CANCELLED, "cancelled by cli:alice: withdrawn")
    with pytest.raises(Refused) as expired:
        store.state.expire(SUBJECT, "not started by its expires_at")
    # Then neither applies: the record is still PAUSED with its one attempt, and nothing claims it never ran
    assert cancelled is False
    assert expired.value.current.started
    item = state_item(tables)
    assert (item["state"], item["attempts"]) == ({"S": "PAUSED"}, {"N": "1"})
    assert not any("CANCELLED" in line or "EXPIRED" in line for line in history(item))


def test_an_operators_move_with_items_keeps_the_lease_unless_asked_and_counts_no_redrive(store, tables, clock):
    # Given an operation a delivery holds
    store.state.acquire(SUBJECT, "m-1", 300)
    # When an operator's move with its transaction's items (none here) marks it UNKNOWN
    assert store.state.transition_with(store.require("op-1"), OperationState.UNKNOWN, "cannot tell", ()) is None
    # Then the holder's lease is kept and no redrive is counted
    kept = state_item(tables)
    assert "lease_owner" in kept and "lease_until" in kept and "redrives" not in kept
    # When the next move asks to forget the lease / Then it is dropped
    current = store.require("op-1")
    assert store.state.transition_with(current, OperationState.SUCCEEDED, "applied", (), forget_lease=True) is None
    forgotten = state_item(tables)
    assert "lease_owner" not in forgotten and "redrives" not in forgotten


def test_only_a_move_out_of_a_final_state_records_what_it_was_reopened_from(store, tables, clock):
    # Given an operation a delivery holds, moved by an operator to PAUSED (open to open)
    store.state.acquire(SUBJECT, "m-1", 300)
    assert store.state.transition(store.require("op-1"), OperationState.PAUSED, "its job was switched off")
    # Then nothing is recorded as reopened
    assert "reopened_from" not in state_item(tables)
    # When it is resumed, runs and ends FAILED, and an operator reopens it (FAILED to ACCEPTED, a retry)
    assert store.state.transition(store.require("op-1"), OperationState.ACCEPTED, "its job is on again")
    assert "reopened_from" not in state_item(tables)
    clock.advance(600)
    store.state.acquire(SUBJECT, "m-2", 300)
    assert store.state.transition(store.require("op-1"), OperationState.FAILED, "given up")
    assert store.state.transition(store.require("op-1"), OperationState.ACCEPTED, "retry: the address is fixed")
    # Then the record says what it was reopened from (what a batch counted it as, until it settles again), and reads
    # back so
    assert state_item(tables)["reopened_from"] == {"S": "FAILED"}
    assert store.state.record("op-1").reopened_from is OperationState.FAILED
    # And a value no state has (a hand edit) reads back as none, not as an error
    boto3.client("dynamodb").update_item(
        TableName=tables["state"],
        Key={"operation_id": {"S": "op-1"}},
        UpdateExpression="SET reopened_from = :v",
        ExpressionAttributeValues={":v": {"S": "HALF-DONE"}},
    )
    assert store.state.record("op-1").reopened_from is None


# -- a settle with items beside it, in one transaction ----------------------------------------------------------


def extra_put(tables, operation_id: str, what: str, with_item: bool = True) -> TransactItem:
    """A Put of a request that must be new (as a continuation's is), asking for the item that refuses it."""
    request = {
        "TableName": tables["jobs"],
        "Item": request_item(JobRequest(operation_id, "mail.notice.v1", PAYLOAD)),
        "ConditionExpression": "attribute_not_exists(operation_id)",
        **({"ReturnValuesOnConditionCheckFailure": "ALL_OLD"} if with_item else {}),
    }
    return TransactItem("Put", request, what=what)


def test_a_settle_refused_in_its_transaction_answers_with_the_record_it_met_and_reads_nothing(store, tables, clock):
    from .conftest import sent

    # Given a lease taken over by another delivery (it is no longer this one's)
    lease = store.state.acquire(Subject("op-1", "mail.notice.v1", FP, ACCEPTED_AT), "m-1", 30)
    clock.advance(60)
    store.state.acquire(Subject("op-1", "mail.notice.v1", FP, ACCEPTED_AT), "m-2", 30)
    calls = sent(store.state._client)
    # When the first delivery settles with an item beside it
    with pytest.raises(Refused) as refused:
        store.state.settle(lease, OperationState.SUCCEEDED, "done", extras=[extra_put(tables, "op-1:next", "next")])
    # Then the settle itself is refused (not the item), with the record as the transaction met it: no read after
    assert refused.value.current.lease_owner == "m-2"
    assert [name for name, _ in calls] == ["TransactWriteItems"]


def test_the_item_that_refused_a_settles_transaction_is_named_with_what_it_met(store, tables):
    # Given a lease, and two items to write beside its settle, the first of which exists already
    lease = store.state.acquire(Subject("op-1", "mail.notice.v1", FP, ACCEPTED_AT), "m-1", 30)
    boto3.client("dynamodb").put_item(
        TableName=tables["jobs"], Item=request_item(JobRequest("op-1:next", "mail.notice.v1", PAYLOAD))
    )
    extras = [extra_put(tables, "op-1:next", "continuation op-1:next"), extra_put(tables, "op-1:other", "the other")]
    # When it settles / Then the first item is named as refused, with the item it met; nothing is written
    with pytest.raises(ExtraRefused) as raised:
        store.state.settle(lease, OperationState.SUCCEEDED, "done", extras=extras)
    refused = raised.value
    assert (refused.index, refused.what, refused.unmet) == (0, "continuation op-1:next", "exists already")
    assert refused.current is not None and refused.current["operation_id"] == {"S": "op-1:next"}
    assert store.state.record("op-1").state is OperationState.IN_PROGRESS
    # And an item that did not ask for what it met (the second, here) is named without it
    lease = store.state.acquire(Subject("op-2", "mail.notice.v1", FP, ACCEPTED_AT), "m-1", 30)
    plain = [extra_put(tables, "op-2:new", "new"), extra_put(tables, "op-1:next", "next", with_item=False)]
    with pytest.raises(ExtraRefused) as raised:
        store.state.settle(lease, OperationState.SUCCEEDED, "done", extras=plain)
    assert (raised.value.index, raised.value.what, raised.value.current) == (1, "next", None)


def test_an_item_refused_beside_a_settle_says_what_its_own_condition_failing_means(store, tables):
    # Given a lease, and an extension's item beside its settle that says what its condition failing means, whose
    # condition fails (its note exists already)
    lease = store.state.acquire(Subject("op-1", "mail.notice.v1", FP, ACCEPTED_AT), "m-1", 30)
    boto3.client("dynamodb").put_item(
        TableName=tables["jobs"], Item=request_item(JobRequest("op-1:note", "mail.notice.v1", PAYLOAD))
    )
    note = TransactItem(
        "Put",
        {
            "TableName": tables["jobs"],
            "Item": request_item(JobRequest("op-1:note", "mail.notice.v1", PAYLOAD)),
            "ConditionExpression": "attribute_not_exists(operation_id)",
        },
        what="note op-1",
        unmet="was noted before",
    )
    # When it settles / Then the refusal names the item with its own words, not a continuation's "exists already"
    with pytest.raises(ExtraRefused) as raised:
        store.state.settle(lease, OperationState.SUCCEEDED, "done", extras=[note])
    assert (raised.value.index, raised.value.unmet) == (0, "was noted before")
    assert raised.value.said == str(raised.value) == "note op-1 was noted before"


class EmptyItemOnRefusal(ClientProxy):
    """The DynamoDB client, but a cancelled transaction names the refused item with an empty Item (what a service
    answers for an item that asked for nothing, or met no item)."""

    def transact_write_items(self, **params):
        try:
            return self._client.transact_write_items(**params)
        except ClientError as exc:
            for reason in exc.response.get("CancellationReasons", []):
                if reason.get("Code") == "ConditionalCheckFailed" and "Item" not in reason:
                    reason["Item"] = {}
            raise


def test_an_empty_item_in_a_refusal_is_no_item(store, tables):
    # Given a settle whose second item exists already and did not ask for what it met
    lease = store.state.acquire(Subject("op-3", "mail.notice.v1", FP, ACCEPTED_AT), "m-1", 30)
    boto3.client("dynamodb").put_item(
        TableName=tables["jobs"], Item=request_item(JobRequest("op-3:old", "mail.notice.v1", PAYLOAD))
    )
    store.state._client = EmptyItemOnRefusal(store.state._client)
    extras = [extra_put(tables, "op-3:new", "new"), extra_put(tables, "op-3:old", "old", with_item=False)]
    # When the service names it with an empty Item / Then it is named without an item, as with none
    with pytest.raises(ExtraRefused) as raised:
        store.state.settle(lease, OperationState.SUCCEEDED, "done", extras=extras)
    assert (raised.value.index, raised.value.what, raised.value.current) == (1, "old", None)


def test_a_pause_before_the_operations_recorded_time_is_refused_and_applies_once_it_is_due(store, tables, clock):
    # Given an operation SCHEDULED for an hour from now
    run_at = clock.now() + 3600
    store.state.schedule(SUBJECT, run_at, "waiting for its run_at")
    # When an early copy of its message finds its job switched off / Then the pause is refused: it stays SCHEDULED
    with pytest.raises(Refused) as early:
        store.state.pause(SUBJECT, "kill switch is off")
    assert early.value.current.state is OperationState.SCHEDULED
    assert state_item(tables)["state"] == {"S": "SCHEDULED"}
    # When its time has come / Then it pauses
    clock.advance(3600)
    store.state.pause(SUBJECT, "kill switch is off")
    assert state_item(tables)["state"] == {"S": "PAUSED"}


# -- a first content read late (a replayed INSERT) ---------------------------------------------------------------

FIRST = JobRequest("op-1", "mail.notice.v1", {"user_id": "00000000-0000-4000-8000-000000000002"})
LATER = ConflictEntry("2030-01-01T00:00:09.000Z", FP, "mail.notice.v1", "jobs table: a later write, read first")


def test_a_replayed_first_content_replaces_a_later_writes_pin_and_lists_it(store, tables):
    # Given an operation a rewrite pinned (its old image taken for the first content), nothing started
    store.state.record_conflict("op-1", other_content(), FP, original=JobRequest("op-1", "mail.notice.v1", PAYLOAD))
    # When the first content, read late, is restored
    assert store.state.restore_first_content("op-1", FIRST.fingerprint, FIRST, LATER) is True
    # Then the operation holds the first content, the original request to dispatch is it, and the later write's
    # content is listed as a conflict after the one already there
    item = state_item(tables)
    assert item["fingerprint"] == {"S": FIRST.fingerprint}
    kept = dict(request_item(FIRST))
    del kept["operation_id"]
    assert item["original"] == {"M": kept}
    assert item["conflicts"] == {"L": [entry_value(other_content()), entry_value(LATER)]}
    assert (item["conflict"], item["conflict_sk"]) == ({"S": "CONFLICT"}, {"S": f"mail.notice.v1#{LATER.at}"})
    assert item["state"] == {"S": "ACCEPTED"}


def test_a_restored_first_content_lists_the_operation_under_conflict_when_nothing_listed_it(store, tables, clock):
    # Given an operation pinned to a content by a write that lists no conflict (SCHEDULED by its relay), not started
    store.state.schedule(SUBJECT, clock.now() + 3600, "waiting for its run_at")
    assert state_item(tables)["fingerprint"] == {"S": FP} and "conflict" not in state_item(tables)
    # When the first content, read late, is restored
    assert store.state.restore_first_content("op-1", FIRST.fingerprint, FIRST, LATER) is True
    # Then the operation is listed under CONFLICT, by the pinned content's job type and time
    item = state_item(tables)
    assert (item["conflict"], item["conflict_sk"]) == ({"S": "CONFLICT"}, {"S": f"mail.notice.v1#{LATER.at}"})
    assert item["conflicts"] == {"L": [entry_value(LATER)]}


def test_a_first_content_that_cannot_run_leaves_no_original_to_dispatch(store, tables):
    store.state.record_conflict("op-1", other_content(), FP, original=JobRequest("op-1", "mail.notice.v1", PAYLOAD))
    assert store.state.restore_first_content("op-1", "unusable-fp", None, LATER) is True
    item = state_item(tables)
    assert item["fingerprint"] == {"S": "unusable-fp"} and "original" not in item


@pytest.mark.parametrize("case", ["started", "already first", "no record", "no fingerprint"])
def test_a_first_content_is_not_restored_once_anything_could_have_run(store, tables, case):
    # Given an operation that started, one already pinned to the first content, none at all, or one without a pin
    if case == "started":
        store.state.acquire(Subject("op-1", "mail.notice.v1", FP, ACCEPTED_AT), "m-1", 30)
    elif case == "already first":
        store.state.record_conflict("op-1", other_content(), FIRST.fingerprint)
    elif case == "no fingerprint":
        boto3.client("dynamodb").put_item(
            TableName=tables["state"], Item={"operation_id": {"S": "op-1"}, "state": {"S": "CANCELLED"}}
        )
    before = state_item(tables)
    # When a first content is restored
    # Then nothing is written
    assert store.state.restore_first_content("op-1", FIRST.fingerprint, FIRST, LATER) is False
    assert state_item(tables) == before


def test_a_hold_refused_for_a_live_lease_is_refused_whatever_the_historys_length(store, tables, clock):
    # Given an operation held past its history's limit, then started by a delivery whose lease is live
    subject = Subject("op-1", "mail.notice.v1", FP, ACCEPTED_AT)
    store.admit(JobRequest("op-1", "mail.notice.v1", PAYLOAD))
    for _ in range(HISTORY_LIMIT + 2):
        store.state.hold(subject, clock.now(), "held by a cap")
        clock.advance(1)
    store.state.acquire(subject, "m-1", 30)
    before = state_item(tables)
    assert len(history(before)) > HISTORY_LIMIT  # its length alone would have let a hold replace its last entry
    # When a copy of its message is held meanwhile
    with pytest.raises(Refused) as refused:
        store.state.hold(subject, clock.now() + 60, "held by a cap")
    # Then the refusal carries the started record, and nothing was written: neither the hold nor its history entry
    assert refused.value.current.state is OperationState.IN_PROGRESS
    assert state_item(tables) == before
