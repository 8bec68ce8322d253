"""A local cloud on a loopback port (the pipeline running in the background), and operations planted in it.

The console reads a deployment as the CLI does, so these tests run it against the local cloud's
endpoint with the stack's own outputs. Operations are planted the way the pipeline leaves them:
admitted, paused by their job's kill switch, then taken and settled through the store's own writes.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from flask.testing import FlaskClient

from converge.model.envelope import Envelope
from converge.model.records import Lease, Operation, Subject
from converge.model.states import OperationState
from converge_cli.support.target import Target
from localcloud.cloud import LocalCloud
from localcloud.server import catalogue_seeder, running

CONSOLE_SECRET = "console-test-key-" + "k" * 26
"""The key the console apps of these tests are made with (`converge console` makes one per start)."""
HELD_JOB = "partner-docs.upload.v1"
"""Switched off for the whole module, so what is planted under it stays where it is put."""
HELD_TOGGLE = "partner-docs.upload"


def signed_in(client: FlaskClient, secret: str = CONSOLE_SECRET) -> FlaskClient:
    """A test client signed in as a browser is: the printed URL's token, exchanged for this console's session."""
    exchange = client.get(f"/?token={secret}")
    assert exchange.status_code == 303 and exchange.headers["Location"] == "/", exchange.status_code
    return client


def wait_for(condition: Callable[[], Any], timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := condition():
            return value
        time.sleep(0.1)
    return condition()


@pytest.fixture(scope="module")
def cloud() -> Iterator[LocalCloud]:
    with running(seeders=[catalogue_seeder], poll_interval=0.05, metrics=True) as started:
        started.client("ssm").put_parameter(
            Name=f"{started.outputs['TogglePrefix']}/{HELD_TOGGLE}", Value="off", Type="String", Overwrite=True
        )
        yield started


@pytest.fixture(scope="module")
def deployment(cloud: LocalCloud) -> Target:
    return Target(endpoint_url=cloud.clients.endpoint_url)


def plant(
    deployment: Target,
    operation_id: str,
    state: OperationState,
    reason: str = "planted",
    payload: dict[str, Any] | None = None,
) -> Operation:
    """An operation of the held job, left by the pipeline as PAUSED, then settled in `state` with `reason`."""
    converge = deployment.converge
    converge.enqueue(HELD_JOB, operation_id, payload or {"partner_id": "p-2001", "upload_id": f"up-{operation_id}"})
    assert wait_for(lambda: converge.operations.require(operation_id).state is OperationState.PAUSED)
    if state is OperationState.PAUSED:
        return converge.operations.require(operation_id)
    operation = converge.operations.require(operation_id)
    request = operation.request
    assert request is not None
    lease = converge.operations.state.acquire(
        Subject(operation_id, request.job_type, request.fingerprint), "planter", 30
    )
    assert isinstance(lease, Lease), lease
    failing = state in (OperationState.FAILED, OperationState.UNKNOWN)
    assert converge.operations.state.settle(lease, state, reason, error=reason if failing else None) is None
    return converge.operations.require(operation_id)


def waiting_for_approval(deployment: Target, operation_id: str) -> None:
    """An operation of the held job that waits for the signal `approval` (as `ctx.wait_for` leaves it), for a day."""
    converge = deployment.converge
    plant(deployment, operation_id, OperationState.PAUSED)
    request = converge.operations.require(operation_id).request
    assert request is not None
    lease = converge.operations.state.acquire(Subject(operation_id, request.job_type, request.fingerprint), "t", 30)
    assert isinstance(lease, Lease), lease
    run_at = converge.clock.now() + 86400
    converge.operations.state.wait(lease, run_at, "approval", "waiting for signal 'approval'", for_signal=True)


def stored_receipt(cloud: LocalCloud, operation_id: str) -> dict[str, Any]:
    """The state record exactly as DynamoDB holds it (not through converge's reader)."""
    item = cloud.client("dynamodb").get_item(
        TableName=cloud.outputs["StateTableName"], Key={"operation_id": {"S": operation_id}}, ConsistentRead=True
    )
    return dict(item["Item"])


def history_reasons(receipt: dict[str, Any]) -> list[str]:
    return [entry["S"] for entry in receipt["history"]["L"]]


def dead_letter(cloud: LocalCloud, dlq_url: str, operation: Operation, reason: str) -> None:
    """Put an operation's message on a DLQ with the attributes the worker gives a failed one."""
    body = Envelope(
        operation_id=operation.operation_id,
        job_type=operation.job_type,
        payload=operation.payload,
        correlation_id=operation.correlation_id,
    ).to_body()
    attributes = {
        "job_type": operation.job_type,
        "operation_id": operation.operation_id,
        "error_class": "ProviderDown",
        "error_reason": reason,
        "failed_at": "2026-01-01T00:00:00.000Z",
    }
    cloud.client("sqs").send_message(
        QueueUrl=dlq_url,
        MessageBody=body,
        MessageAttributes={name: {"DataType": "String", "StringValue": value} for name, value in attributes.items()},
    )


def depth_of(cloud: LocalCloud, queue_url: str) -> int:
    """Every message in the queue, visible or not, as SQS counts them."""
    attributes = cloud.client("sqs").get_queue_attributes(QueueUrl=queue_url, AttributeNames=["All"])["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"]) + int(attributes["ApproximateNumberOfMessagesNotVisible"])
