"""Enqueue API (API Gateway HTTP API, IAM auth): POST /jobs/{job_type}, GET /operations/{id} (the caller's
own), POST /operations/{id}/cancel (the caller's own), GET /admin/operations/{id} (any, for principals
IAM grants that route), POST /operations/{id}/signals/{name} (the caller's own) and
POST /admin/operations/{id}/signals/{name} (any).
"""

from converge.runtime import startup

startup.loading()  # on Lambda, no garbage collection while the function loads (converge.runtime.startup)

from converge.runtime import Converge  # noqa: E402
from converge.runtime.handlers import lambda_handler  # noqa: E402

converge = Converge.from_env()
handler = lambda_handler(converge, "enqueue_api")
startup.loaded()
