"""Batch counter: the state table's stream (batch children made final) to their batches' counts and callbacks."""

from converge.runtime import startup

startup.loading()  # on Lambda, no garbage collection while the function loads (converge.runtime.startup)

from converge.runtime import Converge  # noqa: E402
from converge.runtime.handlers import lambda_handler  # noqa: E402

converge = Converge.from_env()
handler = lambda_handler(converge, "batch_counter")
startup.loaded()
