"""DLQ redrive: moves dead-lettered messages back to their queue, on demand (CLI or a console test event).

Event: the fields of converge.operate.redrive_decision.RedriveRequest, every one optional; its defaults are the
bare `converge dlq redrive`'s (queue "all", max_messages 100, rate_per_second 10, dry_run false), so an empty
test event means what the bare command means. Returns the report, or {"error": "..."} for a bad request.
"""

from converge.runtime import Converge
from converge.runtime.handlers import lambda_handler

converge = Converge.from_env()
handler = lambda_handler(converge, "dlq_redrive")
