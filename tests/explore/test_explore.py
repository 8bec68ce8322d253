"""Run the explorer: a bounded, derandomized run in the suite; as long as asked under `make explore`.

The bounded run explores the same histories on every run (derandomized). `make explore` runs
`test_explore_at_length` with `EXPLORE_EXAMPLES` histories (default 500) or for `EXPLORE_SECONDS`,
random, from the seed it prints (`--hypothesis-seed`). A failure prints the shrunk history as
Hypothesis found it, with a `@reproduce_failure` blob; see docs/fault-injection.md, "The explorer".
"""

from __future__ import annotations

import itertools
import os
import random
import signal
import sys
import time
import traceback
from collections import Counter

import pytest
from hypothesis import HealthCheck, Phase, core, settings
from hypothesis.database import DirectoryBasedExampleDatabase
from hypothesis.errors import FlakyStrategyDefinition
from hypothesis.internal.conjecture import engine
from hypothesis.stateful import get_state_machine_test

from converge.model.batches import callback_id
from converge.model.states import OperationState

from .machine import CANNOT_TELL, LOST, Explorer

BOUNDED_HISTORIES = 60
DEFAULT_HISTORIES = 500
BOUNDED_SHRINKING_SECONDS = 60
"""The suite's run shrinks a failure for a minute at most (then prints it as it stands, with its blob)."""
STEPS = int(os.environ.get("EXPLORE_STEPS") or 20)
"""Steps per history at most (Hypothesis draws how many); a long run may allow more (`EXPLORE_STEPS`)."""
SETTINGS = settings(
    deadline=None,
    print_blob=True,
    database=None,
    stateful_step_count=STEPS,
    suppress_health_check=list(HealthCheck),
)


SHRINKING_SECONDS = 1500
"""Hypothesis stops shrinking after five minutes; a history here takes seconds, so a failure is given longer to
become minimal (an internal constant of Hypothesis, hence set for the run only)."""
DATABASE = DirectoryBasedExampleDatabase(".hypothesis/explore")
"""Where a long run keeps the failures it found (`make explore SHRINK=1` shrinks them further from there)."""
DATABASE_KEY = b"converge-explorer"
BATCH = int(os.environ.get("EXPLORE_BATCH") or 200)
"""Histories per seed when the run has a time budget (it stops between batches, never while shrinking); half
way through a batch, Hypothesis' targeted phase takes up its best-covering histories and mutates them."""
NEW_HISTORIES = (Phase.explicit, Phase.generate, Phase.target, Phase.shrink)
"""A batch's phases: failures found are saved, never replayed by the next batch (only by SHRINK=1)."""


def run(
    explorer: type[Explorer],
    histories: int,
    derandomize: bool,
    seconds: float | None = None,
    shrink_seconds: int = SHRINKING_SECONDS,
) -> None:
    """Run `histories` histories (or batches of them, each from the next seed, until `seconds` have passed)."""
    started, before = time.perf_counter(), (Explorer.histories, Explorer.steps)
    batches = (Explorer.batches_admitted, Explorer.batches_completed)
    nearest = Explorer.started_then_unstarted
    states_before = Counter(Explorer.reached)
    shrinking, forced = engine.MAX_SHRINKING_SECONDS, core.global_force_seed
    terminated = signal.getsignal(signal.SIGTERM)
    engine.MAX_SHRINKING_SECONDS = int(os.environ.get("EXPLORE_SHRINK_SECONDS") or shrink_seconds)
    try:
        if seconds is None:
            shrink_only = bool(os.environ.get("EXPLORE_SHRINK")) and not derandomize
            phases = (Phase.reuse, Phase.shrink) if shrink_only else tuple(Phase)
            test = get_state_machine_test(
                explorer,
                settings=settings(
                    SETTINGS,
                    max_examples=histories,
                    derandomize=derandomize,
                    database=None if derandomize else DATABASE,
                    phases=phases,
                ),
            )
            test._hypothesis_internal_database_key = DATABASE_KEY  # type: ignore[attr-defined]
            test()
            return
        first, failures = int(os.environ.get("EXPLORE_SEED") or random.getrandbits(32)), []
        # A run cut off at its budget (`make explore-power` sends SIGTERM) still prints how far it got, below
        signal.signal(signal.SIGTERM, _cut_off)
        for batch in itertools.count():
            if time.perf_counter() - started > seconds or batch * BATCH >= histories:
                break
            print(f"explore: batch {batch}, seed {first + batch}", file=sys.stderr, flush=True)
            stop_at_break = bool(os.environ.get("EXPLORE_STOP_AT_BREAK"))
            new_only = settings(
                SETTINGS,
                max_examples=BATCH,
                database=DATABASE,
                # The targeted phase too under `make explore-power`: the scores steer its histories as they steer
                # `make explore`'s. It asks for the first break only: no search for others once it is met (the time
                # to find is that history's; the targeted phase may finish its pass before the shrinking starts)
                phases=NEW_HISTORIES,
                report_multiple_bugs=not stop_at_break,
            )
            test = get_state_machine_test(explorer, settings=new_only)
            test._hypothesis_internal_database_key = DATABASE_KEY  # type: ignore[attr-defined]
            core.global_force_seed = first + batch  # as --hypothesis-seed sets it
            try:
                test()
            except Exception as failure:  # printed (the shrunk histories), and the next batch goes on
                print("".join(traceback.format_exception(failure)), flush=True)
                if _generation_only(failure):
                    # Not a broken promise: Hypothesis met a history whose draws differed when it ran again (state
                    # that outlived a history). Said, counted, and the budget goes on to the next batch.
                    print(f"explore: batch {batch} ended by a history drawn differently twice", flush=True)
                    continue
                failures.append(failure)
                if stop_at_break:  # `make explore-power`: the first break is the answer
                    break
        if failures:
            raise ExceptionGroup(f"{len(failures)} batches found breaks (each printed above)", failures)
    finally:
        engine.MAX_SHRINKING_SECONDS = shrinking
        core.global_force_seed = forced
        signal.signal(signal.SIGTERM, terminated)
        elapsed = time.perf_counter() - started
        done, steps = Explorer.histories - before[0], Explorer.steps - before[1]
        print(
            f"\nexplored {done} histories ({steps} steps, {steps / max(done, 1):.1f} a history) in {elapsed:.0f} s: "
            f"{60 * done / max(elapsed, 1e-9):.0f} histories a minute; "
            f"{Explorer.batches_admitted - batches[0]} batches admitted, "
            f"{Explorer.batches_completed - batches[1]} of them complete at their history's end; "
            f"{Explorer.started_then_unstarted - nearest} histories with started work that read as not started; "
            f"histories ending quiet that reached each state: {reached(Explorer.reached - states_before)}"
        )


def _generation_only(failure: BaseException) -> bool:
    """Whether a batch failed only because a history's draws differed between two runs of it (Hypothesis'
    FlakyStrategyDefinition), not because a promise broke."""
    if isinstance(failure, BaseExceptionGroup):
        return all(_generation_only(inner) for inner in failure.exceptions)
    return isinstance(failure, FlakyStrategyDefinition)


def _cut_off(signum: int, frame: object) -> None:
    raise KeyboardInterrupt("cut off at its budget (SIGTERM)")


def reached(counts: Counter[str]) -> str:
    return ", ".join(f"{state} {number}" for state, number in counts.most_common()) or "none"


@pytest.mark.slow  # 60 histories on a local cloud: about a minute and a half
def test_bounded_exploration_keeps_the_promise(explorer: type[Explorer]) -> None:
    # Given a clean cloud per history / When the explorer runs its derandomized histories
    # Then every step keeps the promise, every reconciler pass leaves nothing invisible, every end is quiescent
    run(explorer, BOUNDED_HISTORIES, derandomize=True, shrink_seconds=BOUNDED_SHRINKING_SECONDS)


@pytest.mark.skipif(not os.environ.get("EXPLORE"), reason="the long exploration runs under `make explore`")
def test_explore_at_length(explorer: type[Explorer]) -> None:
    # As the bounded run, random (from the seed `make explore` prints), for EXPLORE_EXAMPLES histories
    # (default 500) or until EXPLORE_SECONDS have passed
    examples, seconds = os.environ.get("EXPLORE_EXAMPLES"), os.environ.get("EXPLORE_SECONDS")
    histories = int(examples) if examples else (10**9 if seconds else DEFAULT_HISTORIES)
    run(explorer, histories, derandomize=False, seconds=float(seconds) if seconds else None)


def test_the_platform_waits_for_a_historys_first_operation(explorer: type[Explorer]) -> None:
    # Given a fresh history (every rule allowed: a replay's focus)
    state = explorer()
    rules = {rule.function.__name__: rule for rule in Explorer.setup_state().rules}

    def drawable(name: str) -> bool:
        return all(check(state) for check in rules[name].preconditions)

    platform = ("visible_work_drains", "clock_advances", "reconciler_runs", "months_pass")
    # Then no drain, poll or move of the clock is drawn while nothing is made; a way in, a fault, a switch may be
    assert state.waiting_for_a_first_operation()
    assert not any(drawable(name) for name in platform)
    assert all(drawable(name) for name in ("producer_enqueues", "producer_admits_batch", "effect_response_lost"))
    assert drawable("toggle_flips")
    # When one is made / Then the platform's moves may be drawn again
    state.producer_enqueues(job="email", timing="now")
    assert not state.waiting_for_a_first_operation()
    assert all(drawable(name) for name in platform)
    state.teardown()


def test_a_history_starts_from_the_providers_it_meets(explorer: type[Explorer]) -> None:
    # Given the explorer's first step, which every history takes
    initial = [rule.function.__name__ for rule in Explorer.setup_state().initializers]
    assert initial == ["providers_met"]
    # When a history meets a charge provider and a ledger that cannot tell, and loses its first answers
    state = explorer()
    state.providers_met(charges=CANNOT_TELL, ledger=CANNOT_TELL, first_answers=LOST)
    operation = state.producer_enqueues(job="money", timing="now")
    state.everything_drains()
    state.promise_kept()
    # Then a credit whose answer is lost is UNKNOWN (the ledger can say nothing of it), as the rules would make it
    found = state.converge.operations.require(operation)
    assert found.state.value == "UNKNOWN"
    assert sum(state.chaos.effects().for_operation(operation).values()) == 1
    state.teardown()


def test_an_operator_works_on_what_needs_attention(explorer: type[Explorer]) -> None:
    # Given a credit left UNKNOWN (its answer lost, the ledger cannot tell) and an e-mail sent
    state = explorer()
    state.providers_met(charges=CANNOT_TELL, ledger=CANNOT_TELL, first_answers=LOST)
    credit = state.producer_enqueues(job="money", timing="now")
    email = state.producer_enqueues(job="email", timing="now")
    state.everything_drains()
    # Then the operator's list holds the credit alone
    assert state.converge.operations.require(email).state.value == "SUCCEEDED"
    assert state._needing_attention() == {credit: OperationState.UNKNOWN}
    # When resolved from a directory without the project: refused (it needs the catalogue), nothing changed
    state.acts_on_the_list(credit, "resolve from elsewhere")
    assert state.converge.operations.require(credit).state.value == "UNKNOWN"
    # When resolved as the provider says (its credit was made): settled, and the list is empty
    state.acts_on_the_list(credit, "resolve")
    state.promise_kept()
    assert state.converge.operations.require(credit).state.value == "SUCCEEDED"
    assert state._needing_attention() == {}
    state.teardown()


def test_an_operators_list_holds_a_batchs_children_not_its_callback_nor_a_childs_continuation(
    explorer: type[Explorer],
) -> None:
    # Given a batch admitted by the explorer
    state = explorer()
    batch = state.producer_admits_batch(crash=False, job="email", size=2)
    child = state.admitted[batch].child_ids()[0]
    # Then a child is of the batch's job; its callback and a child's continuation are not the explorer's operations
    assert state._job_of(child) == "email"
    assert state._job_of(callback_id(batch)) is None and state._job_of(f"{child}:next") is None
    state.teardown()


def test_an_operators_rule_may_act_on_what_the_list_holds_rather_than_the_operation_it_drew(
    explorer: type[Explorer],
) -> None:
    # Given an UNKNOWN credit (its ledger can neither deduplicate nor be asked, its answer lost) and a settled e-mail
    state = explorer()
    state.ledger_provider_misbehaves()
    state.effect_response_lost()
    credit = state.producer_enqueues(job="money", timing="now")
    email = state.producer_enqueues(job="email", timing="now")
    state.everything_drains()
    assert state._needing_attention() == {credit: OperationState.UNKNOWN}
    # When an operator's resolve drew the e-mail but takes the list's operation (any place, counted round)
    state.operator_resolves(operation=email, if_not_done="failed", listed=5)
    state.promise_kept()
    # Then the credit is resolved as the ledger says (made: SUCCEEDED), and the list is empty
    assert state.converge.operations.require(credit).state is OperationState.SUCCEEDED
    assert state._needing_attention() == {}
    # And with nothing listed, or no place drawn, a rule acts on the operation it drew (a retry of a settled e-mail:
    # refused, nothing changed)
    state.operator_retries(operation=email, listed=0)
    state.operator_acts_outside_the_project(operation=email, action="retry", listed=None)
    state.promise_kept()
    assert state.converge.operations.require(email).state is OperationState.SUCCEEDED
    state.teardown()
