"""Pipeline observers: hooks that tools plug into the pipeline instead of patching it (Dramatiq's middleware).

An observer is any object with some of these methods; the pipeline calls each at its moment:

    before_record(pipeline, body, delivery)       a delivery is about to run through the pipeline
    before_effect(attempt) / after_effect(attempt)  around the runner's effect (`runner.run`), inside the policy
    before_terminal_write(lease, decision, ctx)   the work is decided; the conditional terminal write is next

An observer may raise to stand for a failure at that moment (a fault injector's crash). Observers belong
to a runtime, as a broker's middleware belongs to its broker: `converge.observers.add(observer)` reaches
the pipeline that runtime builds (the local cloud shares one set among the runtimes of its functions).
With none added, the pipeline pays one truth test per record.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from converge.flow.policies import Attempt


class Observers:
    """An ordered set of observers, called in the order they were added."""

    def __init__(self) -> None:
        self._observers: list[Any] = []

    def add(self, observer: Any) -> None:
        if observer not in self._observers:
            self._observers.append(observer)

    def remove(self, observer: Any) -> None:
        if observer in self._observers:
            self._observers.remove(observer)

    def __bool__(self) -> bool:
        return bool(self._observers)

    def _calls(self, name: str) -> Iterator[Any]:
        for observer in list(self._observers):
            method = getattr(observer, name, None)
            if method is not None:
                yield method

    def before_record(self, pipeline: Any, body: str, delivery: Any) -> None:
        for call in self._calls("before_record"):
            call(pipeline, body, delivery)

    def before_terminal_write(self, lease: Any, decision: Any, ctx: Any) -> None:
        for call in self._calls("before_terminal_write"):
            call(lease, decision, ctx)

    def observed(self, attempt: Attempt) -> Attempt:
        """The attempt with its runner's effect (`run`) between `before_effect` and `after_effect`."""
        return dataclasses.replace(attempt, runner=_ObservedRunner(attempt, self))


class _ObservedRunner:
    """The job's runner as a policy sees it: every method its own, `run` between the observers' calls."""

    def __init__(self, attempt: Attempt, observers: Observers) -> None:
        self._attempt = attempt
        self._inner = attempt.runner
        self._observers = observers

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def run(self, message: Any, loaded: Any, ctx: Any) -> None:
        for call in self._observers._calls("before_effect"):
            call(self._attempt)
        self._inner.run(message, loaded, ctx)
        for call in self._observers._calls("after_effect"):
            call(self._attempt)
