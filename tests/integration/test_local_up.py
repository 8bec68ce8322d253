"""End to end against the local cloud's HTTP endpoint, as a user of `converge local up` would do it."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import boto3
import pytest

from localcloud.server import catalogue_seeder, running


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
    with running(seeders=[catalogue_seeder], poll_interval=0.05) as cloud:
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


# -- `converge local up` as a user runs it: its own process --------------------------------------------------------

CONVERGE = Path(sys.executable).with_name("converge")


def test_a_taken_port_is_a_clear_error_and_exit_without_waiting(tmp_path):
    # Given something already listening on the port
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        # When `converge local up` is started on it
        started = time.monotonic()
        completed = subprocess.run(
            [str(CONVERGE), "local", "up", "--port", str(port), "--outputs-file", str(tmp_path / "out.json")],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    # Then it exits at once with one line naming the port, and writes no outputs file
    assert completed.returncode == 4, completed.stderr
    assert completed.stderr.startswith(f"error: port {port} on 127.0.0.1 is already in use")
    assert completed.stderr.count("\n") == 1 and "--port" in completed.stderr
    assert time.monotonic() - started < 30 and not (tmp_path / "out.json").exists()


def test_logs_are_streamed_with_the_functions_name_and_the_outputs_file_goes_on_stop(tmp_path):
    # Given `converge local up --logs` running in its own process, on a port the OS picks (its outputs file names it)
    outputs_file = tmp_path / "out.json"
    process = subprocess.Popen(
        [str(CONVERGE), "local", "up", "--port", "0", "--outputs-file", str(outputs_file), "--logs"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(process.stdout.readline, "")), daemon=True)
    reader.start()
    try:
        assert wait_for(outputs_file.exists, timeout=120), "".join(lines) + process.stderr.read()
        info = json.loads(outputs_file.read_text())
        endpoint = client_at(info["endpoint_url"], "dynamodb")
        # When a job is enqueued with a plain PutItem
        endpoint.put_item(
            TableName=info["outputs"]["JobsTableName"],
            Item={
                "operation_id": {"S": "logs-reset-1"},
                "job_type": {"S": "email.password-reset.v1"},
                "payload": {"M": {"user_id": {"S": "u-1002"}}},
            },
        )
        # Then the relay's and the worker's log lines appear, each prefixed with the function's name
        assert wait_for(lambda: any(line.startswith("CriticalWorkerFunction {") for line in lines), timeout=60)
        relay = [line for line in lines if line.startswith("OutboxRelayFunction ")]
        assert relay and json.loads(relay[0].split(" ", 1)[1])["service"] == "converge"
    finally:
        # When it is stopped (Ctrl-C)
        process.send_signal(signal.SIGINT)
        code = process.wait(timeout=60)
        reader.join(timeout=10)
    # Then it stops cleanly and removes its outputs file: no reader finds an endpoint that is gone
    assert code == 0, process.stderr.read()
    assert not outputs_file.exists()
    assert any("local cloud stopped" in line for line in lines)


def client_at(endpoint: str, service: str):
    return boto3.client(
        service, endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="l", aws_secret_access_key="l"
    )
