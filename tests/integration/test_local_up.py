"""End to end against the local cloud's HTTP endpoint, as a user of `converge local up` would do it."""

from __future__ import annotations

import time

import boto3
import pytest

from localcloud.server import catalogue_seeder, free_port, running


def wait_for(condition, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    return condition()


@pytest.fixture(scope="module")
def endpoint_cloud():
    with running(free_port(), seeders=[catalogue_seeder], poll_interval=0.05) as cloud:
        yield cloud


def client(cloud, service):
    return boto3.client(
        service,
        endpoint_url=cloud.clients.endpoint_url,
        region_name="us-east-1",
        aws_access_key_id="local",
        aws_secret_access_key="local",
    )


def state_of(dynamodb, table, operation_id):
    """The operation's state from its state record (the jobs table holds the request only)."""
    item = dynamodb.get_item(TableName=table, Key={"operation_id": {"S": operation_id}}, ConsistentRead=True)
    return item.get("Item", {}).get("state", {}).get("S")


def test_a_raw_put_item_over_http_is_processed_to_success(endpoint_cloud):
    # Given only the endpoint and the stack's outputs, discovered like on AWS
    cloudformation = client(endpoint_cloud, "cloudformation")
    outputs = {
        o["OutputKey"]: o["OutputValue"]
        for o in cloudformation.describe_stacks(StackName="converge")["Stacks"][0]["Outputs"]
    }
    dynamodb = client(endpoint_cloud, "dynamodb")
    # When a producer writes the documented item shape with a plain PutItem
    dynamodb.put_item(
        TableName=outputs["JobsTableName"],
        Item={
            "operation_id": {"S": "http-reset-1"},
            "job_type": {"S": "email.password-reset.v1"},
            "payload": {"M": {"user_id": {"S": "u-1002"}}},
        },
    )
    # Then the background pipeline runs it to SUCCEEDED
    assert wait_for(lambda: state_of(dynamodb, outputs["StateTableName"], "http-reset-1") == "SUCCEEDED")


def test_flipping_a_toggle_pauses_and_resumes_work(endpoint_cloud):
    outputs = endpoint_cloud.outputs
    dynamodb, ssm = client(endpoint_cloud, "dynamodb"), client(endpoint_cloud, "ssm")
    toggle = f"{outputs['TogglePrefix']}/partner-docs.upload"
    # Given a job switched off with put_parameter
    ssm.put_parameter(Name=toggle, Value="off", Type="String", Overwrite=True)
    dynamodb.put_item(
        TableName=outputs["JobsTableName"],
        Item={
            "operation_id": {"S": "http-doc-1"},
            "job_type": {"S": "partner-docs.upload.v1"},
            "payload": {"M": {"partner_id": {"S": "p-2001"}, "upload_id": {"S": "up-6001"}}},
        },
    )
    # Then its operation waits as PAUSED
    assert wait_for(lambda: state_of(dynamodb, outputs["StateTableName"], "http-doc-1") == "PAUSED")
    # When the toggle is turned on again, by nothing but put_parameter
    ssm.put_parameter(Name=toggle, Value="on", Type="String", Overwrite=True)
    # Then the resumer re-dispatches it and it succeeds
    assert wait_for(lambda: state_of(dynamodb, outputs["StateTableName"], "http-doc-1") == "SUCCEEDED")
