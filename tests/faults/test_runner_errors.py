"""A runner's bug is not a passing failure: retried as one, but logged with its traceback, once per attempt.

A runner that raises something no one planned for (a KeyError, a TypeError) most likely has a bug, and
the one thing its author needs is the traceback. An expected failure (converge's own transient error,
AWS throttling) stays one quiet WARNING line. Both are read from the worker's own log lines, as the local
cloud keeps them per function (CloudWatch Logs' log group).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from catalogue import examples
from catalogue.documents import PartnerDocumentRunner
from converge.model.errors import TransientError
from converge.model.states import OperationState

from .conftest import Chaos

DOCS = "partner-docs.upload.v1"
DOCS_PAYLOAD = {"partner_id": examples.PARTNER, "upload_id": examples.UPLOAD}
WORKER = "DefaultWorkerFunction"  # the default queue's worker, which runs partner documents


def log_lines(chaos: Chaos, operation_id: str) -> list[dict[str, Any]]:
    """The worker's structured log lines about one operation (its id is among the logger's appended keys)."""
    lines = [json.loads(line) for line in chaos.cloud.runtime.logs[WORKER] if line.startswith("{")]
    return [line for line in lines if line.get("operation_id") == operation_id]


def test_a_runners_bug_is_logged_with_its_traceback_on_every_attempt_then_fails(
    chaos: Chaos, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a runner with a bug: it looks up a key its data does not have
    def run(self: PartnerDocumentRunner, message: Any, loaded: Any, ctx: Any) -> None:
        {"partner_id": message.partner_id}["user_id"]

    monkeypatch.setattr(PartnerDocumentRunner, "run", run)
    # When its job runs, and is retried until its last attempt
    chaos.enqueue(DOCS, "op-runner-bug", DOCS_PAYLOAD)
    chaos.settle()
    # Then it was retried as now, and the last attempt recorded FAILED with the error's class and message
    operation = chaos.operation("op-runner-bug")
    assert operation.state is OperationState.FAILED and operation.attempts > 1
    assert operation.last_error == "KeyError: 'user_id'"
    # And every attempt logged exactly one line with the traceback, at ERROR, naming the operation
    lines = log_lines(chaos, "op-runner-bug")
    tracebacks = [line for line in lines if "exception" in line]
    assert len(tracebacks) == operation.attempts
    for line in tracebacks:
        assert line["level"] == "ERROR" and line["exception_name"] == "KeyError"
        # the traceback reaches the runner's own line, where the bug is
        assert line["exception"].startswith("Traceback (most recent call last)")
        assert 'in run\n    {"partner_id": message.partner_id}["user_id"]' in line["exception"]
        assert line["reason"] == "KeyError: 'user_id'"
    assert [line["attempt"] for line in tracebacks] == list(range(1, operation.attempts + 1))
    # And it is not passed off as a transient failure anywhere
    assert not [line for line in lines if line["message"] == "transient failure; will retry"]
    # And its message went to the DLQ after the last attempt, as any failed one's does
    chaos.check(["op-runner-bug"])


def test_an_expected_transient_failure_stays_one_quiet_warning(chaos: Chaos, monkeypatch: pytest.MonkeyPatch) -> None:
    # Given a runner whose provider is unavailable once (converge's own transient error)
    failures = [TransientError("upload store unavailable")]
    real_run = PartnerDocumentRunner.run

    def run(self: PartnerDocumentRunner, message: Any, loaded: Any, ctx: Any) -> None:
        if failures:
            raise failures.pop()
        real_run(self, message, loaded, ctx)

    monkeypatch.setattr(PartnerDocumentRunner, "run", run)
    # When its job runs, fails once and is retried
    chaos.enqueue(DOCS, "op-runner-transient", DOCS_PAYLOAD)
    chaos.settle()
    # Then it succeeded on the retry
    operation = chaos.operation("op-runner-transient")
    assert operation.state is OperationState.SUCCEEDED and operation.attempts == 2
    # And the failure was one WARNING line, with no traceback, and nothing at ERROR
    lines = log_lines(chaos, "op-runner-transient")
    warnings = [line for line in lines if line["level"] == "WARNING"]
    assert [line["message"] for line in warnings] == ["transient failure; will retry"]
    assert not [line for line in lines if "exception" in line or line["level"] == "ERROR"]
    chaos.check(["op-runner-transient"])
