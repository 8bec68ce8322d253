"""The example job on the local cloud: the project's own template deployed into moto, its functions run."""

from __future__ import annotations

from pathlib import Path

from converge import OperationState
from converge_cli.demo import runtime_for
from localcloud import LocalCloud

TEMPLATE = Path(__file__).resolve().parents[1] / "template.yaml"


def test_a_greeting_is_written_once_even_when_enqueued_twice() -> None:
    with LocalCloud.start(TEMPLATE) as cloud:
        # Given the project deployed (converge's application with it), and converge bound to the cloud's clients
        converge = runtime_for(cloud)
        # When a greeting is enqueued, then enqueued again with the same content, and the cloud drains
        first = converge.enqueue("{{toggle_key}}.v1", "greet-u-1", {"user_id": "u-1"})
        again = converge.enqueue("{{toggle_key}}.v1", "greet-u-1", {"user_id": "u-1"})
        stats = cloud.drain()
        # Then one operation ran once and succeeded, and its stored receipt says so
        assert first.created and not again.created
        assert stats.quiescent
        operation = converge.operations.require("greet-u-1")
        assert operation.state is OperationState.SUCCEEDED
        assert operation.attempts == 1
        assert stats.invocations["DefaultWorkerFunction"] == 1
        # And its effect is in the project's bucket: one greeting, keyed by the operation
        s3, bucket = cloud.client("s3"), cloud.outputs["GreetingsBucketName"]
        listed = s3.list_objects_v2(Bucket=bucket, Prefix="greetings/")["Contents"]
        assert [item["Key"] for item in listed] == ["greetings/greet-u-1"]
        assert s3.get_object(Bucket=bucket, Key="greetings/greet-u-1")["Body"].read() == b"Hello, u-1!"
