"""A handler that records what it saw: the environment at import (cold start) and per invocation."""

import os

environment_at_import = {key: os.environ.get(key) for key in ("FLAVOUR", "PROBE_TABLE", "WORK_QUEUE_URL")}
seen: list[dict] = []


def handler(event, context):
    seen.append(
        {
            "event": event,
            "flavour": os.environ.get("FLAVOUR"),
            "function_name": context.function_name,
            "remaining_ms": context.get_remaining_time_in_millis(),
        }
    )
    return {"batchItemFailures": []}
