"""What an invariant's violation says: enough to read it without replaying the history."""

from __future__ import annotations

from types import SimpleNamespace

from converge.model.records import Operation
from converge.model.request import fingerprint
from converge.model.states import OperationState
from localcloud.effects import Effects
from localcloud.faults import OperationLog
from localcloud.invariants import _producer_rewrites

JOB = "email.password-reset.v1"
FIRST = {"to": "a@example.com"}


def test_a_rewrite_unlisted_under_conflict_is_told_with_the_fingerprints_it_was_judged_by() -> None:
    # Given an operation whose producer wrote it once, then again with other times (other content), never listed
    first = fingerprint(JOB, FIRST, "2027-01-01T00:00:00.000Z")
    rewrite = fingerprint(JOB, FIRST, "2027-01-01T00:05:00.000Z")
    log = OperationLog(original=(JOB, FIRST), original_fingerprints=(first,), rewritten_fingerprints=[rewrite])
    faults = SimpleNamespace(operations={"op-1": log})
    operation = Operation("op-1", JOB, FIRST, OperationState.ACCEPTED)

    # When the rewrite check reads it
    check = _producer_rewrites(faults, {"op-1": (operation, {})}, Effects(), lambda flag: set())

    # Then it fails, naming both fingerprints
    assert not check.holds
    [violation] = check.violations
    assert violation.startswith("op-1: other content written under its id, but not listed CONFLICT")
    assert f"first written ['{first[:12]}']" in violation
    assert f"rewrites ['{rewrite[:12]}']" in violation
