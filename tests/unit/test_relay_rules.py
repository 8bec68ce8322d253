"""The outbox relay's visible outcomes: what a refused record counts, and where a valid one goes."""

from __future__ import annotations

from converge.observability import metrics
from converge.operations import OperationState

from .sqs_rules import dispatch, receive


def test_a_record_the_relay_refuses_is_rejected_visibly_and_counted(app):
    # Given a raw producer item of a job type nobody registered
    app.operations.admit("no.such.v1", "op-stray", {"user_id": "u-1"})
    metrics.clear_metrics()
    # When the relay carries its stream record
    dispatch(app, "op-stray")
    # Then nothing is queued, the operation is REJECTED with the reason, and the rejection is counted
    assert receive(app) == []
    stored = app.operations.require("op-stray")
    assert stored.state is OperationState.REJECTED
    assert stored.last_error is not None and stored.last_error.startswith("UnknownJobType: ")
    assert metrics.metric_set["rejected"]["Value"] == [1.0]
    metrics.clear_metrics()
