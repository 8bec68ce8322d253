"""The effects invariant of a team's catalogue (localcloud.effect_invariants): each operation's effects are those of a
clean run of its job and payload, give or take what its faults allow. Given runs made up here, with the broken
ones a team's job could produce."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from converge import OperationState
from localcloud.effect_invariants import effects_as_a_clean_run

S = OperationState
ROW_AND_EMAIL = {"OrdersTable": 1, "ses": 1}


@dataclass
class Op:
    state: OperationState
    job_type: str = "orders.confirm.v1"
    payload: dict = field(default_factory=lambda: {"order_id": "o-1"})


@dataclass
class Log:
    injected: Counter = field(default_factory=Counter)
    window: int = 0


class Counted:
    def __init__(self, made: dict[str, dict[str, int]]) -> None:
        self.made = made

    def for_operation(self, operation_id: str) -> dict[str, int]:
        return self.made.get(operation_id, {})


class Faults:
    def __init__(self, logs: dict[str, Log]) -> None:
        self.operations = logs

    def window(self, operation_id: str) -> int:
        return self.operations[operation_id].window if operation_id in self.operations else 0


def check(ops: dict[str, Op], made: dict[str, dict[str, int]], logs: dict[str, Log] | None = None):
    return effects_as_a_clean_run({k: (v, {}) for k, v in ops.items()}, Counted(made), Faults(logs or {}))


def clean_runs(count: int = 3) -> tuple[dict[str, Op], dict[str, dict[str, int]]]:
    ops = {f"clean-{n}": Op(S.SUCCEEDED) for n in range(count)}
    return ops, {op: dict(ROW_AND_EMAIL) for op in ops}


def test_runs_like_the_clean_ones_hold_and_the_check_says_how_many_it_held():
    # Given three clean runs of one job and payload, each a row and an e-mail
    ops, made = clean_runs()
    # Then the invariant holds, over the three
    result = check(ops, made)
    assert result.holds and result.detail.startswith("3 operations held to a clean run")


def test_a_lost_effect_or_a_second_one_without_a_fault_is_a_violation():
    # Given clean runs, one SUCCEEDED run that sent no e-mail, and one that wrote its row twice over, fault-free
    ops, made = clean_runs()
    ops |= {"lost": Op(S.SUCCEEDED), "doubled": Op(S.SUCCEEDED)}
    made |= {"lost": {"OrdersTable": 1}, "doubled": {"OrdersTable": 2, "ses": 1}}
    # Then each is named, with what a clean run makes
    result = check(ops, made)
    assert not result.holds
    assert sorted(v.split(" ", 1)[0] for v in result.violations) == ["doubled", "lost"]
    assert any("0 ses, allowed 1..1" in v for v in result.violations)


def test_a_fault_in_the_window_allows_one_duplicate_and_no_more():
    # Given a run that crashed between its e-mail and its claim once (one window fault), and one that crashed twice
    # but sent three e-mails
    ops, made = clean_runs()
    ops |= {"once": Op(S.SUCCEEDED), "thrice": Op(S.SUCCEEDED)}
    made |= {"once": {"OrdersTable": 1, "ses": 2}, "thrice": {"OrdersTable": 1, "ses": 4}}
    logs = {"once": Log(Counter(crash_after_effect=1), 1), "thrice": Log(Counter(crash_after_effect=2), 2)}
    # Then the first holds (duplicates over loss), the second is one too many
    result = check(ops, made, logs)
    assert [v.split(" ", 1)[0] for v in result.violations] == ["thrice"]


def test_an_operation_that_did_not_succeed_may_have_made_part_of_its_effects_never_more():
    # Given a run that failed after its row (a partial run), and one that failed with two rows
    ops, made = clean_runs()
    ops |= {"partial": Op(S.FAILED), "more": Op(S.FAILED)}
    made |= {"partial": {"OrdersTable": 1}, "more": {"OrdersTable": 2}}
    # Then only the second breaks it; and a job with no clean run at all is not held to one
    result = check(ops, made)
    assert [v.split(" ", 1)[0] for v in result.violations] == ["more"]
    other = {"faulted": Op(S.SUCCEEDED, payload={"order_id": "o-9"})}
    assert check(other, {"faulted": {"ses": 5}}, {"faulted": Log(Counter(lost_response=1), 0)}).holds
