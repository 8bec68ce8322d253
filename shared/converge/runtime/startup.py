"""A function's start on Lambda: no garbage collection while it loads what it keeps, and none over it afterwards.

A cold start allocates what the function keeps for its whole life (its modules, botocore's service models and
clients, converge's parts) and very little garbage. Python's collector does not know that: it walks the young
objects every 700 allocations and promotes survivors, some 8% of a worker's cold start for nothing found. So on
Lambda a function's `app.py` calls `loading()` before its imports and `loaded()` after them, and a part built on
the first request is built under `kept()`: the collector is off meanwhile, and what was built is then frozen
(`gc.freeze`: moved out of every later collection; reference counting still frees it).

Only on Lambda (its runtime sets AWS_LAMBDA_RUNTIME_API): a process that runs several functions, as the local
cloud does, or a test, keeps Python's collector as it is. This module imports nothing of converge, so that
`loading()` runs before anything else is loaded.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator
from contextlib import contextmanager

LAMBDA_RUNTIME = "AWS_LAMBDA_RUNTIME_API"
"""Set by Lambda's runtime in every function's environment (the address of its runtime API)."""


def on_lambda() -> bool:
    """Whether this process is a Lambda function's own (and not a local cloud's, a test's or a tool's)."""
    return bool(os.environ.get(LAMBDA_RUNTIME))


def loading() -> None:
    """Before a function's imports: the collector off while it loads (on Lambda)."""
    if on_lambda():
        gc.disable()


def loaded() -> None:
    """After them: what was loaded frozen out of later collections, and the collector back on (on Lambda)."""
    if on_lambda():
        gc.freeze()
        gc.enable()


@contextmanager
def kept() -> Iterator[None]:
    """Build something the function keeps (a part, its clients) with the collector off, then freeze it (on Lambda)."""
    if not on_lambda():
        yield
        return
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()
