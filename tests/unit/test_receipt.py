"""The receipt read from its two records: what an operator is shown when the request is odd, gone or rewritten.

Pure: the low-level items are built here, as DynamoDB would return them; no AWS call is made.
"""

from __future__ import annotations

import pytest

from converge.model.clock import iso
from converge.model.request import JobRequest
from converge.model.states import OperationState
from converge.store.codecs import operation_from_records, request_item

RUN_AT = "2031-01-01T00:00:00.000Z"
EXPIRES_AT = "2031-01-02T00:00:00.000Z"


def request(payload: dict | None = None, **times: str) -> JobRequest:
    return JobRequest("op-1", "mail.notice.v1", payload or {"user_id": "u-1"}, **times)


def state(**attributes: dict) -> dict:
    return {"operation_id": {"S": "op-1"}, "state": {"S": "ACCEPTED"}, **attributes}


def test_an_unreadable_request_still_names_its_job_type_and_says_what_is_wrong() -> None:
    # Given a request item whose payload is not a map, and no state record yet
    item = {"operation_id": {"S": "op-1"}, "job_type": {"S": "mail.notice.v1"}, "payload": {"N": "7"}}
    # When the receipt is read
    operation = operation_from_records("op-1", item, None)
    # Then it shows the raw job type, no payload, and the problem where the request would be
    view = operation.to_json()
    assert (operation.job_type, view["job_type"], view["payload"]) == ("mail.notice.v1", "mail.notice.v1", {})
    assert operation.request is None
    assert operation.request_problem == "payload must be a map (M) of primitive values, not number"
    assert view["request"] == operation.request_problem
    assert view["state"] == "ACCEPTED"


def test_a_job_type_that_is_not_a_string_is_shown_as_empty() -> None:
    item = {"operation_id": {"S": "op-1"}, "job_type": {"N": "3"}, "payload": {"M": {}}}
    operation = operation_from_records("op-1", item, None)
    assert operation.job_type == ""


def test_a_missing_request_says_so() -> None:
    operation = operation_from_records("op-1", None, state(job_type={"S": "mail.notice.v1"}))
    assert operation.to_json()["request"] == "the request is not in the jobs table"
    assert operation.job_type == "mail.notice.v1"


def test_the_requests_times_are_shown_while_the_state_holds_none() -> None:
    # Given a request with both times, whose state record holds no run_at yet
    operation = operation_from_records(
        "op-1",
        request_item(request(run_at=RUN_AT, expires_at=EXPIRES_AT)),
        state(fingerprint={"S": request().fingerprint}),
    )
    # Then the receipt shows them as written
    view = operation.to_json()
    assert (view["run_at"], view["expires_at"]) == (RUN_AT, EXPIRES_AT)


def test_the_recorded_run_at_wins_over_the_requests() -> None:
    recorded = 1_924_992_000.0  # 2031-01-01T00:00:00Z
    operation = operation_from_records(
        "op-1",
        request_item(request(run_at="2031-06-01T00:00:00.000Z")),
        state(state={"S": "SCHEDULED"}, run_at={"N": str(recorded)}),
    )
    assert operation.to_json()["run_at"] == iso(recorded)
    assert operation.state is OperationState.SCHEDULED


def test_a_rewritten_request_shows_no_times_or_caller_it_was_not_admitted_with() -> None:
    # Given a state admitted with one content, and a jobs table that now holds other content (no original kept),
    # with times and a caller of its own
    admitted = request({"user_id": "u-1"})
    rewritten = JobRequest(
        "op-1", "mail.notice.v1", {"user_id": "u-2"}, submitted_by="arn:aws:iam::1:role/other",
        run_at=RUN_AT, expires_at=EXPIRES_AT,
    )  # fmt: skip
    operation = operation_from_records("op-1", request_item(rewritten), state(fingerprint={"S": admitted.fingerprint}))
    # Then nothing is runnable; the receipt says the stored request is not what was admitted, and shows
    # none of its options: neither its times nor a caller the operation would answer to
    assert operation.runnable() is None
    view = operation.to_json()
    assert view["request"] == "the jobs table holds other content than was admitted"
    assert (view["run_at"], view["expires_at"], view["submitted_by"]) == (None, None, None)
    assert operation.submitted_by is None


def test_a_kept_original_is_what_the_receipt_shows_and_runs() -> None:
    # Given a conflict that kept the original request (with its expiry) and a rewritten jobs table
    original = request({"user_id": "u-1"}, expires_at=EXPIRES_AT)
    kept = {name: value for name, value in request_item(original).items() if name != "operation_id"}
    rewritten = request({"user_id": "u-2"})
    operation = operation_from_records(
        "op-1", request_item(rewritten), state(fingerprint={"S": original.fingerprint}, original={"M": kept})
    )
    # Then the original is the runnable request and the one shown
    assert operation.runnable() == original
    view = operation.to_json()
    assert view["payload"] == {"user_id": "u-1"}
    assert view["expires_at"] == EXPIRES_AT
    assert view["request"] == "original kept after a conflict"


def test_a_state_the_receipt_does_not_know_is_refused_naming_the_operation_and_the_value() -> None:
    # Given a state record holding a state converge never writes
    odd = state(state={"S": "HALF_DONE"})
    # When the receipt is read / Then it is refused, never guessed, and the error says which record and value
    with pytest.raises(ValueError) as error:
        operation_from_records("op-1", request_item(request()), odd)
    assert "op-1" in str(error.value) and "'HALF_DONE'" in str(error.value)


def test_entries_of_another_type_in_a_stored_list_are_skipped_and_the_rest_shown() -> None:
    # Given a state record whose history and errors lists each hold one entry of another type
    line = "2030-01-01T00:00:00.000Z ACCEPTED accepted"
    error = {"M": {"at": {"S": "2030-01-01T00:00:01.000Z"}, "attempt": {"N": "1"}, "error": {"S": "TransientError: x"}}}
    odd = state(history={"L": [{"S": line}, {"N": "7"}]}, errors={"L": [{"S": "stray"}, error]})
    # When the receipt is read
    view = operation_from_records("op-1", request_item(request()), odd).to_json()
    # Then those entries are left out, and the readable ones shown
    assert view["history"] == [{"state": "ACCEPTED", "at": "2030-01-01T00:00:00.000Z", "reason": "accepted"}]
    assert view["errors"] == [{"at": "2030-01-01T00:00:01.000Z", "attempt": 1, "error": "TransientError: x"}]


def test_a_stuck_mark_is_split_at_its_first_separator() -> None:
    # Given a STUCK mark whose reason itself holds ": "
    marked = state(stuck={"S": "unrunnable: cannot resume: request gone"})
    # When the receipt is read / Then the kind is the word before the first ": ", the reason all the rest
    view = operation_from_records("op-1", request_item(request()), marked).to_json()
    assert view["stuck"] == {"kind": "unrunnable", "reason": "cannot resume: request gone"}


def test_with_no_job_type_recorded_the_kept_originals_is_shown_not_the_rewritten_requests() -> None:
    # Given a kept original of one job type, a jobs table rewritten with another, and a state naming none
    original = request({"user_id": "u-1"})
    kept = {name: value for name, value in request_item(original).items() if name != "operation_id"}
    rewritten = JobRequest("op-1", "files.copy.v1", {"user_id": "u-2"})
    operation = operation_from_records(
        "op-1", request_item(rewritten), state(fingerprint={"S": original.fingerprint}, original={"M": kept})
    )
    # Then the receipt names the job type of the request that runs: the original's
    assert operation.runnable() == original
    assert operation.job_type == operation.to_json()["job_type"] == "mail.notice.v1"


def error_entry(attempt: int, text: str) -> dict:
    return {
        "M": {"at": {"S": f"2030-01-01T00:00:0{attempt}.000Z"}, "attempt": {"N": str(attempt)}, "error": {"S": text}}
    }


@pytest.mark.parametrize(
    ("current", "stored", "earlier"),
    [
        # FAILED: the last entry is the current outcome's error (written with it), so it is not an earlier one
        ("KeyError: 'x'", ["TransientError: a", "KeyError: 'x'"], ["TransientError: a"]),
        # the same text twice: the earlier attempt's stays, the current one is shown once
        ("boom", ["boom", "boom"], ["boom"]),
        # a first failure has no earlier error
        ("boom", ["boom"], []),
        # settled without an error (a success after a retry): every stored error is an earlier one
        (None, ["TransientError: a", "TransientError: b"], ["TransientError: a", "TransientError: b"]),
    ],
)
def test_the_receipt_shows_the_current_error_once_and_earlier_errors_apart(
    current: str | None, stored: list[str], earlier: list[str]
) -> None:
    # Given a state record as the store writes it: a write that sets last_error appends its entry to errors
    record = state(
        state={"S": "FAILED" if current else "SUCCEEDED"},
        errors={"L": [error_entry(n, text) for n, text in enumerate(stored, start=1)]},
        **({"last_error": {"S": current}} if current else {}),
    )
    # When the receipt is read
    view = operation_from_records("op-1", request_item(request()), record).to_json()
    # Then last_error is the current one, and errors only those before it, by attempt
    assert view["last_error"] == current
    assert [entry["error"] for entry in view["errors"]] == earlier
    assert [entry["attempt"] for entry in view["errors"]] == list(range(1, len(earlier) + 1))
