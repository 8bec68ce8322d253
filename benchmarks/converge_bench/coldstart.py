"""Cold start: a fresh interpreter imports a worker handler module and processes its first record.

`measure_both()` takes each sample as `python -c "...coldstart import main; main(design)"`. There,
moto (and with it boto3 and botocore, which both designs import anyway) is loaded and the tables and
queues are created first, untimed; then the clock runs over the handler module's import (the
framework, Powertools, pydantic, the job catalogue) and its first invocation with one SQS record,
less the time moto spends answering. converge's worker loads only the benchmark catalogue
(CONVERGE_CATALOGUE=converge_bench.jobs) so that the figure is the framework's, not the reference app's.
The interpreter's environment is a Lambda's (LAMBDA_TASK_ROOT set, tracing off for both designs):
outside Lambda the X-Ray SDK builds a sampling client when it is imported, which no Lambda pays.
"""

from __future__ import annotations

import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
HANDLERS = {
    "converge": ROOT / "functions" / "worker" / "app.py",
    "baseline": ROOT / "benchmarks" / "baseline" / "worker" / "app.py",
}
REGION = "us-east-1"
OPERATION_ID = "cold-0000001"
JOB_TYPE = "bench.noop.v1"


def measure_both(repeats: int = 3) -> dict[str, float]:
    """Median cold start of each design, their fresh interpreters taken in turn (converge, baseline, converge,
    ...) so that a change in the machine's load during the measurement falls on both alike."""
    samples: dict[str, list[float]] = {"converge": [], "baseline": []}
    for _ in range(repeats):
        for design, taken in samples.items():
            taken.append(_sample(design))
    return {design: statistics.median(taken) for design, taken in samples.items()}


def _sample(design: str) -> float:
    completed = subprocess.run(
        [sys.executable, "-c", f"from converge_bench.coldstart import main; main({design!r})"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if completed.returncode != 0:
        raise RuntimeError(f"cold start of {design} failed: {completed.stderr.strip()[-800:]}")
    return float(json.loads(completed.stdout.strip().splitlines()[-1])["cold_start_ms"])


class _Context:
    function_name = "bench-worker"
    function_version = "$LATEST"
    invoked_function_arn = f"arn:aws:lambda:{REGION}:123456789012:function:bench-worker"
    memory_limit_in_mb = 512
    aws_request_id = "cold-start"
    log_group_name = "/aws/lambda/bench-worker"
    log_stream_name = "cold"

    def get_remaining_time_in_millis(self) -> int:
        return 30_000


def _sqs_event(body: dict[str, Any]) -> dict[str, Any]:
    return {
        "Records": [
            {
                "messageId": str(uuid.uuid4()),
                "receiptHandle": "cold-start-receipt",
                "body": json.dumps(body, separators=(",", ":"), sort_keys=True),
                "attributes": {"ApproximateReceiveCount": "1", "SentTimestamp": str(int(time.time() * 1000))},
                "messageAttributes": {},
                "md5OfBody": "",
                "eventSource": "aws:sqs",
                "eventSourceARN": f"arn:aws:sqs:{REGION}:123456789012:jobs",
                "awsRegion": REGION,
            }
        ]
    }


def _table(ddb: Any, name: str, key: str) -> str:
    ddb.create_table(
        TableName=name,
        AttributeDefinitions=[{"AttributeName": key, "AttributeType": "S"}],
        KeySchema=[{"AttributeName": key, "KeyType": "HASH"}],
        BillingMode="PAY_PER_REQUEST",
    )
    return name


def _converge_setup(ddb: Any, queue_url: str, dlq_url: str) -> dict[str, Any]:
    os.environ.update(
        {
            "JOBS_TABLE": _table(ddb, "jobs", "operation_id"),
            "MARKERS_TABLE": _table(ddb, "markers", "pk"),
            "STATE_TABLE": _table(ddb, "state", "operation_id"),
            "TOGGLE_PREFIX": "/converge/dev/toggles",
            "CONVERGE_CATALOGUE": "converge_bench.jobs",
            "DEFAULT_QUEUE_URL": queue_url,
            "QUEUE_NAME": "default",
            "QUEUE_URL": queue_url,
            "DLQ_URL": dlq_url,
            "MAX_RECEIVE_COUNT": "4",
            "POWERTOOLS_SERVICE_NAME": "converge",
        }
    )
    payload = {"item_id": "item-1"}
    # A raw producer item (no state record yet: ACCEPTED), written without importing converge before the clock starts.
    ddb.put_item(
        TableName="jobs",
        Item={
            "operation_id": {"S": OPERATION_ID},
            "job_type": {"S": JOB_TYPE},
            "payload": {"M": {"item_id": {"S": "item-1"}}},
        },
    )
    return {"v": 1, "operation_id": OPERATION_ID, "job_type": JOB_TYPE, "payload": payload, "correlation_id": None}


def _baseline_setup(ddb: Any, queue_url: str, dlq_url: str) -> dict[str, Any]:
    os.environ.update(
        {
            "ENTITY_TABLE": _table(ddb, "entities", "id"),
            "IDEMPOTENCY_TABLE": _table(ddb, "idempotency", "id"),
            "POWERTOOLS_SERVICE_NAME": "baseline",
        }
    )
    ddb.put_item(TableName="entities", Item={"id": {"S": OPERATION_ID}, "status": {"S": "PENDING"}})
    return {"operation_id": OPERATION_ID, "job_type": JOB_TYPE, "payload": {"item_id": "item-1"}}


def main(design: str) -> None:
    """Runs in the fresh interpreter; prints one JSON line."""
    os.environ.update(
        {
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_SESSION_TOKEN": "testing",
            "AWS_REGION": REGION,
            "AWS_DEFAULT_REGION": REGION,
            "POWERTOOLS_TRACE_DISABLED": "true",
            "POWERTOOLS_LOG_LEVEL": "WARNING",
            "POWERTOOLS_METRICS_NAMESPACE": "Bench",
            "AWS_LAMBDA_FUNCTION_NAME": "bench-worker",
            # As Lambda sets it. Outside Lambda the X-Ray SDK, which Powertools' Tracer imports, also builds a
            # sampling client at import (over 100 ms) that a Lambda never pays.
            "LAMBDA_TASK_ROOT": str(HANDLERS[design].parent),
        }
    )
    import boto3
    from moto import mock_aws
    from moto.core.botocore_stubber import BotocoreStubber

    with mock_aws():
        # Setup uses its own session, so the handler starts with no warm default session to reuse.
        setup_session = boto3.session.Session(region_name=REGION)
        ddb = setup_session.client("dynamodb")
        sqs = setup_session.client("sqs")
        queue_url = sqs.create_queue(QueueName="jobs")["QueueUrl"]
        dlq_url = sqs.create_queue(QueueName="jobs-dlq")["QueueUrl"]
        setup = _converge_setup if design == "converge" else _baseline_setup
        event = _sqs_event(setup(ddb, queue_url, dlq_url))

        service = [0.0]
        original = BotocoreStubber.process_request

        def timed(stubber: Any, request: Any) -> Any:
            started = time.perf_counter()
            try:
                return original(stubber, request)
            finally:
                service[0] += time.perf_counter() - started

        BotocoreStubber.process_request = timed  # type: ignore[method-assign]
        boto3.DEFAULT_SESSION = None
        started = time.perf_counter()
        spec = importlib.util.spec_from_file_location(f"cold_{design}_worker", HANDLERS[design])
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        imported = time.perf_counter()
        response = module.handler(event, _Context())
        finished = time.perf_counter()
        BotocoreStubber.process_request = original  # type: ignore[method-assign]
    if response.get("batchItemFailures"):
        raise SystemExit(f"the first record failed: {response}")
    result = {
        "design": design,
        "import_ms": (imported - started) * 1000,
        "first_record_ms": (finished - imported - service[0]) * 1000,
        "cold_start_ms": (finished - started - service[0]) * 1000,
    }
    print(json.dumps(result))
