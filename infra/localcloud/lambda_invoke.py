"""Route moto's Lambda Invoke API to the local cloud's in-process functions.

moto would run a function's code in Docker. Instead, while a local cloud is running, an Invoke of one of
its functions (by name or ARN, through any client: a test's boto3, the `converge` CLI, the AWS CLI
against the server) runs the real handler in-process with the function's environment. The response
follows Lambda: the handler's JSON result, or for an exception an error payload with the
X-Amz-Function-Error header "Unhandled". Functions no running cloud knows fall through to moto.
"""

from __future__ import annotations

import json
import threading
import traceback
from typing import Any

from moto.awslambda.models import LambdaFunction

from .functions import FunctionRuntime

_lock = threading.Lock()
_runtimes: dict[str, tuple[FunctionRuntime, str]] = {}  # function ARN -> (runtime, logical id)
_original_invoke = LambdaFunction.invoke


def register(runtime: FunctionRuntime) -> None:
    with _lock:
        for spec in runtime.specs.values():
            _runtimes[spec.arn] = (runtime, spec.logical_id)
        LambdaFunction.invoke = _invoke  # type: ignore[method-assign]


def unregister(runtime: FunctionRuntime) -> None:
    with _lock:
        for arn in [arn for arn, (rt, _) in _runtimes.items() if rt is runtime]:
            del _runtimes[arn]
        if not _runtimes:
            LambdaFunction.invoke = _original_invoke  # type: ignore[method-assign]


def _invoke(self: LambdaFunction, body: str, request_headers: Any, response_headers: Any) -> str | bytes:
    target = _runtimes.get(self.function_arn)
    if target is None:
        return _original_invoke(self, body, request_headers, response_headers)
    runtime, logical_id = target
    event = json.loads(body) if body else {}
    try:
        result = runtime.invoke(logical_id, event)
    except Exception as exc:
        response_headers["x-amz-function-error"] = "Unhandled"
        payload = {
            "errorMessage": str(exc),
            "errorType": type(exc).__name__,
            "stackTrace": traceback.format_tb(exc.__traceback__),
        }
        return json.dumps(payload).encode()
    if request_headers.get("x-amz-invocation-type") == "Event":
        return b""
    return json.dumps(result).encode()
