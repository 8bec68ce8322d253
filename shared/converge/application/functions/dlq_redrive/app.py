"""DLQ redrive: moves dead-lettered messages back to their queue, on demand (CLI or a console test event).

Event: the fields of converge.operate.redrive_decision.RedriveRequest, every one optional; its defaults are the
bare `converge dlq redrive`'s (queue "all", max_messages 100, rate_per_second 10, dry_run false), so an empty
test event means what the bare command means. Returns the report, or {"error": "..."} for a bad request.
"""

from converge.runtime import startup

startup.loading()  # on Lambda, no garbage collection while the function loads (converge.runtime.startup)

from converge.runtime import Converge  # noqa: E402
from converge.runtime.handlers import lambda_handler  # noqa: E402

converge = Converge.from_env()
handler = lambda_handler(converge, "dlq_redrive")
startup.loaded()
