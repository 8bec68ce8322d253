"""Server mode: the same cloud behind moto's HTTP server on a loopback port, for the AWS CLI."""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from pathlib import Path

import boto3

from localcloud.server import running, serve

from .support import Recorder


def _wait_for(condition, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return False


def test_a_put_item_over_http_reaches_the_relay() -> None:
    # Given the local cloud serving on a free loopback port
    with running(poll_interval=0.05) as cloud:
        endpoint = cloud.clients.endpoint_url
        assert endpoint.startswith("http://127.0.0.1:")
        relay = Recorder()
        cloud.override_handler("OutboxRelayFunction", relay)

        # When an ordinary client enqueues over HTTP, knowing only the endpoint
        dynamodb = boto3.client(
            "dynamodb", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="y"
        )
        dynamodb.put_item(TableName=cloud.outputs["JobsTableName"], Item={"operation_id": {"S": "op-http"}})

        # Then the background poller delivers it to the relay (after the batching window)
        assert _wait_for(lambda: relay.records)
        assert relay.records[0]["dynamodb"]["Keys"] == {"operation_id": {"S": "op-http"}}


def test_serve_writes_the_outputs_file_and_stops_on_request(tmp_path: Path) -> None:
    # Given serve() running in a thread with an outputs file and no seeding, on a port the OS picks (port 0)
    outputs_file = tmp_path / "local.json"
    stop, ready = threading.Event(), []
    port = 0
    thread = threading.Thread(
        target=serve,
        kwargs={"port": port, "outputs_file": outputs_file, "seed": False, "on_ready": ready.append, "stop": stop},
    )
    thread.start()
    try:
        # When it is ready, then the file names the endpoint (the port it was given) and the stack outputs
        assert _wait_for(lambda: ready, timeout=30)
        written = json.loads(outputs_file.read_text())
        assert written == ready[0]
        host, _, bound = written["endpoint_url"].removeprefix("http://").partition(":")
        assert host == "127.0.0.1" and int(bound) > 0
        assert "JobsTableName" in written["outputs"]
        # And the endpoint it names is the one that answers
        with urllib.request.urlopen(f"{written['endpoint_url']}/moto-api/", timeout=10) as answer:
            assert answer.status == 200
    finally:
        # When asked to stop, then it shuts down
        stop.set()
        thread.join(timeout=30)
    assert not thread.is_alive()
