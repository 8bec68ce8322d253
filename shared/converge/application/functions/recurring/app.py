"""Recurring jobs: each schedule passes {"job_type": ...}; a disabled job's tick is a logged skip."""

from converge.runtime import startup

startup.loading()  # on Lambda, no garbage collection while the function loads (converge.runtime.startup)

from converge.runtime import Converge  # noqa: E402
from converge.runtime.handlers import lambda_handler  # noqa: E402

converge = Converge.from_env()
handler = lambda_handler(converge, "recurring")
startup.loaded()
