"""The whole path, enqueue → stream → relay → SQS → worker, through the local cloud's event-source
emulation, with the effects counted in the emulated services and the stored receipts checked."""

from __future__ import annotations

import json

import pytest

from catalogue import examples
from converge.model.envelope import Envelope
from converge.model.states import OperationState
from converge_cli.commands.demo_run import runtime_for
from localcloud import LocalCloud, effects
from localcloud.server import catalogue_seeder


@pytest.fixture(scope="module")
def cloud():
    with LocalCloud.start(seeders=[catalogue_seeder]) as cloud:
        effects.instrument(cloud)
        yield cloud


@pytest.fixture(scope="module")
def converge(cloud):
    return runtime_for(cloud)


def effects_of(cloud, operation_id):
    return effects.count(cloud).for_operation(operation_id)


def resend(cloud, converge, operation_id, queue_output):
    """A duplicate SQS delivery: the same versioned message sent to the queue again."""
    operation = converge.operations.require(operation_id)
    body = Envelope(
        operation_id=operation_id,
        job_type=operation.job_type,
        payload=operation.payload,
        correlation_id=operation.correlation_id,
    ).to_body()
    cloud.client("sqs").send_message(QueueUrl=cloud.outputs[queue_output], MessageBody=body)


@pytest.mark.parametrize(
    ("job_type", "payload", "service"),
    [
        ("email.password-reset.v1", {"user_id": examples.SECOND_UNCONFIRMED_USER}, "ses"),  # effect_then_claim
        ("partner-docs.upload.v1", {"partner_id": examples.PARTNER, "upload_id": examples.UPLOAD}, "s3"),  # keyed
    ],
)
def test_each_policy_runs_end_to_end_once(cloud, converge, job_type, payload, service):
    operation_id = f"e2e-{job_type.split('.')[0]}"
    # Given an enqueued job / When the cloud drains
    converge.enqueue(job_type, operation_id, payload)
    cloud.drain()
    # Then it succeeded, with one effect in the service and its receipt stored
    stored = converge.operations.require(operation_id)
    assert stored.state is OperationState.SUCCEEDED
    assert [entry.state for entry in stored.history] == ["ACCEPTED", "IN_PROGRESS", "SUCCEEDED"]
    assert effects_of(cloud, operation_id)[service] == 1


def test_claim_then_effect_end_to_end_after_the_toggle_is_turned_on(cloud, converge):
    # Given the fail-closed money job, enqueued while its toggle is off (as deployed)
    converge.enqueue(
        "ledger.partner-benefits.v1",
        "e2e-benefit",
        {"partner_id": examples.PARTNER, "amount_cents": 700, "benefit": "e2e-bonus"},
    )
    cloud.drain()
    assert converge.operations.require("e2e-benefit").state is OperationState.PAUSED
    assert effects_of(cloud, "e2e-benefit")["ledger"] == 0
    # When only the parameter is flipped
    cloud.client("ssm").put_parameter(
        Name=converge.settings.toggle_parameter("ledger.partner-benefits"), Value="on", Type="String", Overwrite=True
    )
    cloud.drain()
    # Then the resumer re-dispatched it and exactly one ledger row exists
    assert converge.operations.require("e2e-benefit").state is OperationState.SUCCEEDED
    assert effects_of(cloud, "e2e-benefit")["ledger"] == 1


def test_a_duplicate_sqs_delivery_produces_one_effect(cloud, converge):
    converge.enqueue("email.partner-verification.v1", "e2e-dup-sqs", {"user_id": examples.UNCONFIRMED_USER})
    cloud.drain()
    resend(cloud, converge, "e2e-dup-sqs", "CriticalQueueUrl")
    resend(cloud, converge, "e2e-dup-sqs", "CriticalQueueUrl")
    cloud.drain()
    assert effects_of(cloud, "e2e-dup-sqs")["ses"] == 1
    assert converge.operations.require("e2e-dup-sqs").state is OperationState.SUCCEEDED


def test_a_duplicate_stream_delivery_produces_one_effect(cloud, converge):
    converge.enqueue("pdf.cv.v1", "e2e-dup-stream", {"profile_id": examples.PROFILE})
    cloud.drain()
    # When the relay is handed the same stream batch again (a stream retry)
    [batch] = [
        i.event
        for i in cloud.invocations
        if i.logical_id == "OutboxRelayFunction" and "e2e-dup-stream" in json.dumps(i.event)
    ][-1:]
    cloud.invoke("OutboxRelayFunction", batch)
    cloud.drain()
    assert effects_of(cloud, "e2e-dup-stream")["s3"] == 1


def test_a_relay_retry_after_a_successful_send_produces_one_effect(cloud, converge):
    # Given a relay that sends, then reports every record failed once (as if it died before its checkpoint)
    real = cloud.runtime.module("OutboxRelayFunction").handler
    calls = []

    def send_then_fail(event, context):
        response = real(event, context)
        if not calls:
            calls.append(event)
            return {
                "batchItemFailures": [{"itemIdentifier": r["dynamodb"]["SequenceNumber"]} for r in event["Records"]]
            }
        return response

    cloud.override_handler("OutboxRelayFunction", send_then_fail)
    try:
        converge.enqueue("ads.image-process.v1", "e2e-relay-retry", {"ad_id": examples.SECOND_PENDING_AD})
        cloud.drain()
    finally:
        cloud.override_handler("OutboxRelayFunction", None)
    # Then the record was sent twice, and the work happened once
    assert calls, "the relay's first attempt was reported failed"
    assert converge.operations.require("e2e-relay-retry").state is OperationState.SUCCEEDED
    assert effects_of(cloud, "e2e-relay-retry")["s3"] == 1


def test_raw_items_of_the_documented_shape_run_and_hostile_ones_are_rejected(cloud, converge):
    dynamodb = cloud.client("dynamodb")
    table = cloud.outputs["JobsTableName"]
    dynamodb.put_item(
        TableName=table,
        Item={
            "operation_id": {"S": "e2e-raw-ok"},
            "job_type": {"S": "email.password-reset.v1"},
            "payload": {"M": {"user_id": {"S": examples.UNCONFIRMED_USER}}},
            "correlation_id": {"S": "req-77"},
        },
    )
    dynamodb.put_item(
        TableName=table,
        Item={"operation_id": {"S": "e2e-raw-unknown"}, "job_type": {"S": "email.nope.v1"}, "payload": {"M": {}}},
    )
    dynamodb.put_item(
        TableName=table,
        Item={
            "operation_id": {"S": "e2e-raw-secret"},
            "job_type": {"S": "email.password-reset.v1"},
            "payload": {"M": {"user_id": {"S": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2ln"}}},
        },
    )
    cloud.drain()
    assert converge.operations.require("e2e-raw-ok").state is OperationState.SUCCEEDED
    for operation_id, reason in (("e2e-raw-unknown", "unknown job type"), ("e2e-raw-secret", "JWT")):
        stored = converge.operations.require(operation_id)
        assert stored.state is OperationState.REJECTED
        assert reason in stored.last_error
    rejected = {row["operation_id"] for row in converge.operations.listings.iter_attention(OperationState.REJECTED)}
    assert {"e2e-raw-unknown", "e2e-raw-secret"} <= rejected


def test_a_poison_message_in_a_batch_leaves_the_others_unaffected(cloud, converge):
    sqs = cloud.client("sqs")
    converge.enqueue("email.partner-verification.v1", "e2e-poison-neighbour", {"user_id": examples.UNCONFIRMED_USER})
    sqs.send_message(QueueUrl=cloud.outputs["CriticalQueueUrl"], MessageBody="{not json")
    cloud.drain()
    assert converge.operations.require("e2e-poison-neighbour").state is OperationState.SUCCEEDED
    dead = sqs.receive_message(
        QueueUrl=cloud.outputs["CriticalDlqUrl"], MaxNumberOfMessages=10, MessageAttributeNames=["All"]
    )["Messages"]
    poison = [m for m in dead if m["Body"] == "{not json"]
    assert poison and poison[0]["MessageAttributes"]["error_class"]["StringValue"] == "InvalidMessage"


def test_identity_reuse_with_other_content_is_refused(cloud, converge):
    from converge.model.errors import IdentityConflict

    converge.enqueue("pdf.cv.v1", "e2e-identity", {"profile_id": examples.PROFILE})
    with pytest.raises(IdentityConflict, match="e2e-identity"):
        converge.enqueue("pdf.cv.v1", "e2e-identity", {"profile_id": "cv-other"})
