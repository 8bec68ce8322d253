"""The enqueue API over real HTTP, as `converge local up` serves it: SigV4-signed requests to `api_url`."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from catalogue.demo import example_payloads
from localcloud.server import serve

from .conftest import RESET

SERVICE_CREDENTIALS = Credentials("AKIDLOCALSERVICE01", "local-secret")


def send(method: str, url: str, body: dict[str, Any] | None = None, *, sign: bool = True, **headers: str) -> Any:
    """One request, signed for execute-api like any AWS SDK signs it; returns (status, headers, JSON body)."""
    data = json.dumps(body).encode() if body is not None else None
    request = AWSRequest(method=method, url=url, data=data, headers={"Content-Type": "application/json", **headers})
    if sign:
        SigV4Auth(SERVICE_CREDENTIALS, "execute-api", "us-east-1").add_auth(request)
    prepared = urllib.request.Request(url, data=data, method=method, headers=dict(request.headers.items()))
    try:
        with urllib.request.urlopen(prepared, timeout=10) as response:
            return response.status, dict(response.headers.items()), json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers.items()), json.loads(error.read())


def test_local_up_serves_the_enqueue_api_to_signed_requests(tmp_path: Path) -> None:
    # Given `converge local up`'s server, with its outputs file
    outputs_file, stop, ready = tmp_path / "local.json", threading.Event(), []
    thread = threading.Thread(
        target=serve,
        kwargs={
            "port": 0,  # a port the OS picks; the outputs file names it
            "outputs_file": outputs_file,
            "seed": False,
            "on_ready": ready.append,
            "stop": stop,
        },
    )
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not ready and time.monotonic() < deadline:
            time.sleep(0.05)
        assert ready, "the local cloud did not come up"
        info = json.loads(outputs_file.read_text())

        # Then the outputs file names the enqueue API's loopback URL, and the stack output resolves to it
        api_url = info["api_url"]
        assert api_url.startswith("http://127.0.0.1:")
        assert info["outputs"]["EnqueueApiUrl"] == api_url == info["http_apis"]["EnqueueApi"]

        # When a service posts a job with SigV4, then retries it
        payload = example_payloads()[RESET]
        first = send("POST", f"{api_url}/jobs/{RESET}", payload, **{"Idempotency-Key": "over-http-1"})
        retry = send("POST", f"{api_url}/jobs/{RESET}", payload, **{"Idempotency-Key": "over-http-1"})

        # Then the first is admitted and the retry replays it
        assert first[0] == 202 and retry[0] == 202
        assert retry[2] == first[2] and retry[1]["idempotent-replayed"] == "true"
        operation_id = first[2]["operation_id"]

        # And its status is readable over the same API, while an unsigned request is refused
        status = send("GET", f"{api_url}/operations/{operation_id}")
        assert (status[0], status[2]["operation_id"]) == (200, operation_id)
        unsigned = send("POST", f"{api_url}/jobs/{RESET}", payload, sign=False, **{"Idempotency-Key": "x"})
        assert unsigned[0] == 403
    finally:
        stop.set()
        thread.join(timeout=30)
