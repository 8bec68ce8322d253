"""SnapStart, safe by construction: one initialised worker, snapshotted, restored twice.

A snapshot is emulated as Lambda takes one: the runtime's before-snapshot hooks run in an initialised
worker, then the process forks twice (two execution environments restored from the same memory), and
each child runs the after-restore hooks. Forked children share nothing in memory, so the AWS they use
is moto's HTTP server in a process of its own on a loopback port: their conditional writes meet in one
table, as two Lambda environments' would.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
import snapshot_restore_py
from snapshot_restore_py import get_after_restore, get_before_snapshot

from catalogue.demo import example_payloads
from converge.flow.registry import JobBinding, Policy, Queue, Registry
from converge.flow.runner import Confirmation, JobContext
from converge.model.states import OperationState
from converge.runtime import Converge
from converge.screening.identifiers import Identifier
from converge.screening.message import JobMessage
from localcloud import LocalCloud
from tests.api.conftest import RESET, signed_by
from tests.conftest import create_tables, load_template

REGION = "us-east-1"
COUNTED = "snap.counted.v1"
GUARDED = "snap.guarded.v1"


class Item(JobMessage):
    item_id: Identifier


class CountingRunner:
    """The effect is an atomic counter per operation in a table of its own: how many times the job ran."""

    def __init__(self) -> None:
        self._dynamodb = boto3.client("dynamodb", region_name=REGION)

    def load(self, message: Item, ctx: JobContext) -> Any:
        return True

    def run(self, message: Item, loaded: Any, ctx: JobContext) -> None:
        time.sleep(0.2)  # a job that takes a moment, so that the two restored workers overlap
        self._dynamodb.update_item(
            TableName="effects",
            Key={"operation_id": {"S": ctx.operation_id}},
            UpdateExpression="ADD runs :one",
            ExpressionAttributeValues={":one": {"N": "1"}},
        )

    def confirm(self, message: Item, ctx: JobContext) -> Confirmation:
        return Confirmation.NOT_APPLIED


def _registry() -> Registry:
    registry = Registry()
    for job_type, default_enabled in ((COUNTED, True), (GUARDED, False)):
        registry.register(
            JobBinding(
                job_type=job_type,
                message=Item,
                runner=CountingRunner,
                queue=Queue.DEFAULT,
                policy=Policy.EFFECT_THEN_CLAIM,
                default_enabled=default_enabled,
            )
        )
    return registry


_SERVE = """
from werkzeug.serving import make_server
from moto.server import DomainDispatcherApplication, create_backend_app
server = make_server("127.0.0.1", 0, DomainDispatcherApplication(create_backend_app), threaded=False)
print(server.socket.getsockname()[1], flush=True)
server.serve_forever()
"""
"""moto's server answering one request at a time, on a port the OS picks (printed first): DynamoDB applies each
conditional write atomically, and moto's in-memory tables do so only when no two requests are served at once
(its threaded server checks two racing conditions against the same old item)."""


@pytest.fixture
def server() -> Iterator[str]:
    """moto's server in its own process (so that this one has no thread when it forks)."""
    process = subprocess.Popen(
        [sys.executable, "-c", _SERVE],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert process.stdout is not None
    port = process.stdout.readline().strip() or "0"  # nothing: it failed before binding, and never answers
    endpoint = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise RuntimeError("moto's server did not start") from None
                time.sleep(0.1)
        yield endpoint
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.fixture
def worker(server: str, monkeypatch: pytest.MonkeyPatch) -> Converge:
    """One worker as a Lambda initialises it: its tables (from template.yaml), queues and environment.

    Its process holds no other runtime, as a Lambda's does not: the runtime hooks start empty (other tests'
    runtimes, a local cloud's functions among them, registered theirs in this process)."""
    monkeypatch.setattr(snapshot_restore_py, "_before_snapshot_registry", [])
    monkeypatch.setattr(snapshot_restore_py, "_after_restore_registry", [])
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_REGION": REGION,
        "AWS_DEFAULT_REGION": REGION,
        "AWS_ENDPOINT_URL": server,
        "POWERTOOLS_TRACE_DISABLED": "true",
        "POWERTOOLS_LOG_LEVEL": "WARNING",
    }.items():
        monkeypatch.setenv(name, value)
    dynamodb = boto3.client("dynamodb", region_name=REGION)
    tables = create_tables(dynamodb, load_template())
    dynamodb.create_table(
        TableName="effects",
        AttributeDefinitions=[{"AttributeName": "operation_id", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "operation_id", "KeyType": "HASH"}],
        BillingMode="PAY_PER_REQUEST",
    )
    sqs = boto3.client("sqs", region_name=REGION)
    queue_url = sqs.create_queue(QueueName="default")["QueueUrl"]
    dlq_url = sqs.create_queue(QueueName="default-dlq")["QueueUrl"]
    for name, value in {
        "JOBS_TABLE": tables["jobs"],
        "STATE_TABLE": tables["state"],
        "MARKERS_TABLE": tables["markers"],
        "TOGGLE_PREFIX": "/converge/dev/toggles",
        "QUEUE_NAME": "default",
        "QUEUE_URL": queue_url,
        "DLQ_URL": dlq_url,
        "DEFAULT_QUEUE_URL": queue_url,
        "MAX_RECEIVE_COUNT": "4",
    }.items():
        monkeypatch.setenv(name, value)
    return Converge.from_env(registry=_registry())


class _Context:
    aws_request_id = "snapstart"
    function_name = "DefaultWorkerFunction"

    def get_remaining_time_in_millis(self) -> int:
        return 30_000


def _delivery(runtime: Converge, job_type: str, operation_id: str, message_id: str | None = None) -> dict[str, Any]:
    """Enqueue one operation and return the SQS event its message makes (one record)."""
    runtime.enqueue(job_type, operation_id, {"item_id": "item-1"})
    body = {"v": 1, "operation_id": operation_id, "job_type": job_type, "payload": {"item_id": "item-1"}}
    return {
        "Records": [
            {
                "messageId": message_id or str(uuid.uuid4()),
                "receiptHandle": "receipt",
                "body": json.dumps({**body, "correlation_id": None}),
                "attributes": {"ApproximateReceiveCount": "1", "SentTimestamp": str(int(time.time() * 1000))},
                "messageAttributes": {},
                "md5OfBody": "",
                "eventSource": "aws:sqs",
                "eventSourceARN": f"arn:aws:sqs:{REGION}:123456789012:default",
                "awsRegion": REGION,
            }
        ]
    }


def _restored(runtime: Converge, go: int, events: list[dict[str, Any]], report: int) -> None:
    """In a forked child: the after-restore hooks, then each event once `go` opens; what it saw goes to `report`."""
    try:
        for hook, args, kwargs in get_after_restore():
            hook(*args, **kwargs)
        draw = runtime.rng.random()  # the next backoff jitter this environment would draw
        owners: list[str] = []
        acquire = runtime.operations.state.acquire

        def spied(subject: Any, owner: str, lease_seconds: float) -> Any:
            owners.append(owner)
            return acquire(subject, owner, lease_seconds)

        runtime.operations.state.acquire = spied  # type: ignore[method-assign]
        os.read(go, 1)
        for event in events:
            runtime.worker.handle(event, _Context())
        seen = {"owners": owners, "draw": draw}
        os.write(report, (json.dumps(seen) + "\n").encode())
        os._exit(0)
    except BaseException as exc:  # never return into pytest from a child
        os.write(report, (json.dumps({"error": repr(exc)}) + "\n").encode())
        os._exit(1)


def test_two_restored_workers_are_distinct_and_fresh(worker: Converge) -> None:
    # Given an initialised worker that has run a first job of each type (the guarded one switched on, so its
    # "on" is in the kill-switch cache), snapshotted: the before-snapshot hooks, then a fork per restore
    ssm = boto3.client("ssm", region_name=REGION)
    guard = worker.toggles.parameter_name(worker.registry.get(GUARDED).toggle_key)
    ssm.put_parameter(Name=guard, Value="on", Type="String")
    worker.worker.handle(_delivery(worker, COUNTED, "warm-1"), _Context())
    worker.worker.handle(_delivery(worker, GUARDED, "warm-2"), _Context())
    assert worker.operations.get("warm-2").state is OperationState.SUCCEEDED  # type: ignore[union-attr]
    for hook, args, kwargs in get_before_snapshot():
        hook(*args, **kwargs)

    # ...and, after the snapshot, the guarded job's kill switch turned off, and one operation of each type
    # delivered twice (the same message to both restored workers, as SQS may)
    ssm.put_parameter(Name=guard, Value="off", Type="String", Overwrite=True)
    events = [_delivery(worker, COUNTED, "race-1", message_id="message-1"), _delivery(worker, GUARDED, "guarded-1")]
    go_read, go_write = os.pipe()
    report_read, report_write = os.pipe()

    # When two environments are restored from it and race for the same operation
    children = []
    for _ in range(2):
        pid = os.fork()
        if pid == 0:
            _restored(worker, go_read, events, report_write)
        children.append(pid)
    os.write(go_write, b"gg")
    statuses = [os.waitpid(pid, 0)[1] for pid in children]
    os.close(report_write)
    with os.fdopen(report_read) as reports:
        seen = [json.loads(line) for line in reports]

    # Then both ran to the end, each under its own lease owner, with its own random draws
    assert statuses == [0, 0], seen
    assert len(seen) == 2 and all("owners" in child for child in seen), seen
    owners = [child["owners"] for child in seen]
    assert all(owners) and set(owners[0]).isdisjoint(owners[1]), owners
    assert seen[0]["draw"] != seen[1]["draw"], "a restored worker replays the snapshot's random sequence"
    # ...the raced operation took effect once and succeeded
    effects = boto3.client("dynamodb", region_name=REGION).get_item(
        TableName="effects", Key={"operation_id": {"S": "race-1"}}, ConsistentRead=True
    )
    assert effects["Item"]["runs"]["N"] == "1"
    assert worker.operations.get("race-1").state is OperationState.SUCCEEDED  # type: ignore[union-attr]
    # ...and the kill switch turned off after the snapshot was seen: the guarded job ran nowhere
    assert worker.operations.get("guarded-1").state is OperationState.PAUSED  # type: ignore[union-attr]
    assert "Item" not in boto3.client("dynamodb", region_name=REGION).get_item(
        TableName="effects", Key={"operation_id": {"S": "guarded-1"}}, ConsistentRead=True
    )


def test_restore_drops_the_kill_switch_cache_and_every_connection(worker: Converge) -> None:
    # Given a snapshotted worker that read its kill switch afterwards (another before-snapshot hook may), so its
    # cache holds a value and its clients hold pooled connections
    worker.before_snapshot()
    worker.toggles.is_enabled("snap.counted", True)
    worker.toggles._last_known["/converge/dev/toggles/snap.counted"] = True  # as a read of a present value leaves
    sessions = [client._endpoint.http_session for client in worker.clients._clients.values()]
    assert any(session._manager.pools for session in sessions)

    # When it is restored
    worker.after_restore()

    # Then nothing read before the restore is trusted, and no pooled connection is carried over
    assert worker.toggles._last_known == {} and worker.toggles._missing_until == {}
    assert not any(session._manager.pools for session in sessions)
    # ...and the clients still work (they connect again)
    assert worker.toggles.state("snap.counted", True).enabled


# -- the template's SnapStart setting, deployed both ways -------------------------------------------------------


@pytest.mark.parametrize(("snapstart", "stage"), [("false", "dev"), ("true", "dev"), ("auto", "prod")])
def test_the_local_cloud_deploys_every_way_and_invokes_through_the_alias(snapstart: str, stage: str) -> None:
    # Given template.yaml deployed with SnapStart off, on, and on by default in production
    with LocalCloud.start(parameters={"SnapStart": snapstart, "Stage": stage}) as cloud:
        lambda_ = cloud.client("lambda")
        # Then each worker and the enqueue API has the alias `live` on a published version...
        for function in ("CriticalWorkerFunction", "DefaultWorkerFunction", "BulkWorkerFunction", "EnqueueApiFunction"):
            alias = lambda_.get_alias(FunctionName=cloud.functions[function].name, Name="live")
            assert alias["FunctionVersion"].isdigit(), function
        # ...each queue's mapping (which names the alias) resolves to its worker, each route to the API function
        assert sorted(source.mapping.function_id for source in cloud.queue_sources) == [
            "BulkWorkerFunction",
            "CriticalWorkerFunction",
            "DefaultWorkerFunction",
        ]
        assert {route.function_id for api in cloud.http_apis for route in api.routes} == {"EnqueueApiFunction"}

        # When a job is posted to the API and the cloud drains
        response = cloud.http(
            "POST",
            f"/jobs/{RESET}",
            headers={**signed_by("AKIDSNAPSTART"), "Idempotency-Key": "snap-1"},
            body=json.dumps(example_payloads()[RESET]),
        )
        assert response.status == 202, response.body
        cloud.drain()

        # Then it went through the alias-wired API and queue to a worker, which ran it to an outcome (the example
        # user has nothing to reset here: NOOP)
        operation_id = json.loads(response.body)["operation_id"]
        state = cloud.client("dynamodb").get_item(
            TableName=cloud.outputs["StateTableName"], Key={"operation_id": {"S": operation_id}}, ConsistentRead=True
        )["Item"]
        assert (state["state"]["S"], state["attempts"]["N"]) in {("SUCCEEDED", "1"), ("NOOP", "1")}
