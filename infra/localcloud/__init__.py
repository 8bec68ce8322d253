"""The local cloud: template.yaml deployed into moto, its event sources emulated in-process.

`LocalCloud` (cloud.py) is the entry point for tests and the demo; `server.serve` runs the same cloud
behind a loopback moto server for the AWS CLI. One concept per module:

    template.py        read the SAM template, transform it offline with the SAM translator
    packaging.py       zip and upload CodeUri/ContentUri directories (what `sam package` does)
    deployment.py      package -> transform -> gaps -> moto CloudFormation stack "converge"
    stack.py           deploy a stack; Ref/GetAtt of its resources, looked up from the services
    intrinsics.py      Ref, GetAtt, Sub, Join, FindInMap, If and conditions, resolved against the stack
    gaps.py            what moto's CloudFormation skips or ignores, provisioned through the APIs
    wiring.py          functions, event source mappings and rules read from the transformed template
    functions.py       handler modules imported by path, per-function environment, Lambda context
    clock.py           the emulated clock; sqs_time.py ages moto's SQS messages when it advances
    sqs_source.py      SQS event source mapping      stream_source.py  DynamoDB stream mapping
    destinations.py    on-failure invocation records  patterns.py       EventBridge/Lambda filter patterns
    rules.py           EventBridge rules and targets  schedules.py      rate/cron schedules, tick()
    parameter_events.py  SSM "Parameter Store Change" events, detected by polling versions
    lambda_invoke.py   moto's Lambda Invoke API routed to the in-process handlers
    iam/               each function's AWS calls authorised against its role's policies, as IAM would
    http_api.py        API Gateway HTTP APIs (payload 2.0); api_server.py serves them in server mode
    cloud.py           LocalCloud: deploy, drain(), advance(), tick_schedules(), invoke(), http()
    server.py          server mode: serve(port, outputs_file, seed, on_ready)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .cloud import DrainStats, LocalCloud
    from .functions import FunctionSpec, LambdaContext, LambdaTimeoutError

__all__ = ["DrainStats", "FunctionSpec", "LambdaContext", "LambdaTimeoutError", "LocalCloud"]

_HOMES = {
    "DrainStats": "cloud",
    "LocalCloud": "cloud",
    "FunctionSpec": "functions",
    "LambdaContext": "functions",
    "LambdaTimeoutError": "functions",
}


def __getattr__(name: str) -> Any:
    """The entry points are imported when first named: the package's light modules (template.py, read by the
    command line to find queue caps and outputs) do not pull moto in, which takes seconds to import."""
    if name in _HOMES:
        return getattr(importlib.import_module(f".{_HOMES[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
