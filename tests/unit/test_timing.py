"""A delivery and time: nothing starts before its run_at, and work not started by its expires_at ends EXPIRED.

Each case checks the result the worker acts on, what was counted, whether the runner was called, and the
operation's stored state afterwards.
"""

from __future__ import annotations

import uuid

import pytest

from converge.flow.pipeline import LEASE_GRACE_SECONDS, Delivery, Pipeline, Refusal, refusal
from converge.flow.registry import JobBinding, Policy, Queue
from converge.model.clock import iso
from converge.model.envelope import Envelope
from converge.model.errors import TransientError
from converge.model.outcomes import Outcome
from converge.model.records import StateRecord, Subject
from converge.model.request import fingerprint
from converge.model.states import OperationState
from converge.model.timing import parse_instant

from .conftest import Notice, body_of, deliver, sent, set_toggle, tables_called, throttle


def timed_body(app, operation_id: str, run_at: float | None = None, expires_at: float | None = None) -> str:
    """An operation's message as the relay sends it, with its times."""
    operation = app.operations.require(operation_id)
    return Envelope(
        operation_id=operation_id,
        job_type=operation.job_type,
        payload=operation.payload,
        run_at=iso(run_at) if run_at is not None else None,
        expires_at=iso(expires_at) if expires_at is not None else None,
    ).to_body()


def enqueued(app, operation_id: str, job_type: str = "mail.notice.v1") -> None:
    app.enqueue(job_type, operation_id, {"user_id": str(uuid.uuid4())})


def test_work_not_started_by_its_expiry_ends_expired_counted_and_never_runs(app, recorder, clock, counted):
    # Given an operation whose expires_at has passed before its first delivery
    enqueued(app, "op-late")
    expires_at = clock.now() - 1
    # When its message is delivered
    result = deliver(app, "op-late", body=timed_body(app, "op-late", expires_at=expires_at))
    # Then it is EXPIRED with the reason, acknowledged, counted under its job type, and the runner never ran
    reason = f"not started by its expires_at {iso(expires_at)}"
    assert (result.outcome, result.reason) == (Outcome.EXPIRED, reason)
    assert counted == [("expired", "mail.notice.v1", 1)]
    assert recorder.calls == []
    stored = app.operations.require("op-late")
    assert stored.state is OperationState.EXPIRED
    assert stored.history[-1].reason == reason
    assert [
        row["operation_id"] for row in app.operations.listings.list_attention(OperationState.EXPIRED).operations
    ] == ["op-late"]


def test_an_expiry_still_ahead_changes_nothing(app, recorder, clock, counted):
    enqueued(app, "op-in-time")
    result = deliver(app, "op-in-time", body=timed_body(app, "op-in-time", expires_at=clock.now() + 60))
    assert result.outcome is Outcome.SUCCEEDED
    assert recorder.effects == ["op-in-time"]
    assert app.operations.require("op-in-time").state is OperationState.SUCCEEDED


def test_a_retry_of_work_that_started_before_its_expiry_carries_on(app, recorder, clock, counted):
    # Given an operation whose first attempt started in time and failed transiently
    enqueued(app, "op-started")
    expires_at = clock.now() + 10
    recorder.fail_effect.append(TransientError("provider unavailable"))
    assert deliver(app, "op-started", body=timed_body(app, "op-started", expires_at=expires_at)).outcome is (
        Outcome.RETRY
    )
    # When the retry comes after the expiry
    clock.advance(60)
    counted.clear()
    result = deliver(app, "op-started", attempt=2, body=timed_body(app, "op-started", expires_at=expires_at))
    # Then it runs and succeeds: expiry ends only work that never began
    assert result.outcome is Outcome.SUCCEEDED
    assert recorder.effects == ["op-started"]
    assert ("expired", "mail.notice.v1", 1) not in counted
    assert app.operations.require("op-started").state is OperationState.SUCCEEDED


def test_an_expiry_of_work_another_delivery_holds_now_leaves_it_to_that_delivery(app, recorder, clock):
    # Given an operation a first delivery holds (its lease live), past its expires_at
    enqueued(app, "op-held")
    expires_at = clock.now() - 1
    subject_body = timed_body(app, "op-held", expires_at=expires_at)
    operation = app.operations.require("op-held")
    app.operations.state.acquire(
        Subject("op-held", operation.job_type, fingerprint(operation.job_type, operation.payload)), "m-0", 30
    )
    # When a duplicate copy is delivered
    result = deliver(app, "op-held", message_id="m-2", body=subject_body)
    # Then it is not expired over the holder's head, and nothing runs for the copy
    # (the copy comes back when the holder's lease is over: 30 s from now)
    assert (result.outcome, result.reason) == (Outcome.BUSY, f"leased by another delivery until {clock.now() + 30:.0f}")
    assert result.retry_after == pytest.approx(30)
    assert recorder.calls == []
    assert app.operations.require("op-held").state is OperationState.IN_PROGRESS


def test_an_expiry_that_cannot_be_recorded_comes_back_and_stores_nothing(app, recorder, clock, counted, monkeypatch):
    # Given an expired operation, and the state table throttling the expiry's write
    enqueued(app, "op-throttled")
    monkeypatch.setattr(app.operations.state, "expire", throttle)
    # When its message is delivered
    result = deliver(app, "op-throttled", body=timed_body(app, "op-throttled", expires_at=clock.now() - 1))
    # Then it goes back to be tried again, saying what could not be recorded, counted as retried
    assert result.outcome is Outcome.RETRY
    assert result.reason.startswith("could not record EXPIRED: ClientError: ")
    assert counted == [("retried", "mail.notice.v1", 1)]
    assert recorder.calls == []
    monkeypatch.undo()
    assert app.operations.require("op-throttled").state is OperationState.ACCEPTED


def test_a_pause_that_cannot_be_recorded_comes_back_counted_under_its_job_type(app, recorder, counted, monkeypatch):
    # Given a job whose kill switch is off, and the state table throttling the pause's write
    set_toggle("money.credit.v1", "off")
    enqueued(app, "op-off", job_type="money.credit.v1")
    monkeypatch.setattr(app.operations.state, "pause", throttle)
    # When its message is delivered
    result = deliver(app, "op-off")
    # Then it goes back to be tried again, saying what could not be recorded
    assert result.outcome is Outcome.RETRY
    assert result.reason.startswith("could not record PAUSED: ClientError: ")
    assert counted == [("retried", "money.credit.v1", 1)]
    assert recorder.calls == []


@pytest.mark.parametrize("seconds_early", [1, 900, 7200])
def test_a_copy_before_its_run_at_is_handed_back_for_the_time_left(app, recorder, clock, seconds_early):
    # Given an operation due later
    enqueued(app, "op-early")
    run_at = clock.now() + seconds_early
    # When a copy is delivered now
    result = deliver(app, "op-early", body=timed_body(app, "op-early", run_at=run_at))
    # Then it is handed back for the time left, says until when, and nothing runs or is recorded
    assert (result.outcome, result.reason) == (Outcome.EARLY, f"not due until {iso(run_at)}")
    assert result.retry_after == pytest.approx(seconds_early)
    assert recorder.calls == []
    assert app.operations.require("op-early").state is OperationState.ACCEPTED
    # And at its time it runs
    clock.advance(seconds_early)
    assert deliver(app, "op-early", body=timed_body(app, "op-early", run_at=run_at)).outcome is Outcome.SUCCEEDED


@pytest.mark.parametrize(
    ("holder", "outcome"),
    [("holding", Outcome.BUSY), ("settled", Outcome.DUPLICATE)],
    ids=["held by a live lease", "settled"],
)
def test_an_expired_copy_that_cannot_be_expired_is_answered_by_that_one_refused_write(
    app, recorder, clock, holder, outcome
):
    # Given an operation past its expires_at that another delivery holds now, or has already settled
    enqueued(app, "op-taken")
    operation = app.operations.require("op-taken")
    subject = Subject("op-taken", operation.job_type, fingerprint(operation.job_type, operation.payload))
    lease = app.operations.state.acquire(subject, "m-0", 30)
    if holder == "settled":
        assert app.operations.state.settle(lease, OperationState.SUCCEEDED, "done by the first delivery") is None
    body = timed_body(app, "op-taken", expires_at=clock.now() - 1)
    calls = sent(app.clients.dynamodb)
    # When a copy of its message is delivered
    result = deliver(app, "op-taken", message_id="m-2", body=body)
    # Then the refused expiry alone answers it (busy, or a duplicate): no lease is tried for it after all
    assert result.outcome is outcome
    assert tables_called(calls) == [("UpdateItem", app.settings.state_table)]
    assert recorder.calls == []


@pytest.mark.parametrize(
    ("now", "why"),
    [(999.0, Refusal.EARLY), (1_000.0, Refusal.MOVED), (1_001.0, Refusal.MOVED)],
    ids=["a second before its run_at", "at its run_at", "after it"],
)
def test_a_refused_lease_is_early_only_before_the_recorded_run_at(now, why):
    # Given a SCHEDULED record due at t=1000, whose lease was refused (by no holder, no other content)
    record = StateRecord(operation_id="op-1", state=OperationState.SCHEDULED, fingerprint="fp", run_at=1_000.0)
    subject = Subject("op-1", "mail.notice.v1", "fp")
    # Then the refusal is read as early only while its run_at is ahead; from its run_at on, the work is due
    # (as the lease's own condition says), so the record must have moved meanwhile
    assert refusal(record, subject, now) is why


# -- the time left in the Lambda ---------------------------------------------------------------------------


class LeaseWitness:
    """A runner that keeps, at its effect, the lease end the state table holds and the context it was given."""

    def __init__(self, operations) -> None:
        self.operations = operations
        self.lease_until: list[float | None] = []
        self.contexts: list = []

    def load(self, message, ctx):
        return "active"

    def run(self, message, loaded, ctx):
        self.lease_until.append(self.operations.require(ctx.operation_id).state_record.lease_until)
        self.contexts.append(ctx)


def register_witness(app) -> LeaseWitness:
    witness = LeaseWitness(app.operations)
    app.registry.register(
        JobBinding(
            job_type="test.witness.v1",
            message=Notice,
            runner=lambda: witness,
            queue=Queue.CRITICAL,
            policy=Policy.KEYED_EFFECT,
            default_enabled=True,
            max_attempts=3,
        )
    )
    return witness


@pytest.mark.parametrize("remaining_ms", [30_000, 900_000])
def test_a_lease_lasts_the_lambdas_remaining_time_plus_the_grace(app, clock, remaining_ms):
    # Given a job whose runner looks at its stored lease while it runs
    witness = register_witness(app)
    enqueued(app, "op-leased", job_type="test.witness.v1")
    # When its message is delivered with this much time left in the Lambda
    result = deliver(app, "op-leased", remaining_ms=remaining_ms)
    # Then the stored lease ends that time from now plus the grace, so it cannot expire under its live holder
    assert result.outcome is Outcome.SUCCEEDED
    assert witness.lease_until == [pytest.approx(clock.now() + remaining_ms / 1000 + LEASE_GRACE_SECONDS, abs=1e-3)]


def test_the_runner_is_given_the_pipelines_time_margin(app):
    # Given a pipeline that keeps a time margin other than the default one
    witness = register_witness(app)
    enqueued(app, "op-margin", job_type="test.witness.v1")
    pipeline = Pipeline(
        registry=app.registry,
        state=app.operations.state,
        toggles=app.toggles,
        settlement=app.settlement,
        clock=app.clock,
        time_margin_ms=2_500,
    )
    # When a message is delivered to it
    result = pipeline.process(body_of(app, "op-margin"), Delivery("m-1", 1, 3, lambda: 30_000))
    # Then the runner's context stops work at that same margin
    assert result.outcome is Outcome.SUCCEEDED
    [ctx] = witness.contexts
    assert ctx.time_margin_ms == 2_500


def test_a_delivery_with_less_time_left_than_the_margin_is_handed_back_untouched(app, recorder, counted):
    # Given an accepted operation, and a Lambda with a millisecond less left than the pipeline's margin
    enqueued(app, "op-short")
    margin = app.settings.time_margin_ms
    # When its message is delivered
    result = deliver(app, "op-short", remaining_ms=margin - 1)
    # Then it is handed back, saying why, and nothing ran, was recorded or counted
    assert (result.outcome, result.reason, result.error_class) == (
        Outcome.REQUEUE,
        "too little time left to start",
        None,
    )
    assert recorder.calls == []
    assert counted == []
    assert app.operations.require("op-short").state is OperationState.ACCEPTED


def test_a_delivery_with_exactly_the_margin_left_starts(app, recorder):
    # Given an accepted operation, and a Lambda with exactly the pipeline's margin left
    enqueued(app, "op-just-in-time")
    # When its message is delivered
    result = deliver(app, "op-just-in-time", remaining_ms=app.settings.time_margin_ms)
    # Then it runs: only less time than the margin hands a delivery back
    assert result.outcome is Outcome.SUCCEEDED
    assert recorder.effects == ["op-just-in-time"]


@pytest.mark.parametrize(
    ("at", "written"),
    [
        (100.9999996, "1970-01-01T00:01:41.000Z"),  # within half a microsecond of a second: that second, never
        (100.999998, "1970-01-01T00:01:40.999Z"),  # the next second with the last millisecond (a second late)
        (1796597648.9999997, "2026-12-06T22:54:09.000Z"),
        (1796597648.0004, "2026-12-06T22:54:08.000Z"),
        (1.5, "1970-01-01T00:00:01.500Z"),
    ],
)
def test_a_time_is_written_to_its_whole_millisecond_from_its_microsecond_never_a_second_late(at, written):
    # Given a time / When it is written as a stored item writes it / Then it is read to the microsecond (as datetime
    # reads a timestamp) and cut to the millisecond, its second from the same cut
    assert iso(at) == written


@pytest.mark.parametrize(
    "text",
    ["2038-01-30T19:13:45.740Z", "2038-05-19T05:44:55.331Z", "2106-02-18T05:01:31.820Z", "2026-12-07T03:30:00.001Z"],
)
def test_a_time_read_back_from_its_text_is_written_as_the_same_text_past_2038_too(text):
    # Given a stored time past 2**31 seconds, where the float read back from its text may fall below it (found by the
    # explorer, whose clock runs years ahead: a request's run_at written again a millisecond earlier was other
    # content than its producer wrote) / When it is read and written again / Then it is the same text
    assert iso(parse_instant("run_at", text)) == text


def test_every_millisecond_of_a_second_past_2038_reads_back_as_written():
    # Given every millisecond of one second past 2**31 seconds / Then each one's text reads back to the same text
    base = 2**31 + 12_345
    texts = [iso(base + n / 1000) for n in range(1000)]
    assert [iso(parse_instant("run_at", text)) for text in texts] == texts
    assert len(set(texts)) == 1000
