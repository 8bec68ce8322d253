"""The API reference's view of `converge.model.submission.submits`: a griffe extension (mkdocs.yml loads it).

The reference is read from the source, without running it, so a function decorated with `@submits.function` (or
a method with `@submits.method`, or `submits_batch`'s or `submits_signal`'s) would show the one submission it
receives. Callers pass the builder's parameters instead (`converge.model.submission.submission`,
`batch_submission` or `signal_submission`); this shows those, after a method's `self`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import griffe

BUILDERS = {"submits": "submission", "submits_batch": "batch_submission", "submits_signal": "signal_submission"}
"""Each decorator object of `converge.model.submission`, and the builder whose parameters it gives."""
KEPT = {"function": 0, "method": 1}
"""How many of the decorated function's own leading parameters stay (a method's `self`)."""
SHARED = Path(__file__).resolve().parent.parent / "shared"


class SubmitsParameters(griffe.Extension):
    """Gives every function decorated with `submits` the builder's parameters in the API reference."""

    def __init__(self) -> None:
        self._built: dict[str, griffe.Parameters] = {}

    def on_function_instance(self, *, func: griffe.Function, **kwargs: Any) -> None:
        for decorator in func.decorators:
            holder, _, kind = str(decorator.value).partition(".")
            if holder in BUILDERS and kind in KEPT:
                kept = list(func.parameters)[: KEPT[kind]]
                func.parameters = griffe.Parameters(*kept, *self._builder_parameters(BUILDERS[holder]))
                return

    def _builder_parameters(self, name: str) -> griffe.Parameters:
        if name not in self._built:
            module = griffe.load("converge.model.submission", search_paths=[str(SHARED)])
            builder = module[name]
            assert isinstance(builder, griffe.Function)
            self._built[name] = builder.parameters
        return self._built[name]
