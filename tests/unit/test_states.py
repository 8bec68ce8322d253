"""The transition table: one module owns the moves, the store enforces them, and the whole table is walked."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import boto3
import pytest

from converge.model import states
from converge.model.clock import FakeClock
from converge.model.errors import InvalidTransition
from converge.model.records import HistoryEntry, Operation
from converge.model.states import ATTENTION_STATES, FINAL_STATES, OPEN_STATES, TRANSITIONS, OperationState
from converge.store.clauses import blind_sources, may_move
from converge.store.codecs import entry_value
from converge.store.operations import OperationStore
from converge.store.updates import Update

ROOT = Path(__file__).resolve().parents[2]
ALL_PAIRS = list(itertools.product(OperationState, OperationState))


@pytest.fixture
def store(tables):
    return OperationStore(tables["jobs"], tables["state"], boto3.client("dynamodb"), clock=FakeClock())


def stored_in(store: OperationStore, tables: dict, operation_id: str, state: OperationState) -> Operation:
    """An operation whose request and state record exist, its record in `state` (written as converge would)."""
    client = boto3.client("dynamodb")
    client.put_item(
        TableName=tables["jobs"],
        Item={"operation_id": {"S": operation_id}, "job_type": {"S": "mail.notice.v1"}, "payload": {"M": {}}},
    )
    entry = HistoryEntry(state.value, "2030-01-01T00:00:00.000Z", "set up")
    client.put_item(
        TableName=tables["state"],
        Item={"operation_id": {"S": operation_id}, "state": {"S": state.value}, "history": {"L": [entry_value(entry)]}},
    )
    return store.require(operation_id)


def test_every_state_has_a_row_and_every_state_is_final_or_open():
    assert set(TRANSITIONS) == set(OperationState)
    assert set(OperationState) == FINAL_STATES | OPEN_STATES
    assert not FINAL_STATES & OPEN_STATES
    assert set(OperationState) >= ATTENTION_STATES


def test_every_state_is_reachable_and_every_open_state_can_end():
    reachable, frontier = {OperationState.ACCEPTED}, [OperationState.ACCEPTED]
    while frontier:
        for target in TRANSITIONS[frontier.pop()]:
            if target not in reachable:
                reachable.add(target)
                frontier.append(target)
    assert reachable == set(OperationState)
    for state in OPEN_STATES:
        seen, frontier = {state}, [state]
        while frontier:
            for target in TRANSITIONS[frontier.pop()] - seen:
                seen.add(target)
                frontier.append(target)
        assert seen & FINAL_STATES, f"{state} can never end"


def test_a_settled_success_or_refusal_never_moves_again():
    for state in (OperationState.SUCCEEDED, OperationState.NOOP, OperationState.REJECTED):
        assert TRANSITIONS[state] == frozenset()


def test_the_store_makes_exactly_the_moves_the_table_lists(store, tables):
    # Walk the whole table: every (source, target) pair of states, listed or not.
    for source, target in ALL_PAIRS:
        # Given an operation in `source`
        operation = stored_in(store, tables, f"op-{source}-{target}".lower(), source)
        # When an operator-style move to `target` is asked for
        if target in TRANSITIONS[source]:
            # Then a listed move is made, conditional on the state it was read in, and recorded in the history
            assert store.state.transition(operation, target, "walking the table"), (source, target)
            after = store.require(operation.operation_id)
            assert (after.state, after.history[-1].state) == (target, target.value), (source, target)
            assert states.allowed(source, target)
        else:
            # Then an unlisted one raises InvalidTransition and writes nothing
            with pytest.raises(InvalidTransition):
                store.state.transition(operation, target, "walking the table")
            assert store.require(operation.operation_id).state is source, (source, target)
            with pytest.raises(InvalidTransition):
                states.check(source, target)


def test_a_move_from_a_state_the_operation_has_left_is_refused(store, tables):
    # Given an operation read while FAILED, then redriven by someone else
    operation = stored_in(store, tables, "op-raced", OperationState.FAILED)
    assert store.state.transition(operation, OperationState.ACCEPTED, "first redrive")
    # When the stale copy is used for the same move / Then the conditional write refuses it
    assert not store.state.transition(operation, OperationState.ACCEPTED, "second redrive")
    assert [entry.reason for entry in store.require("op-raced").history] == ["set up", "first redrive"]


def test_the_blind_writes_move_only_from_the_states_the_table_lists():
    # The lease, the pause and the refusal are conditional on `states.sources(target)`: derived, not repeated.
    _S = OperationState
    assert states.sources(_S.IN_PROGRESS) == {_S.ACCEPTED, _S.SCHEDULED, _S.PAUSED, _S.IN_PROGRESS}
    assert states.sources(_S.PAUSED) == {_S.ACCEPTED, _S.SCHEDULED, _S.IN_PROGRESS}
    assert states.sources(_S.REJECTED) == {_S.ACCEPTED, _S.SCHEDULED, _S.IN_PROGRESS}
    # IN_PROGRESS -> SCHEDULED is a lease holder's wait between two steps, SCHEDULED -> SCHEDULED a rate limit's
    # hold of a job come back too late for its slot; a blind write never moves from either
    assert states.sources(_S.SCHEDULED) == {_S.ACCEPTED, _S.IN_PROGRESS, _S.SCHEDULED}
    assert blind_sources(_S.SCHEDULED) == {_S.ACCEPTED}


def test_only_work_that_never_started_can_be_cancelled_or_expire():
    # Given the table / Then CANCELLED and EXPIRED are final, listed, and reached only from the not-started states
    _S = OperationState
    for ending in (_S.CANCELLED, _S.EXPIRED):
        assert states.sources(ending) == states.NOT_STARTED == {_S.ACCEPTED, _S.SCHEDULED, _S.PAUSED}
        assert ending in FINAL_STATES and ending in states.LISTED_STATES
        assert TRANSITIONS[ending] == frozenset()
    assert _S.SCHEDULED in OPEN_STATES and _S.SCHEDULED in states.LISTED_STATES


def test_only_the_operations_store_writes_the_state_table():
    # Every module of the framework that changes an operation's state goes through OperationStore (whose
    # delivery writes live in deliveries.py); markers.py writes the markers table only.
    writers = []
    for path in sorted((ROOT / "shared" / "converge").glob("*.py")):
        if path.name in ("operations.py", "deliveries.py", "markers.py"):
            continue
        if re.search(r"\.(update_item|put_item|delete_item|transact_write_items)\(", path.read_text()):
            writers.append(path.name)
    assert writers == []


def test_a_refused_move_names_the_moves_there_are():
    # From an open state: the allowed targets, in order
    with pytest.raises(InvalidTransition) as refused:
        states.check(OperationState.PAUSED, OperationState.SUCCEEDED)
    assert str(refused.value) == (
        "an operation cannot move from PAUSED to SUCCEEDED; from PAUSED: ACCEPTED, CANCELLED, EXPIRED, IN_PROGRESS"
    )
    # From a final one: none
    with pytest.raises(InvalidTransition) as final:
        states.check(OperationState.SUCCEEDED, OperationState.ACCEPTED)
    assert str(final.value) == (
        "an operation cannot move from SUCCEEDED to ACCEPTED; from SUCCEEDED: none (it is final)"
    )


@pytest.mark.parametrize("to", list(OperationState), ids=lambda state: state.value)
def test_a_blind_move_applies_from_the_states_the_table_lists_and_from_no_record_only_where_accepted_is_one(tables, to):
    # Given a state table holding no record, and records in each state (no lease, the admitted content)
    client = boto3.client("dynamodb")
    for state in OperationState:
        client.put_item(
            TableName=tables["state"],
            Item={"operation_id": {"S": f"in-{state.value}"}, "state": {"S": state.value}, "fingerprint": {"S": "fp"}},
        )

    def moved(operation_id: str) -> bool:
        update = Update().set("state", {"S": to.value})
        may_move(update, to, 1_800_000_000.0, ("fp",))
        try:
            client.update_item(**update.request(tables["state"], {"operation_id": {"S": operation_id}}))
        except client.exceptions.ConditionalCheckFailedException:
            return False
        return True

    # When the move's condition is written for each, Then it applies exactly from the states a blind write may move
    # from, and to a record not written yet only where the table counts "no record" as ACCEPTED
    assert {state for state in OperationState if moved(f"in-{state.value}")} == blind_sources(to)
    assert moved(f"absent-{to.value}") is (OperationState.ACCEPTED in states.sources(to))
