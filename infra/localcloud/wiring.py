"""Read what the local cloud emulates out of the transformed template, resolved against the stack.

Functions (code, handler, timeout, memory, environment), event source mappings, EventBridge rules and
Scheduler schedules all come from here; nothing is named by hand, so the template stays the single
source of truth.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .clients import ACCOUNT_ID, Clients
from .functions import FunctionSpec
from .intrinsics import Resolver, is_deployed
from .patterns import parse_pattern
from .rules import EventRule, Target
from .sqs_source import SqsMapping, parse_filters
from .stack import StackResources
from .stream_source import StreamMapping

LAMBDA_DEFAULT_TIMEOUT = 3
LAMBDA_DEFAULT_MEMORY = 128


def _environment_value(value: Any) -> str:
    # Lambda environment values are strings; CloudFormation renders numbers and booleans as text.
    if isinstance(value, bool):
        return "true" if value else "false"
    return value if isinstance(value, str) else json.dumps(value) if isinstance(value, dict | list) else str(value)


def function_specs(
    resources: dict[str, dict[str, Any]], resolver: Resolver, stack: StackResources, code_dirs: dict[str, Path]
) -> dict[str, FunctionSpec]:
    specs: dict[str, FunctionSpec] = {}
    for logical_id, resource in resources.items():
        if resource.get("Type") != "AWS::Lambda::Function" or not is_deployed(resource, resolver):
            continue
        if logical_id not in code_dirs:
            continue  # inline or pre-packaged code: nothing local to run
        props = resolver.resolve(resource.get("Properties", {}))
        name = stack.ref(logical_id)
        variables = (props.get("Environment") or {}).get("Variables") or {}
        log_group = (props.get("LoggingConfig") or {}).get("LogGroup") or f"/aws/lambda/{name}"
        specs[logical_id] = FunctionSpec(
            logical_id=logical_id,
            name=name,
            arn=stack.get_att(logical_id, "Arn"),
            code_dir=code_dirs[logical_id],
            handler=props.get("Handler", "app.handler"),
            runtime=props.get("Runtime", "python3"),
            timeout=int(props.get("Timeout", LAMBDA_DEFAULT_TIMEOUT)),
            memory_mb=int(props.get("MemorySize", LAMBDA_DEFAULT_MEMORY)),
            log_group_name=log_group,
            environment={key: _environment_value(value) for key, value in variables.items()},
        )
    return specs


def _function_id(reference: str, specs: dict[str, FunctionSpec]) -> str | None:
    """Function logical id for a name or ARN (qualifiers ignored), if it is one of ours."""
    for spec in specs.values():
        if reference in (spec.name, spec.arn) or reference.startswith(spec.arn + ":"):
            return spec.logical_id
    return None


def event_source_mappings(
    resources: dict[str, dict[str, Any]], resolver: Resolver, specs: dict[str, FunctionSpec], clients: Clients
) -> tuple[list[SqsMapping], list[StreamMapping]]:
    queues: list[SqsMapping] = []
    streams: list[StreamMapping] = []
    for logical_id, resource in resources.items():
        if resource.get("Type") != "AWS::Lambda::EventSourceMapping" or not is_deployed(resource, resolver):
            continue
        props = resolver.resolve(resource["Properties"])
        function_id = _function_id(props["FunctionName"], specs)
        if function_id is None:
            continue
        source_arn: str = props["EventSourceArn"]
        service = source_arn.split(":")[2]
        common = {
            "logical_id": logical_id,
            "function_id": function_id,
            "batching_window": float(props.get("MaximumBatchingWindowInSeconds", 0)),
            "report_batch_item_failures": "ReportBatchItemFailures" in (props.get("FunctionResponseTypes") or []),
            "filters": parse_filters(props.get("FilterCriteria")),
            "enabled": bool(props.get("Enabled", True)),
        }
        if service == "sqs":
            url = clients("sqs").get_queue_url(QueueName=source_arn.rsplit(":", 1)[-1])["QueueUrl"]
            cap = (props.get("ScalingConfig") or {}).get("MaximumConcurrency")
            queues.append(
                SqsMapping(
                    queue_url=url,
                    queue_arn=source_arn,
                    batch_size=int(props.get("BatchSize", 10)),
                    maximum_concurrency=int(cap) if cap is not None else None,
                    **common,
                )
            )
        elif service == "dynamodb":
            on_failure = ((props.get("DestinationConfig") or {}).get("OnFailure") or {}).get("Destination")
            streams.append(
                StreamMapping(
                    function_arn=specs[function_id].arn,
                    stream_arn=source_arn,
                    batch_size=int(props.get("BatchSize", 100)),
                    starting_position=props.get("StartingPosition", "TRIM_HORIZON"),
                    bisect_on_error=bool(props.get("BisectBatchOnFunctionError", False)),
                    max_retry_attempts=int(props.get("MaximumRetryAttempts", -1)),
                    max_record_age=int(props.get("MaximumRecordAgeInSeconds", -1)),
                    on_failure_arn=on_failure,
                    **common,
                )
            )
        else:
            raise ValueError(f"{logical_id}: event source {service} is not emulated by the local cloud")
    return queues, streams


def event_rules(
    resources: dict[str, dict[str, Any]],
    resolver: Resolver,
    stack: StackResources,
    specs: dict[str, FunctionSpec],
    clients: Clients,
) -> list[EventRule]:
    rules: list[EventRule] = []
    for logical_id, resource in resources.items():
        kind = resource.get("Type")
        if kind not in ("AWS::Events::Rule", "AWS::Scheduler::Schedule") or not is_deployed(resource, resolver):
            continue
        props = resolver.resolve(resource.get("Properties", {}))
        if kind == "AWS::Events::Rule":
            if props.get("EventBusName", "default") != "default":
                continue
            name = stack.ref(logical_id)
            arn = stack.get_att(logical_id, "Arn")
            raw_targets = props.get("Targets") or []
            pattern = props.get("EventPattern")
            rules.append(
                EventRule(
                    logical_id=logical_id,
                    name=name,
                    arn=arn,
                    targets=[_target(t, specs) for t in raw_targets],
                    schedule=props.get("ScheduleExpression"),
                    pattern=parse_pattern(pattern) if pattern is not None else None,
                    enabled=props.get("State", "ENABLED") == "ENABLED",
                )
            )
        else:
            name = props.get("Name") or logical_id
            arn = f"arn:aws:scheduler:{clients.region}:{ACCOUNT_ID}:schedule/default/{name}"
            rules.append(
                EventRule(
                    logical_id=logical_id,
                    name=name,
                    arn=arn,
                    targets=[_target(props["Target"], specs)],
                    schedule=props["ScheduleExpression"],
                    enabled=props.get("State", "ENABLED") == "ENABLED",
                    is_scheduler_schedule=True,
                )
            )
    return rules


def _target(raw: dict[str, Any], specs: dict[str, FunctionSpec]) -> Target:
    raw_input = raw.get("Input")
    if isinstance(raw_input, dict | list):
        raw_input = json.dumps(raw_input)
    return Target(arn=raw["Arn"], input=raw_input, function_id=_function_id(raw["Arn"], specs))
