"""`converge demo --chaos`'s debounce: the reference application's CV re-render gets bursts of requests for each of
its profiles, under the chaos faults, and the report's three checks (localcloud/debounce_workload.py) hold: one run
per burst, as its newest request, the others NOOP debounced into it; none that never started in a DLQ; the run's
start within `max_wait` of its burst's first request. The last tests make a burst read wrong, to show each check
can fail.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import pytest

from converge.model.clock import iso
from converge.model.states import OperationState
from converge.model.timing import parse_instant
from localcloud import debounce_workload, invariants
from localcloud.debounce_workload import ARRIVALS, REQUESTS, ChaosBursts
from localcloud.faults import FaultKind

from .conftest import Chaos

CV_REFRESH = "pdf.cv-refresh.v1"
NEWEST = ARRIVALS.index(max(ARRIVALS))
"""The place, in the order sent, of a burst's newest request."""


def sent_bursts(chaos: Chaos, prefix: str = "burst") -> ChaosBursts:
    bursts = ChaosBursts.of(chaos.workload)
    assert bursts is not None and bursts.job_type == CV_REFRESH
    assert bursts.send(0, prefix)
    chaos.workload.drain()
    return bursts


def verdicts(bursts: ChaosBursts, chaos: Chaos, operations=None) -> dict[str, object]:
    operations = operations if operations is not None else invariants.operations_in(chaos.cloud)
    return {check.name: check for check in bursts.checks(operations, chaos.faults)}


def test_each_profile_s_burst_runs_once_as_its_newest_request_in_time(chaos: Chaos) -> None:
    # Given the reference catalogue's debounced CV re-render, and no faults
    # When each of its profiles gets a burst of four requests, out of order, and they are drained
    bursts = sent_bursts(chaos)
    chaos.settle()
    # Then each burst ran once, as its newest request, and each other request names it (read from the receipts)
    operations = invariants.operations_in(chaos.cloud)
    assert bursts.summary() == {
        "job_type": CV_REFRESH,
        "debounce": "10 s quiet, at most 60 s per profile_id, newest by version",
        "bursts": 2,
        "requests": 2 * REQUESTS,
        "keys": 2,
    }
    for burst in bursts.bursts:
        newest = burst.ids[NEWEST]
        assert operations[newest][0].state is OperationState.SUCCEEDED
        for operation_id in burst.ids:
            if operation_id != newest:
                operation = operations[operation_id][0]
                assert (operation.state, operation.history[-1].reason) == (
                    OperationState.NOOP,
                    f"debounced into {newest}",
                )
    # And the three checks hold, saying what they measured
    checks = verdicts(bursts, chaos, operations)
    assert all(check.holds for check in checks.values()), {name: c.violations for name, c in checks.items()}
    assert checks["debounce_ran_once"].detail.startswith(f"2 bursts of {CV_REFRESH} (8 requests, 2 keys): each ran")
    assert "met a fault" not in checks["debounce_ran_once"].detail
    assert "within 60 s of its burst's first request (the latest after 1" in checks["debounce_within_max_wait"].detail
    assert "met a fault" not in checks["debounce_within_max_wait"].detail


def test_a_burst_whose_run_crashes_after_its_effect_still_runs_once_and_says_so(chaos: Chaos) -> None:
    # Given the first profile's newest request dies once just after its effect (its lease then lets it run again)
    chaos.faults.plan(FaultKind.CRASH_AFTER_EFFECT, "crash-k0-" + str(NEWEST))
    # When the bursts are sent and everything settles
    bursts = sent_bursts(chaos, "crash")
    chaos.settle()
    # Then the run still ran once, as the newest, and in time; the check's detail names the fault its wave met (the
    # other profile's burst with it: the two share the worker's batches)
    assert chaos.faults.counts[FaultKind.CRASH_AFTER_EFFECT.value] == 1
    assert bursts.delivery_allowance == 3 * 180  # the default queue: three retries, 180 s visibility timeout each
    checks = verdicts(bursts, chaos)
    assert all(check.holds for check in checks.values()), {name: c.violations for name, c in checks.items()}
    assert (
        "2 met a fault, on their wave's requests: crash-k0, crash-k1 (crash_after_effect 1)"
        in checks["debounce_ran_once"].detail
    )
    assert "one that met a fault: from its first request reaching a worker" in checks["debounce_within_max_wait"].detail


def test_a_request_debounced_into_another_than_its_newest_is_caught(chaos: Chaos) -> None:
    # Given the bursts ran
    bursts = sent_bursts(chaos, "wrong")
    chaos.settle()
    operations = invariants.operations_in(chaos.cloud)
    # When one older request reads as debounced into another older request (as if an older payload had run)
    older, other = bursts.bursts[0].ids[0], bursts.bursts[0].ids[1]
    operation, item = operations[older]
    last = replace(operation.history[-1], reason=f"debounced into {other}")
    record = replace(operation.state_record, history=(*operation.history[:-1], last))
    operations[older] = (replace(operation, record=record), item)
    # Then the burst's check names it, and the others still hold
    checks = verdicts(bursts, chaos, operations)
    assert not checks["debounce_ran_once"].holds
    assert checks["debounce_ran_once"].violations == [
        f"{older}: NOOP 'debounced into {other}', not debounced into {bursts.bursts[0].ids[NEWEST]}"
    ]
    assert checks["debounced_not_dead_lettered"].holds and checks["debounce_within_max_wait"].holds


def test_a_run_started_past_max_wait_is_caught(chaos: Chaos) -> None:
    # Given the bursts ran
    bursts = sent_bursts(chaos, "late")
    chaos.settle()
    operations = invariants.operations_in(chaos.cloud)
    # When the first profile's run reads as started two minutes later than it did (its burst met no fault)
    run = bursts.bursts[0].ids[NEWEST]
    operation, item = operations[run]
    history = tuple(
        replace(entry, at=iso(parse_instant("at", entry.at) + 120)) if entry.state == "IN_PROGRESS" else entry
        for entry in operation.history
    )
    operations[run] = (replace(operation, record=replace(operation.state_record, history=history)), item)
    # Then the time check names it
    check = verdicts(bursts, chaos, operations)["debounce_within_max_wait"]
    assert not check.holds
    assert len(check.violations) == 1
    assert check.violations[0].startswith(f"{run}: started 1") and check.violations[0].endswith("(allowed 60.002 s)")


def test_a_request_that_never_started_in_a_dlq_is_caught(chaos: Chaos, monkeypatch: pytest.MonkeyPatch) -> None:
    # Given the bursts ran
    bursts = sent_bursts(chaos, "dead")
    chaos.settle()
    # When one request debounced into its run (it never started) reads as in a DLQ
    older = bursts.bursts[1].ids[0]
    monkeypatch.setattr(debounce_workload, "dead_lettered", lambda cloud: Counter({older: 1}))
    # Then the check names it
    check = verdicts(bursts, chaos)["debounced_not_dead_lettered"]
    assert not check.holds
    assert check.violations == [f"{older}: debounced, never started, in a DLQ"]


def test_a_catalogue_without_a_debounced_job_sends_no_burst(chaos: Chaos, monkeypatch: pytest.MonkeyPatch) -> None:
    # Given a registry whose bindings declare no debounce
    plain = [binding for binding in chaos.cloud.registry if binding.debounce is None]
    monkeypatch.setattr(chaos.cloud, "registry", plain)
    # Then the chaos run has no bursts to send or check
    assert ChaosBursts.of(chaos.workload) is None
