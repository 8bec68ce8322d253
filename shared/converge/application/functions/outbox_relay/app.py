"""Outbox relay: the jobs table's stream (new and re-dispatched operations) to the SQS queues."""

from converge.runtime import startup

startup.loading()  # on Lambda, no garbage collection while the function loads (converge.runtime.startup)

from converge.runtime import Converge  # noqa: E402
from converge.runtime.handlers import lambda_handler  # noqa: E402

converge = Converge.from_env()
handler = lambda_handler(converge, "relay")
startup.loaded()
