"""The one list of a producer's parameters (`converge.model.submission`) and what it gives the public functions."""

from __future__ import annotations

import inspect

import pytest

import converge
from converge.model.batches import BatchCallback, BatchChild
from converge.model.submission import (
    BatchSubmission,
    SignalSubmission,
    Submission,
    batch_submission,
    signal_submission,
    submission,
    submits,
)
from converge.runtime import Converge


def test_the_public_functions_and_the_runtimes_methods_take_the_builders_parameters() -> None:
    # Given the builder's parameters
    built = list(inspect.signature(submission).parameters)
    assert built == ["job_type", "operation_id", "payload", "correlation_id", "run_at", "expires_at"]
    # Then converge.enqueue, converge.enqueue_put and the runtime's two methods show exactly those
    for function in (converge.enqueue, converge.enqueue_put):
        assert list(inspect.signature(function).parameters) == built
    for method in (Converge.enqueue, Converge.enqueue_put):
        assert list(inspect.signature(method).parameters) == ["self", *built]
    # And each keeps its own name, docstring and return annotation
    assert converge.enqueue.__name__ == "enqueue" and "Admit a job" in (converge.enqueue.__doc__ or "")
    assert inspect.signature(converge.enqueue_put).return_annotation == "dict[str, Any]"


def test_a_batch_is_submitted_with_the_batch_builders_parameters_and_carried_as_one_value() -> None:
    # Given the batch builder's parameters
    built = list(inspect.signature(batch_submission).parameters)
    assert built == ["batch_id", "children", "callback"]
    # Then converge.enqueue_batch and the runtime's method show exactly those
    assert list(inspect.signature(converge.enqueue_batch).parameters) == built
    assert list(inspect.signature(Converge.enqueue_batch).parameters) == ["self", *built]
    assert converge.enqueue_batch.__name__ == "enqueue_batch" and "Idempotent" in (converge.enqueue_batch.__doc__ or "")
    # And what a caller passes, children from a generator among them, arrives as one frozen value, with no caller
    children = (BatchChild(f"k{n}", "mail.v1", {"n": n}) for n in range(2))
    made = batch_submission("b-1", children, callback=BatchCallback("done.v1", {}))
    assert made == BatchSubmission(
        "b-1",
        (BatchChild("k0", "mail.v1", {"n": 0}), BatchChild("k1", "mail.v1", {"n": 1})),
        BatchCallback("done.v1", {}),
    )
    assert made.submitted_by is None
    with pytest.raises(TypeError, match="submitted_by"):
        converge.enqueue_batch("b-1", [], BatchCallback("done.v1", {}), submitted_by="someone")  # type: ignore[call-arg]


def test_a_signal_is_sent_with_the_signal_builders_parameters_and_carried_as_one_value() -> None:
    # Given the signal builder's parameters
    built = list(inspect.signature(signal_submission).parameters)
    assert built == ["operation_id", "name", "payload", "signal_id"]
    # Then converge.signal, converge.signal_put and the runtime's two methods show exactly those
    for function in (converge.signal, converge.signal_put):
        assert list(inspect.signature(function).parameters) == built
    for method in (Converge.signal, Converge.signal_put):
        assert list(inspect.signature(method).parameters) == ["self", *built]
    assert converge.signal.__name__ == "signal" and "ctx.wait_for" in (converge.signal.__doc__ or "")
    assert inspect.signature(converge.signal_put).return_annotation == "dict[str, Any]"
    # And what a producer passes arrives as one frozen value sent by `producer` (another sender builds its own)
    assert signal_submission("op-1", "approval", {"decision": "approved"}, signal_id="ap-1") == SignalSubmission(
        "op-1", "approval", {"decision": "approved"}, "ap-1", "producer"
    )
    assert signal_submission("op-1", "approval") == SignalSubmission("op-1", "approval", None, None, "producer")
    with pytest.raises(TypeError, match="sent_by"):
        converge.signal("op-1", "approval", {}, sent_by="someone")  # type: ignore[call-arg]


def test_a_decorated_function_receives_the_submission_built_from_what_its_caller_passed() -> None:
    received: list[Submission] = []

    @submits.function
    def act(made: Submission) -> str:
        received.append(made)
        return "acted"

    class Owner:
        @submits.method
        def act(self, made: Submission) -> Owner:
            received.append(made)
            return self

    # When a caller passes positions and keywords, to a function and to a method
    assert act("mail.v1", "op-1", {"a": 1}, "corr", run_at="2027-01-01T00:00:00Z") == "acted"
    owner = Owner()
    assert owner.act("mail.v1", "op-2", {}, expires_at="2027-01-02T00:00:00Z") is owner
    # Then each received one submission with those values, and no caller (the API alone sets it)
    assert received == [
        Submission("mail.v1", "op-1", {"a": 1}, "corr", None, "2027-01-01T00:00:00Z", None),
        Submission("mail.v1", "op-2", {}, None, None, None, "2027-01-02T00:00:00Z"),
    ]


def test_a_parameter_the_builder_does_not_have_is_refused_before_anything_runs() -> None:
    called: list[Submission] = []

    @submits.function
    def act(made: Submission) -> None:
        called.append(made)

    # When a caller passes a caller of its own, or too few arguments
    with pytest.raises(TypeError, match="submitted_by"):
        act("mail.v1", "op-1", {}, submitted_by="someone")  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="payload"):
        act("mail.v1", "op-1")  # type: ignore[call-arg]
    # Then nothing acted
    assert called == []


def test_the_api_reference_shows_the_builders_parameters() -> None:
    # Given the API reference's reading of converge from its source, with the extension mkdocs.yml loads
    griffe = pytest.importorskip("griffe", reason="the docs tooling: not in the mutation run")
    from griffe_submits import SHARED, SubmitsParameters

    package = griffe.load("converge", search_paths=[str(SHARED)], extensions=griffe.load_extensions(SubmitsParameters))
    # Then the public functions and the runtime's methods read with the builder's parameters
    built = ["job_type", "operation_id", "payload", "correlation_id", "run_at", "expires_at"]
    assert [p.name for p in package["enqueue"].parameters] == built
    assert [p.name for p in package["enqueue_put"].parameters] == built
    assert [p.name for p in package["runtime.root.Converge.enqueue"].parameters] == ["self", *built]
    batch = ["batch_id", "children", "callback"]
    assert [p.name for p in package["enqueue_batch"].parameters] == batch
    assert [p.name for p in package["runtime.root.Converge.enqueue_batch"].parameters] == ["self", *batch]
    signal = ["operation_id", "name", "payload", "signal_id"]
    for name in ("signal", "signal_put"):
        assert [p.name for p in package[name].parameters] == signal
        assert [p.name for p in package[f"runtime.root.Converge.{name}"].parameters] == ["self", *signal]
    # And a function without the decorator keeps its own
    assert [p.name for p in package["cancel"].parameters] == ["operation_id", "reason", "actor"]
