"""The explorer's rules for signals, played by hand: a step that waits for one (tests/explore/catalogue.py's
approval job: wait for `approval`, then record what resumed it), the sender's rule, and the invariant that each wait
is resumed once, as its signal item records, and that no signal is lost (and that it catches a break).
"""

from __future__ import annotations

from typing import Any

import pytest

from converge.flow.signals import default_signal_id
from converge.flow.wakes import Wakes
from converge.model.records import StateRecord
from converge.model.states import OperationState
from converge.store.signals import SignalStore
from converge.store.state import StateTable

from . import promise
from .catalogue import APPROVALS
from .machine import Explorer
from .test_steps_histories import states

_S = OperationState


def test_a_signal_during_the_wait_resumes_it_once_and_a_later_one_is_refused_or_ended(explorer: type[Explorer]) -> None:
    # Given an approval waiting for its signal
    state = explorer()
    operation = state.producer_enqueues(job="approval", timing="now")
    state.visible_work_drains()
    state.promise_kept()
    assert states(state)[operation] is _S.SCHEDULED
    # When it is signalled, twice with the same id, then with another
    state.sender_signals(operation=operation, signal_id="sig-a")
    state.sender_signals(operation=operation, signal_id="sig-a")
    state.signals_kept()
    state.everything_drains()
    state.sender_signals(operation=operation, signal_id="sig-b")
    state.signals_kept()
    state.promise_kept()
    state.teardown()
    # Then it was resumed once, by the first signal, and each send was answered so
    assert states(state)[operation] is _S.SUCCEEDED
    assert APPROVALS.decided == [(operation, "signal:sig-a")]
    assert [sent.answer for sent in state.signals_sent] == ["accepted", "duplicate", "ended"]


def test_a_signal_before_the_wait_is_kept_and_one_after_the_timeout_is_refused(explorer: type[Explorer]) -> None:
    # Given an approval signalled before it starts, and another whose timeout comes first
    state = explorer()
    early = state.producer_enqueues(job="approval", timing="now")
    late = state.producer_enqueues(job="approval-long", timing="now")
    state.sender_signals(operation=early, signal_id="sig-b")
    state.everything_drains()
    state.clock_advances(seconds=3 * 86400)
    state.due_schedules_fire()
    state.visible_work_drains()
    state.signals_kept()
    state.teardown()
    # Then the early one passed its wait with its signal, the late one timed out, each once
    assert sorted(APPROVALS.decided) == sorted([(early, "signal:sig-b"), (late, "timeout")])
    assert (states(state)[early], states(state)[late]) == (_S.SUCCEEDED, _S.SUCCEEDED)


def test_the_invariant_catches_a_refused_signal_that_is_not_listed(
    explorer: type[Explorer], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a break: a refused signal is dropped instead of listed on its wait
    monkeypatch.setattr(SignalStore, "refuse", lambda *args, **kwargs: None)
    state = explorer()
    operation = state.producer_enqueues(job="approval", timing="now")
    state.sender_signals(operation=operation, signal_id="sig-a")
    state.sender_signals(operation=operation, signal_id="sig-b")
    # Then the invariant names it
    with pytest.raises(promise.SignalLost, match="sig-b refused but not listed"):
        state.signals_kept()


def test_a_signal_over_http_from_the_caller_or_an_operator_is_kept_once(explorer: type[Explorer]) -> None:
    # Given an approval its caller posted to the API, and one enqueued by other means, both waiting
    state = explorer()
    posted = state.caller_posts_to_api(job="approval", timing="now")
    other = state.producer_enqueues(job="approval", timing="now")
    state.visible_work_drains()
    # When the caller signals its own on its route (and the other, which is not its own), and an operator the other
    state.caller_signals_through_api(operation=posted, signal_id="sig-a")
    state.caller_signals_through_api(operation=other, signal_id="sig-a")
    state.operator_signals_through_api(operation=other, signal_id="sig-b")
    state.operator_signals_through_api(operation=posted, signal_id="sig-b")
    state.signals_kept()
    state.everything_drains()
    state.signals_kept()
    state.promise_kept()
    state.teardown()
    # Then each resumed once with its first signal, and each send was answered as converge.signal answers
    assert sorted(APPROVALS.decided) == sorted([(posted, "signal:sig-a"), (other, "signal:sig-b")])
    assert [sent.answer for sent in state.signals_sent] == ["accepted", "not_found", "accepted", "refused"]


def test_a_decision_in_the_console_resumes_the_wait_and_a_later_one_is_answered(explorer: type[Explorer]) -> None:
    # Given an approval waiting for its signal
    state = explorer()
    operation = state.producer_enqueues(job="approval", timing="now")
    state.visible_work_drains()
    # When a person approves it in the console, then another rejects it
    state.console_decides(operation=operation, decision="approved")
    state.console_decides(operation=operation, decision="rejected")
    state.signals_kept()
    state.everything_drains()
    state.signals_kept()
    state.promise_kept()
    state.teardown()
    # Then it resumed once, with the approval; the rejection was refused and listed
    approved = default_signal_id("approval", {"decision": "approved"})
    assert APPROVALS.decided == [(operation, f"signal:{approved}")]
    assert [sent.answer for sent in state.signals_sent] == ["accepted", "refused"]


def test_a_signal_item_alone_or_in_a_transaction_resumes_the_wait_once_and_a_rewrite_is_a_duplicate(
    explorer: type[Explorer],
) -> None:
    # Given two approvals waiting for their signal
    state = explorer()
    alone = state.producer_enqueues(job="approval", timing="now")
    together = state.producer_enqueues(job="approval", timing="now")
    state.visible_work_drains()
    # When a producer signals one by an item, and the other in a transaction with its own write; then rewrites the
    # first with another decision, and forges a third item as a request
    state.producer_signals_by_item(operation=alone, signal_id="sig-a", decision="approved", how="alone")
    state.producer_signals_by_item(operation=together, signal_id="sig-b", decision="rejected", how="with its own write")
    state.visible_work_drains()
    state.producer_signals_by_item(operation=alone, signal_id="sig-a", decision="rejected", how="alone")
    state.producer_signals_by_item(operation=alone, signal_id="sig-b", decision="approved", how="forged as a request")
    state.signals_kept()
    state.everything_drains()
    state.signals_kept()
    state.promise_kept()
    state.teardown()
    # Then each resumed once, with its first payload; each item's answer is on its record
    assert sorted(APPROVALS.decided) == sorted([(alone, "signal:sig-a"), (together, "signal:sig-b")])
    kept = state.converge.operations.signals.get(alone, "approval")
    assert dict(kept.payload) == {"decision": "approved"} and kept.sent_by == "jobs-table"
    answers = promise.signal_items_answered(state.cloud, state.signal_items, settled=True)
    assert [(sent.operation_id, sent.answer) for sent in answers] == [(alone, "accepted"), (together, "accepted")]
    forged = state.converge.operations.require(f"{alone}::signal:approval:sig-b")
    assert forged.state is _S.REJECTED and forged.last_error.startswith("invalid: a signal item holds")


def test_a_signal_item_in_a_batch_the_relay_gave_up_is_delivered_once_by_the_replay(explorer: type[Explorer]) -> None:
    # Given an approval waiting for its signal, and its signal item written while the relay fails every batch
    state = explorer()
    operation = state.producer_enqueues(job="approval-long", timing="now")
    state.visible_work_drains()
    state.producer_signals_by_item(operation=operation, signal_id="sig-a", decision="approved", how="alone")
    state.relay_batch_fails()
    state.signals_kept()
    assert APPROVALS.decided == []
    # When the reconciler replays the batch given up, twice
    state.reconciler_runs()
    state.reconciler_runs()
    state.everything_drains()
    state.signals_kept()
    state.promise_kept()
    state.teardown()
    # Then the wait resumed once, by the signal, before its timeout
    assert APPROVALS.decided == [(operation, "signal:sig-a")]
    record = state.converge.operations.require(f"{operation}::signal:approval:sig-a")
    assert record.state is _S.SUCCEEDED and record.history[-1].reason.startswith("accepted:")


def test_the_invariant_catches_a_signal_item_answered_but_not_listed(
    explorer: type[Explorer], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a break: a signal item's answer is written, and then its listing dropped
    answer = StateTable.answer_signal_item

    def unlisted(self: StateTable, item_id: str, *args: Any) -> bool:
        answered = answer(self, item_id, *args)
        self._client.update_item(
            TableName=self._table,
            Key={"operation_id": {"S": item_id}},
            UpdateExpression="REMOVE attention, attention_sk",
        )
        return answered

    monkeypatch.setattr(StateTable, "answer_signal_item", unlisted)
    state = explorer()
    operation = state.producer_enqueues(job="approval", timing="now")
    # When an item signals an operation that does not exist (not_found: REJECTED)
    state.producer_signals_by_item(operation=f"{operation}-x", signal_id="sig-a", decision="approved", how="alone")
    state.visible_work_drains()
    # Then the invariant names it
    with pytest.raises(promise.SignalItemMisanswered, match="REJECTED but not listed"):
        state.signals_kept()


def test_a_signal_item_rewritten_as_a_forged_request_keeps_its_first_answer(explorer: type[Explorer]) -> None:
    # Found by the explorer (its invariant, not converge, was wrong: SignalItemMisanswered): an item written in a
    # transaction, then rewritten under the same key with a request's job type
    state = explorer()
    operation = state.producer_enqueues(job="approval", timing="now")
    state.producer_signals_by_item(
        operation=operation, signal_id="sig-b", decision="approved", how="with its own write"
    )
    state.everything_drains()
    state.producer_signals_by_item(
        operation=operation, signal_id="sig-b", decision="approved", how="forged as a request"
    )
    state.everything_drains()
    state.signals_kept()
    state.promise_kept()
    state.teardown()
    # Then the first answer stands (accepted, the wait resumed by it), and the forged rewrite is appended, invalid
    assert APPROVALS.decided == [(operation, "signal:sig-b")]
    record = state.converge.operations.require(f"{operation}::signal:approval:sig-b")
    assert record.state is _S.SUCCEEDED and record.history[-1].reason.startswith("accepted:")
    assert [error.error.split(":")[:2] for error in record.state_record.errors] == [["rewritten", " invalid"]]


def test_a_refused_signal_items_rewrite_is_shown_after_its_first_answer(explorer: type[Explorer]) -> None:
    # Given an approval resumed by one signal item, and another item with another id for it, refused
    state = explorer()
    operation = state.producer_enqueues(job="approval", timing="now")
    state.visible_work_drains()
    state.producer_signals_by_item(operation=operation, signal_id="sig-a", decision="approved", how="alone")
    state.producer_signals_by_item(operation=operation, signal_id="sig-b", decision="rejected", how="alone")
    state.visible_work_drains()
    # When the producer rewrites the refused item with another decision
    state.producer_signals_by_item(operation=operation, signal_id="sig-b", decision="approved", how="alone")
    state.everything_drains()
    state.signals_kept()
    state.promise_kept()
    state.teardown()
    # Then its record's view shows its first answer as its error, and the rewrite's answer after it, once each
    view = state.converge.operations.require(f"{operation}::signal:approval:sig-b").to_json()
    assert view["state"] == "REJECTED" and view["last_error"].startswith("refused: ")
    assert [entry["error"][:25] for entry in view["errors"]] == ["rewritten: ended: the ope"]  # it resumed since


def test_the_invariant_catches_a_signal_items_rewrite_hidden_from_its_view(
    explorer: type[Explorer], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a break: the view takes the last stored error for the current one, whatever it says
    last_taken = property(lambda record: record.errors[:-1] if record.last_error else record.errors)
    monkeypatch.setattr(StateRecord, "earlier_errors", last_taken)
    state = explorer()
    operation = state.producer_enqueues(job="approval", timing="now")
    state.visible_work_drains()
    state.sender_signals(operation=operation, signal_id="sig-a")
    # When an item with another id is written, then corrected with the other decision before the relay reads it
    state.producer_signals_by_item(
        operation=operation, signal_id="sig-b", decision="rejected", how="with its own write", corrected=True
    )
    state.visible_work_drains()
    # Then the invariant names it
    with pytest.raises(promise.ReceiptInconsistent, match="sig-b: its answers"):
        state.signals_kept()


def test_a_signal_sent_while_sqs_refuses_is_kept_not_answered_woke_and_resumes_later(
    explorer: type[Explorer],
) -> None:
    # Given an approval waiting for its signal
    state = explorer()
    operation = state.producer_enqueues(job="approval-long", timing="now")
    state.visible_work_drains()
    # When it is signalled while SQS refuses every message
    state.sender_signals_while_sqs_refuses(operation=operation, signal_id="sig-a")
    state.signals_kept()
    state.promise_kept()
    # Then it is listed under STUCK, its wake unsent; and once SQS is back the reconciler sends it, and it resumes
    assert state.converge.operations.require(operation).state_record.stuck_kind == "undispatched"
    state.everything_drains()
    state.signals_kept()
    state.promise_kept()
    state.teardown()
    assert APPROVALS.decided == [(operation, "signal:sig-a")]
    assert [(sent.answer, sent.signal_id) for sent in state.signals_sent] == [("accepted", "sig-a")]


def test_the_invariant_catches_a_signal_answered_woke_whose_wake_was_not_sent(
    explorer: type[Explorer], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a break: the wake's send is not asked whether it went out
    send_now = Wakes.send_now
    monkeypatch.setattr(Wakes, "send_now", lambda self, *args: send_now(self, *args) or True)
    state = explorer()
    operation = state.producer_enqueues(job="approval", timing="now")
    state.visible_work_drains()
    # When it is signalled while SQS refuses every message / Then the invariant names it
    with pytest.raises(promise.SignalWokeUnsent, match="sig-a answered woke"):
        state.sender_signals_while_sqs_refuses(operation=operation, signal_id="sig-a")
