"""Pipeline rules at its edges: input refused at the worker, the jobs table failing under it, and the
counts each outcome publishes (the UNKNOWN one feeds an alarm declared in template.yaml)."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path

import boto3
import pytest

from converge.flow.extensions import Extension, Extensions
from converge.flow.pipeline import Delivery, Pipeline
from converge.flow.registry import JobBinding, Policy, Queue
from converge.flow.settlement import Settlement
from converge.model.envelope import Envelope
from converge.model.errors import LeaseHeld, PermanentError, TransientError
from converge.model.outcomes import Outcome
from converge.model.records import Refused, Subject
from converge.model.request import JobRequest, fingerprint
from converge.model.states import OperationState
from converge.observability import batched_counts, metrics

from .conftest import Notice, deliver, sent, set_toggle, tables_called, throttle
from .sqs_deliveries import Context, dispatch, hold_lease, lambda_event, receive, settle_elsewhere

ROOT_DIR = Path(__file__).resolve().parents[2]


def body_of(app, operation_id: str) -> str:
    """The message the relay sends for a stored operation."""
    operation = app.operations.require(operation_id)
    return Envelope(
        operation_id=operation.operation_id, job_type=operation.job_type, payload=operation.payload
    ).to_body()


def register(app, job_type: str, runner, policy: Policy = Policy.KEYED_EFFECT) -> None:
    """Add a job of the given runner to the app's registry."""
    app.registry.register(
        JobBinding(
            job_type=job_type,
            message=Notice,
            runner=runner,
            queue=Queue.CRITICAL,
            policy=policy,
            default_enabled=True,
            max_attempts=3,
        )
    )


# -- input the worker refuses ------------------------------------------------------------------------------


def test_a_payload_the_job_refuses_at_the_worker_rejects_its_operation_with_the_reason(app, recorder):
    # Given an operation stored with a payload its job's model refuses (written past the enqueue checks)
    app.operations.admit(JobRequest("op-raw", "mail.notice.v1", {"user_id": "not-a-uuid"}))
    # When its message is delivered
    result = deliver(app, "op-raw")
    # Then it is REJECTED, on the operation too, with the field named, and nothing ran
    assert result.outcome is Outcome.REJECTED
    stored = app.operations.require("op-raw")
    assert stored.state is OperationState.REJECTED
    assert stored.last_error is not None and stored.last_error.startswith("InvalidMessage: user_id")
    assert stored.history[-1].reason == stored.last_error
    assert recorder.calls == []


def test_an_unknown_job_type_at_the_worker_rejects_its_operation(app, recorder):
    app.operations.admit(JobRequest("op-old", "retired.job.v1", {"user_id": str(uuid.uuid4())}))
    result = deliver(app, "op-old")
    assert result.outcome is Outcome.REJECTED
    stored = app.operations.require("op-old")
    assert stored.state is OperationState.REJECTED
    assert "UnknownJobType" in (stored.last_error or "")


def test_a_refused_message_does_not_reopen_a_settled_operation(app, recorder):
    # Given an operation that already succeeded, stored with a payload the job's model now refuses
    app.operations.admit(JobRequest("op-done", "mail.notice.v1", {"user_id": "not-a-uuid"}))
    settle_elsewhere(app, "op-done", OperationState.SUCCEEDED, "done earlier")
    # When a late copy of its message arrives / Then it is refused, and the receipt still says SUCCEEDED
    assert deliver(app, "op-done").outcome is Outcome.REJECTED
    assert app.operations.require("op-done").state is OperationState.SUCCEEDED


# -- a delivery that loses the race to its own duplicate ---------------------------------------------------


class SettledMeanwhile:
    """A runner that outlives its lease: meanwhile a duplicate delivery takes the operation over and settles it."""

    def __init__(self, app):
        self.app = app

    def load(self, message, ctx):
        return "active"

    def run(self, message, loaded, ctx):
        self.app.clock.advance(40)  # past this delivery's lease (30 s left + the grace)
        settle_elsewhere(self.app, ctx.operation_id, OperationState.SUCCEEDED, "settled by the duplicate", "duplicate")


def test_a_delivery_whose_duplicate_settled_first_is_a_duplicate_and_records_nothing(app, capsys):
    # Given a job whose operation is settled by a duplicate delivery while this one runs the effect
    register(app, "race.notice.v1", lambda: SettledMeanwhile(app))
    app.enqueue("race.notice.v1", "op-race", {"user_id": str(uuid.uuid4())})
    capsys.readouterr()
    # When this delivery tries to record its own success
    with batched_counts():
        result = deliver(app, "op-race")
    # Then it is a duplicate, counted as such, and the receipt is the duplicate's, written once
    assert (result.outcome, result.reason) == (Outcome.DUPLICATE, "settled by another delivery")
    stored = app.operations.require("op-race")
    assert [entry.reason for entry in stored.history] == ["accepted", "started", "started", "settled by the duplicate"]
    counts = [(doc["job_type"], doc.get("duplicate_skipped")) for doc in published(capsys.readouterr().out)]
    assert ("race.notice.v1", [1.0]) in counts


class LateHandBack:
    """A runner during whose effect an earlier holder, whose lease expired and was taken over, gives it back late."""

    def __init__(self, operations, earlier):
        self.operations, self.earlier = operations, earlier
        self.refused = None

    def load(self, message, ctx):
        return "active"

    def run(self, message, loaded, ctx):
        try:
            self.operations.state.release(self.earlier, "attempt 1 failed; retrying", "TransientError: late")
        except Refused as refused:
            self.refused = refused


def test_an_earlier_holders_late_hand_back_does_not_disturb_the_delivery_that_took_over(app):
    # Given an operation whose first delivery took the lease and then went silent past its end
    runner = None

    def make():
        nonlocal runner
        runner = LateHandBack(app.operations, earlier)
        return runner

    register(app, "race.moved.v1", make)
    app.enqueue("race.moved.v1", "op-moved", {"user_id": str(uuid.uuid4())})
    earlier = hold_lease(app, "op-moved", "earlier-delivery", seconds=30)
    app.clock.advance(31)
    # When a second delivery takes it over, and the first gives its lease back while the second runs
    result = deliver(app, "op-moved", attempt=2)
    # Then the late hand-back is refused (it no longer holds the lease), and the second records its success
    assert runner is not None and runner.refused is not None
    assert runner.refused.current.lease_owner is not None and runner.refused.current.lease_owner != "earlier-delivery"
    assert result.outcome is Outcome.SUCCEEDED
    stored = app.operations.require("op-moved")
    assert stored.state is OperationState.SUCCEEDED
    assert [entry.state for entry in stored.history] == ["ACCEPTED", "IN_PROGRESS", "IN_PROGRESS", "SUCCEEDED"]
    assert (stored.history[-1].reason, stored.attempts, stored.last_error) == ("keyed effect written", 2, None)
    assert stored.state_record.lease_owner is None


class Quiet:
    """A runner whose effect touches nothing converge owns."""

    def load(self, message, ctx):
        return "active"

    def run(self, message, loaded, ctx):
        return None


def test_a_job_on_the_happy_path_reads_nothing_and_writes_twice(app):
    # Given an accepted operation of an effect-then-claim job
    register(app, "test.cheap.v1", Quiet, Policy.EFFECT_THEN_CLAIM)
    app.enqueue("test.cheap.v1", "op-cheap", {"user_id": str(uuid.uuid4())})
    body = body_of(app, "op-cheap")
    calls = sent(app.clients.dynamodb)
    # When it is delivered and succeeds
    result = app.pipeline.process(body, Delivery("m-1", 1, 3, lambda: 30_000))
    assert result.outcome is Outcome.SUCCEEDED
    # Then the pipeline made the lease and the terminal write (the claim) on the state table, nothing else
    state = app.settings.state_table
    assert tables_called(calls) == [("UpdateItem", state), ("UpdateItem", state)]


# -- a disabled job --------------------------------------------------------------------------------------


def test_a_disabled_job_pauses_its_operation_once_and_says_why(app, recorder, capsys):
    # Given the fail-closed money job with its toggle off, and an operation of it on the queue
    set_toggle("money.credit", "off")
    app.enqueue("money.credit.v1", "op-off", {"user_id": str(uuid.uuid4())})
    dispatch(app, "op-off")
    [message] = receive(app)
    capsys.readouterr()
    # When the worker handles it, and then a duplicate of it
    app.worker.handle(lambda_event([message]), Context())
    again = app.pipeline.process(message["Body"], Delivery("m-2", 2, 3, lambda: 30_000))
    # Then the operation is PAUSED once, with the reason, and the pause is counted once, under its job type
    stored = app.operations.require("op-off")
    assert stored.state is OperationState.PAUSED
    assert [(entry.state, entry.reason) for entry in stored.history[1:]] == [("PAUSED", "kill switch is off")]
    assert (again.outcome, again.reason) == (Outcome.PAUSED, "already paused")
    counts = [(doc["job_type"], doc.get("paused")) for doc in published(capsys.readouterr().out)]
    assert [count for count in counts if count[1] is not None] == [("money.credit.v1", [1.0])]
    assert recorder.calls == []


def test_a_disabled_jobs_settled_operation_is_a_duplicate_not_paused(app, recorder):
    # Given an operation that succeeded before its job was switched off
    app.enqueue("money.credit.v1", "op-was-done", {"user_id": str(uuid.uuid4())})
    settle_elsewhere(app, "op-was-done", OperationState.SUCCEEDED, "done earlier")
    # When a late copy of its message arrives while the toggle is off (no parameter: fail-closed)
    result = deliver(app, "op-was-done")
    # Then it is skipped as a duplicate, saying in which state it was found, and stays SUCCEEDED
    assert (result.outcome, result.reason) == (Outcome.DUPLICATE, "already SUCCEEDED")
    assert app.operations.require("op-was-done").state is OperationState.SUCCEEDED


def test_a_disabled_job_pauses_with_one_write_and_no_read(app, capsys):
    # Given a message of the disabled money job, whose operation has no state record yet
    app.enqueue("money.credit.v1", "op-cold", {"user_id": str(uuid.uuid4())})
    body = body_of(app, "op-cold")
    calls = sent(app.clients.dynamodb)
    # When it is delivered
    with batched_counts():
        result = app.pipeline.process(body, Delivery("m-1", 1, 3, lambda: 30_000))
    # Then its state record is created PAUSED by one write, listed for an operator, and counted
    assert (result.outcome, result.reason) == (Outcome.PAUSED, "kill switch is off")
    assert tables_called(calls) == [("UpdateItem", app.settings.state_table)]
    stored = app.operations.require("op-cold")
    assert (stored.state, stored.job_type, stored.attempts) == (OperationState.PAUSED, "money.credit.v1", 0)
    paused = [row["operation_id"] for row in app.operations.listings.list_attention(OperationState.PAUSED).operations]
    assert paused == ["op-cold"]
    counts = [(doc["job_type"], doc.get("paused")) for doc in published(capsys.readouterr().out)]
    assert ("money.credit.v1", [1.0]) in counts


# -- the state table failing under the pipeline -------------------------------------------------------------


def test_when_the_lease_cannot_be_taken_the_message_is_retried_and_nothing_is_written(app, recorder, monkeypatch):
    # Given an accepted operation, and the state table throttling the lease's write
    op = "op-unread"
    app.enqueue("mail.notice.v1", op, {"user_id": str(uuid.uuid4())})
    before, body = app.operations.require(op), body_of(app, op)
    monkeypatch.setattr(app.operations.state, "acquire", throttle)
    # When its message is delivered, even on its last attempt
    result = app.pipeline.process(body, Delivery("m-1", 3, 3, lambda: 30_000))
    monkeypatch.undo()
    # Then it goes back for a retry with the cause, nothing ran and the operation is untouched
    assert result.outcome is Outcome.RETRY
    assert result.reason.startswith("could not take the lease: ClientError: ")
    assert result.error_class == "ClientError"
    assert recorder.calls == []
    assert app.operations.require(op) == before


def test_when_the_outcome_cannot_be_recorded_the_retry_finds_the_work_done(app, recorder, monkeypatch):
    # Given a delivery whose effect succeeds but whose terminal write is throttled
    op = "op-unrecorded"
    app.enqueue("mail.notice.v1", op, {"user_id": str(uuid.uuid4())})
    monkeypatch.setattr(app.operations.state, "settle", throttle)
    result = deliver(app, op)
    monkeypatch.undo()
    # Then the delivery is retried, saying what could not be recorded; the lease stays until it expires
    assert result.outcome is Outcome.RETRY
    assert result.reason.startswith("could not record SUCCEEDED: ClientError: ")
    assert app.operations.require(op).state is OperationState.IN_PROGRESS
    assert recorder.effects == [op]
    # And the retry, once the lease has lapsed, settles it (at worst one duplicate effect, never a loss)
    app.clock.advance(60)
    assert deliver(app, op, attempt=2, message_id="m-2").outcome is Outcome.SUCCEEDED
    assert app.operations.require(op).state is OperationState.SUCCEEDED


# -- what each outcome counts ------------------------------------------------------------------------------


def published(text: str) -> list[dict]:
    """The embedded-metric documents in a captured stdout."""
    documents = []
    for line in text.splitlines():
        if line.startswith("{") and '"_aws"' in line:
            documents.append(json.loads(line))
    return documents


@pytest.fixture
def lambda_environment(template, monkeypatch):
    # The functions' own Powertools settings, from converge's application template's Globals (the service becomes a
    # dimension); the root template's Globals are the team's own functions'
    application = ROOT_DIR / "shared" / "converge" / "application" / "template.yaml"
    for name, value in re.findall(r"^\s+(POWERTOOLS_[A-Z_]+): ([A-Za-z]+)$", application.read_text(), re.M):
        monkeypatch.setenv(name, value)


def test_an_unknown_outcome_publishes_the_count_the_unknown_alarm_sums(
    app, recorder, template, lambda_environment, capsys
):
    # Given the alarm on UNKNOWN operations, as the template declares it
    [query] = [m["Expression"] for m in template["Resources"]["OperationsUnknownAlarm"]["Properties"]["Metrics"]]
    match = re.fullmatch(r"SELECT SUM\((\w+)\) FROM SCHEMA\((\w+), ([\w, ]+)\)", query)
    assert match, query
    metric, namespace, dimensions = match[1], match[2], {d.strip() for d in match[3].split(",")}
    # And a money job whose provider can neither deduplicate nor be asked
    set_toggle("money.credit", "on")
    app.enqueue("money.credit.v1", "op-unknowable", {"user_id": str(uuid.uuid4())})
    dispatch(app, "op-unknowable")
    recorder.drop_response = True
    recorder.provider_can_lookup = False
    capsys.readouterr()
    # When the worker handles it
    app.worker.handle(lambda_event(receive(app)), Context())
    # Then one count is published in exactly the namespace, dimensions and name the alarm reads
    matching = [
        doc
        for doc in published(capsys.readouterr().out)
        for spec in doc["_aws"]["CloudWatchMetrics"]
        if spec["Namespace"] == namespace
        and set(spec["Dimensions"][0]) == dimensions
        and metric in {m["Name"] for m in spec["Metrics"]}
    ]
    assert [(doc["job_type"], doc[metric]) for doc in matching] == [("money.credit.v1", [1.0])]
    assert app.operations.require("op-unknowable").state is OperationState.UNKNOWN


@pytest.mark.parametrize(
    ("case", "metric"),
    [
        ("success", "succeeded"),
        ("no longer needed", "noop"),
        ("transient", "retried"),
        ("permanent", "failed"),
        ("invalid", "rejected"),
        ("unreadable", "retried"),
    ],
)
def test_each_failure_is_counted_under_its_name_per_job_type(app, recorder, monkeypatch, capsys, case, metric):
    # Given an operation whose delivery fails in this way
    op = f"op-{case.replace(' ', '-')}"
    if case == "invalid":  # written past the enqueue checks, and sent past the relay's
        app.operations.admit(JobRequest(op, "mail.notice.v1", {"user_id": "not-a-uuid"}))
        boto3.client("sqs").send_message(QueueUrl=app.settings.queue_url, MessageBody=body_of(app, op))
    else:
        app.enqueue("mail.notice.v1", op, {"user_id": str(uuid.uuid4())})
        dispatch(app, op)
    [message] = receive(app)
    if case == "no longer needed":
        recorder.users[app.operations.require(op).payload["user_id"]] = "deleted"
    elif case == "transient":
        recorder.fail_effect.append(TransientError("provider unavailable"))
    elif case == "permanent":
        recorder.fail_effect.append(PermanentError("template missing"))
    elif case == "unreadable":
        monkeypatch.setattr(app.operations.state, "acquire", throttle)
    capsys.readouterr()
    # When the worker handles it
    app.worker.handle(lambda_event([message]), Context())
    # Then its count is published once, under the job type
    counts = [(doc["job_type"], doc.get(metric)) for doc in published(capsys.readouterr().out)]
    assert ("mail.notice.v1", [1.0]) in counts


def test_a_message_of_no_known_job_is_counted_without_a_job_type(app):
    # Given the batch-wide metric set empty
    metrics.clear_metrics()
    # When a message names a job type nobody registered
    body = json.dumps({"v": 1, "operation_id": "op-x", "job_type": "no.such.v1", "payload": {}})
    result = app.pipeline.process(body, Delivery("m-1", 1, 3, lambda: 30_000))
    # Then it is rejected, and counted once without a job type dimension (none exists to name)
    assert result.outcome is Outcome.REJECTED
    assert metrics.metric_set["rejected"]["Value"] == [1.0]
    metrics.clear_metrics()


def test_a_copy_of_a_settled_operation_is_skipped_and_counted_under_its_job_type(app, recorder, counted):
    # Given an operation that succeeded
    app.enqueue("mail.notice.v1", "op-done", {"user_id": str(uuid.uuid4())})
    assert deliver(app, "op-done").outcome is Outcome.SUCCEEDED
    counted.clear()
    # When a copy of its message comes (SQS delivers at least once)
    result = deliver(app, "op-done", message_id="m-2")
    # Then nothing runs again, and the skip is counted under the job type
    assert result.outcome is Outcome.DUPLICATE
    assert counted == [("duplicate_skipped", "mail.notice.v1", 1)]
    assert recorder.effects == ["op-done"]


def test_a_terminal_write_that_cannot_be_recorded_is_counted_as_retried_under_its_job_type(
    app, recorder, counted, monkeypatch
):
    app.enqueue("mail.notice.v1", "op-unsaved", {"user_id": str(uuid.uuid4())})
    monkeypatch.setattr(app.operations.state, "settle", throttle)
    result = deliver(app, "op-unsaved")
    assert (result.outcome, result.error_class) == (Outcome.RETRY, "ClientError")
    assert counted == [("retried", "mail.notice.v1", 1)]


def test_a_copy_without_its_times_still_waits_for_the_recorded_run_at(app, recorder, clock):
    # Given an operation recorded SCHEDULED for two hours from now
    app.enqueue("mail.notice.v1", "op-later", {"user_id": str(uuid.uuid4())})
    operation = app.operations.require("op-later")
    run_at = clock.now() + 7200
    subject = Subject("op-later", operation.job_type, fingerprint(operation.job_type, operation.payload))
    assert app.operations.state.schedule(subject, run_at, "waiting for its run_at") is None
    # When a copy of its message that carries no run_at is delivered early (a stray or older copy)
    result = deliver(app, "op-later")
    # Then the lease is refused: it is handed back for the time left, and nothing runs
    assert (result.outcome, result.reason) == (Outcome.EARLY, "not due yet (its recorded run_at)")
    assert result.retry_after == pytest.approx(7200)
    assert recorder.calls == []
    # And at exactly its run_at it is due and runs
    clock.advance(7200)
    assert deliver(app, "op-later").outcome is Outcome.SUCCEEDED
    assert app.operations.require("op-later").state is OperationState.SUCCEEDED


# -- work held elsewhere, found by the runner --------------------------------------------------------------


@pytest.mark.parametrize(
    ("held_for", "comes_back_after"),
    [
        (45, 45),  # the holder's lock ends in 45 s: the message waits exactly that long
        (0.5, 0.5),  # less than a second left: it waits that half second, not a rounded-up one
        (0, 0.0),  # ends exactly now: back at once
        (-20, 0.0),  # ended 20 s ago (a stale lock): back at once, never a negative wait
    ],
    ids=["ends later", "ends within a second", "ends now", "already over"],
)
def test_work_held_elsewhere_until_a_known_time_is_handed_back_until_then(
    app, recorder, clock, held_for, comes_back_after
):
    # Given a runner whose effect finds the work locked by another holder, whose lock ends at a known time
    app.enqueue("mail.notice.v1", "op-locked", {"user_id": str(uuid.uuid4())})
    recorder.fail_effect.append(LeaseHeld("the provider's own lock", until=clock.now() + held_for))
    # When its message is delivered
    result = deliver(app, "op-locked")
    # Then it is handed back as busy for the time left on that lock, and the lease is given back for the next delivery
    assert (result.outcome, result.reason, result.error_class) == (
        Outcome.BUSY,
        "LeaseHeld: the provider's own lock",
        "LeaseHeld",
    )
    assert result.retry_after == comes_back_after
    stored = app.operations.require("op-locked")
    assert stored.state is OperationState.IN_PROGRESS
    assert stored.state_record.lease_owner is None
    assert stored.history[-1].reason == "handed back: held elsewhere"


def test_work_held_elsewhere_without_a_known_end_leaves_the_wait_to_the_worker(app, recorder):
    # Given a runner whose effect finds the work locked, without knowing until when
    app.enqueue("mail.notice.v1", "op-locked", {"user_id": str(uuid.uuid4())})
    recorder.fail_effect.append(LeaseHeld("the provider's own lock"))
    # When its message is delivered / Then it is busy with no time of its own (the worker's default wait applies)
    result = deliver(app, "op-locked")
    assert (result.outcome, result.retry_after) == (Outcome.BUSY, None)


def test_a_failure_that_cannot_be_recorded_comes_back_counted_as_retried_under_its_job_type(
    app, recorder, counted, monkeypatch
):
    # Given a job whose effect fails permanently, and the state table throttling the FAILED write
    app.enqueue("mail.notice.v1", "op-unfailed", {"user_id": str(uuid.uuid4())})
    recorder.fail_effect.append(PermanentError("template missing"))
    monkeypatch.setattr(app.operations.state, "settle", throttle)
    # When its message is delivered
    result = deliver(app, "op-unfailed")
    monkeypatch.undo()
    # Then it goes back to be tried again, saying what could not be recorded, counted under its job type
    assert result.outcome is Outcome.RETRY
    assert result.reason.startswith("could not record FAILED: ClientError: ")
    assert counted == [("retried", "mail.notice.v1", 1)]
    assert app.operations.require("op-unfailed").state is OperationState.IN_PROGRESS


# -- extensions given to one pipeline ----------------------------------------------------------------------


def own_pipeline(app, *extensions: Extension) -> Pipeline:
    """A pipeline of the runtime's parts whose settlement has these extensions alone."""
    settlement = Settlement(Extensions(*extensions))
    return Pipeline(
        registry=app.registry, state=app.operations.state, toggles=app.toggles, settlement=settlement, clock=app.clock
    )


class Seen(Extension):
    """An extension that writes down the operation ids of the records it saw arrive."""

    def __init__(self) -> None:
        self.records: list[str] = []

    def before_record(self, pipeline, body, delivery) -> None:
        self.records.append(json.loads(body)["operation_id"])


def test_a_pipeline_given_its_own_extensions_calls_those_instead_of_the_runtimes(app):
    # Given a pipeline built with extensions of its own, and another extension added to the runtime
    own, runtimes = Seen(), Seen()
    pipeline = own_pipeline(app, own)
    app.enqueue("mail.notice.v1", "op-seen", {"user_id": str(uuid.uuid4())})
    app.extensions.add(runtimes)
    try:
        # When a record runs through it
        result = pipeline.process(body_of(app, "op-seen"), Delivery("m-1", 1, 3, lambda: 30_000))
    finally:
        app.extensions.remove(runtimes)
    # Then its own extension saw the record, and the runtime's did not
    assert result.outcome is Outcome.SUCCEEDED
    assert (own.records, runtimes.records) == (["op-seen"], [])


class Arrivals(Extension):
    """An extension that writes down what it was handed as each record arrived: the pipeline and the delivery."""

    def __init__(self) -> None:
        self.seen: list[tuple[object, object]] = []

    def before_record(self, pipeline, body, delivery) -> None:
        self.seen.append((pipeline, delivery))


def test_an_extension_is_told_which_pipeline_a_record_arrives_at_and_with_which_delivery(app):
    # Given a pipeline built with an extension of its own
    arrivals = Arrivals()
    pipeline = own_pipeline(app, arrivals)
    app.enqueue("mail.notice.v1", "op-arrives", {"user_id": str(uuid.uuid4())})
    delivery = Delivery("m-7", 2, 3, lambda: 30_000)
    # When a record runs through it
    result = pipeline.process(body_of(app, "op-arrives"), delivery)
    # Then the extension was handed that very pipeline and that very delivery (its message id and attempt)
    assert result.outcome is Outcome.SUCCEEDED
    [(seen_pipeline, seen_delivery)] = arrivals.seen
    assert seen_pipeline is pipeline
    assert seen_delivery is delivery
    assert (seen_delivery.message_id, seen_delivery.attempt) == ("m-7", 2)


# -- what the runner is given, and what it may answer ------------------------------------------------------


class Witness:
    """A runner that keeps the context it was given for its effect."""

    def __init__(self) -> None:
        self.contexts: list = []

    def load(self, message, ctx):
        return "active"

    def run(self, message, loaded, ctx):
        self.contexts.append(ctx)


def test_the_runner_is_given_the_correlation_id_its_request_was_made_with(app):
    # Given a job whose runner keeps its context, and an operation enqueued under a correlation id
    witness = Witness()
    register(app, "test.witness.v1", lambda: witness)
    app.enqueue("test.witness.v1", "op-traced", {"user_id": str(uuid.uuid4())}, correlation_id="req-42")
    # When its message (carrying that correlation id) is delivered
    result = deliver(app, "op-traced")
    # Then the runner's context carries the correlation id, so its own logs and calls can be traced to the request
    assert result.outcome is Outcome.SUCCEEDED
    [ctx] = witness.contexts
    assert (ctx.operation_id, ctx.correlation_id) == ("op-traced", "req-42")


def test_work_that_is_no_longer_needed_is_settled_as_a_noop_saying_so(app, recorder, counted):
    # Given an operation whose user no longer exists by the time its message arrives
    app.enqueue("mail.notice.v1", "op-gone", {"user_id": str(uuid.uuid4())})
    recorder.users[app.operations.require("op-gone").payload["user_id"]] = "deleted"
    # When it is delivered
    result = deliver(app, "op-gone")
    # Then it ends NOOP with the reason, on the result and in the receipt, counted, and no effect ran
    reason = "nothing to do (already done or no longer needed)"
    assert (result.outcome, result.reason) == (Outcome.NOOP, reason)
    stored = app.operations.require("op-gone")
    assert (stored.state, stored.history[-1].reason) == (OperationState.NOOP, reason)
    assert counted == [("noop", "mail.notice.v1", 1)]
    assert recorder.effects == []


def test_a_body_that_is_no_envelope_is_rejected_and_counted_without_a_job_type(app, recorder, counted):
    # Given a message body that is not JSON at all (no operation, no job type can be read from it)
    body = "this is not an envelope"
    # When it is delivered
    result = app.pipeline.process(body, Delivery("m-1", 1, 3, lambda: 30_000))
    # Then it is rejected with the reason, and counted once as rejected with no job type to name
    assert (result.outcome, result.reason, result.error_class) == (
        Outcome.REJECTED,
        "InvalidMessage: message body is not JSON",
        "InvalidMessage",
    )
    assert counted == [("rejected", None, 1)]
    assert recorder.calls == []
