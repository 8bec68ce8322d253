"""The API reference's view of `converge.model.submission.submits`: a griffe extension (mkdocs.yml loads it).

The reference is read from the source, without running it, so a function decorated with `@submits.function` (or
a method with `@submits.method`) would show the one `submission` it receives. Callers pass
`converge.model.submission.submission`'s parameters instead; this shows those, after a method's `self`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import griffe

DECORATORS = {"submits.function": 0, "submits.method": 1}
"""The decorators, and how many of the function's own leading parameters stay (a method's `self`)."""
SHARED = Path(__file__).resolve().parent.parent / "shared"


class SubmitsParameters(griffe.Extension):
    """Gives every function decorated with `submits` the builder's parameters in the API reference."""

    def __init__(self) -> None:
        self._built: griffe.Parameters | None = None

    def on_function_instance(self, *, func: griffe.Function, **kwargs: Any) -> None:
        own = next((DECORATORS[str(d.value)] for d in func.decorators if str(d.value) in DECORATORS), None)
        if own is None:
            return
        kept = list(func.parameters)[:own]
        func.parameters = griffe.Parameters(*kept, *self._builder_parameters())

    def _builder_parameters(self) -> griffe.Parameters:
        if self._built is None:
            module = griffe.load("converge.model.submission", search_paths=[str(SHARED)])
            builder = module["submission"]
            assert isinstance(builder, griffe.Function)
            self._built = builder.parameters
        return self._built
