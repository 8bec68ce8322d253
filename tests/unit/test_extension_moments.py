"""The pipeline's moments as extensions see them: tools plug in there instead of patching the pipeline."""

from __future__ import annotations

import uuid
from types import SimpleNamespace

import pytest

from converge.flow import pipeline as pipeline_module
from converge.flow import policies as policies_module
from converge.flow.extensions import Extension, Extensions
from converge.flow.pipeline import Pipeline
from converge.flow.settlement import Settlement
from converge.model.outcomes import Outcome
from converge.model.states import OperationState

from .conftest import body_of, deliver


class Recording(Extension):
    """Writes down each moment it sees, with what the effect had done by then."""

    def __init__(self, recorder) -> None:
        self.recorder = recorder
        self.moments: list[tuple[str, int]] = []
        self.terminal: list[tuple[str, str, str, str]] = []  # the lease's operation and owner, the job's id and type

    def before_record(self, pipeline, body, delivery) -> None:
        self.moments.append(("before_record", len(self.recorder.effects)))

    def before_effect(self, attempt) -> None:
        self.moments.append(("before_effect", len(self.recorder.effects)))

    def after_effect(self, attempt) -> None:
        self.moments.append(("after_effect", len(self.recorder.effects)))

    def before_terminal_write(self, lease, decision, ctx) -> None:
        self.moments.append((f"before_terminal_write:{decision.state.value}", len(self.recorder.effects)))
        self.terminal.append((lease.operation_id, lease.owner, ctx.operation_id, ctx.job_type))


class Crash(BaseException):
    """A process that dies: not an error the pipeline may classify."""


@pytest.fixture
def observing(app, recorder):
    extension = Recording(recorder)
    app.extensions.add(extension)
    yield extension
    app.extensions.remove(extension)


def test_an_observer_sees_each_moment_in_order(app, recorder, observing):
    # Given an admitted operation and an observer added to the runtime
    operation_id = f"op-{uuid.uuid4().hex[:8]}"
    app.enqueue("mail.notice.v1", operation_id, {"user_id": str(uuid.uuid4())})
    # When its message is delivered
    assert deliver(app, operation_id, body=body_of(app, operation_id)).outcome is Outcome.SUCCEEDED
    # Then the observer saw the record, the effect (before: none yet, after: one) and the terminal write
    assert observing.moments == [
        ("before_record", 0),
        ("before_effect", 0),
        ("after_effect", 1),
        ("before_terminal_write:SUCCEEDED", 1),
    ]
    # And the terminal write's moment was handed the delivery's lease and the job's context
    [(leased, owner, job, job_type)] = observing.terminal
    assert (leased, job, job_type) == (operation_id, operation_id, "mail.notice.v1")
    assert owner.startswith("m-1")  # the lease is the delivery's (its message id)


def test_an_observer_that_raises_before_the_terminal_write_leaves_the_operation_leased(app, recorder):
    # Given an observer that crashes the process after the effect, before the claim
    class Crasher(Extension):
        def before_terminal_write(self, lease, decision, ctx) -> None:
            raise Crash()

    crasher = Crasher()
    app.extensions.add(crasher)
    operation_id = f"op-{uuid.uuid4().hex[:8]}"
    app.enqueue("mail.notice.v1", operation_id, {"user_id": str(uuid.uuid4())})
    try:
        # When its message is delivered / Then the crash escapes the pipeline (no outcome is recorded)
        with pytest.raises(Crash):
            deliver(app, operation_id, body=body_of(app, operation_id))
    finally:
        app.extensions.remove(crasher)
    # And the effect happened while the stored operation is still IN_PROGRESS under its lease
    assert recorder.effects == [operation_id]
    assert app.operations.require(operation_id).state is OperationState.IN_PROGRESS


def test_a_pipeline_with_its_own_extensions_ignores_the_runtimes(app, recorder, observing):
    # Given a pipeline built with an empty set of its own
    settlement = Settlement(Extensions())
    app.pipeline = Pipeline(
        registry=app.registry, state=app.operations.state, toggles=app.toggles, settlement=settlement, clock=app.clock
    )
    operation_id = f"op-{uuid.uuid4().hex[:8]}"
    app.enqueue("mail.notice.v1", operation_id, {"user_id": str(uuid.uuid4())})
    # When a message is delivered / Then the runtime's extension saw nothing
    deliver(app, operation_id, body=body_of(app, operation_id))
    assert observing.moments == []


def test_the_fault_injector_patches_nothing_of_converge():
    # Given converge's pipeline and policies as they are
    from localcloud.faults import FaultInjector

    process, policies = pipeline_module.Pipeline.process, dict(policies_module.POLICIES)

    # (the injector follows a cloud's invocations through its runtime, and its schedules' firings through their
    # hooks; nothing else of a cloud is needed here)
    cloud = SimpleNamespace(
        functions={},
        runtime=SimpleNamespace(invoke=lambda *args: None, extensions=Extensions(), log_listeners=[]),
        one_time_schedules=SimpleNamespace(failing=None, duplicating=None),
    )
    injector = FaultInjector(cloud, seed=1)
    # When the injector is installed
    with injector.installed():
        # Then it observes through the hooks, and the pipeline's class and the policies' table are untouched
        assert list(cloud.runtime.extensions)[-1] is injector
        assert pipeline_module.Pipeline.process is process
        assert policies == policies_module.POLICIES
    assert injector not in list(cloud.runtime.extensions) and cloud.runtime.log_listeners == []
    assert (cloud.one_time_schedules.failing, cloud.one_time_schedules.duplicating) == (None, None)


class Skipping(Extension):
    def __init__(self) -> None:
        self.released_for: list[str] = []

    def hold(self, envelope, binding, lease_until, accepted_at=None):
        from converge.flow.extensions import Skip

        return Skip("done elsewhere")

    def released(self, envelope, binding) -> None:
        self.released_for.append(envelope.operation_id)


class Holding(Skipping):
    def hold(self, envelope, binding, lease_until, accepted_at=None):
        from converge.flow.extensions import Hold

        return Hold(lease_until + 60, "held", alone=False)


def test_a_skip_wins_and_carries_the_others_hold_for_a_job_that_started_before() -> None:
    # Given an extension that skips a job and one after it that holds it
    from converge.flow.extensions import Skip

    skipping, holding = Skipping(), Holding()
    extensions = Extensions(skipping, holding)
    envelope, binding = SimpleNamespace(operation_id="op-1"), SimpleNamespace()
    # When a job is about to start
    decided = extensions.hold(envelope, binding, 100.0)
    # Then the skip wins, with the other's hold as what a started job meets instead, and both are told it ended
    assert isinstance(decided, Skip) and decided.reason == "done elsewhere"
    assert decided.otherwise is not None and decided.otherwise.until == 160.0
    extensions.released(envelope, binding)
    assert skipping.released_for == holding.released_for == ["op-1"]
