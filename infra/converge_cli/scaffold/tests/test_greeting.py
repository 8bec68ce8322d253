"""The example job on the local cloud: the project's own template deployed into moto, its functions run.

`converge_cloud` is converge_testing's pytest fixture: template.yaml deployed once for this module, converge bound
to it (`converge_cloud.converge`), its effect counter reading what the template's own bucket accepted, by operation.
Each test uses operation ids of its own, since they share the cloud.
"""

from __future__ import annotations

from converge import OperationState
from converge_testing import FaultKind


def test_a_greeting_is_written_once_even_when_enqueued_twice(converge_cloud) -> None:
    # Given the project deployed (converge's application with it)
    app = converge_cloud.converge
    # When a greeting is enqueued, then enqueued again with the same content, and the cloud runs until quiet
    first = app.enqueue("{{toggle_key}}.v1", "greet-u-1", {"user_id": "u-1"})
    again = app.enqueue("{{toggle_key}}.v1", "greet-u-1", {"user_id": "u-1"})
    stats = converge_cloud.run_until_quiet()
    # Then one operation ran once and succeeded, and its stored receipt says so
    assert first.created and not again.created
    operation = converge_cloud.operation("greet-u-1")
    assert (operation.state, operation.attempts) == (OperationState.SUCCEEDED, 1)
    assert stats.invocations["DefaultWorkerFunction"] == 1
    # And its effect is in the project's bucket: one greeting, written once, keyed by the operation
    assert converge_cloud.effects.of("greet-u-1") == {"GreetingsBucket": 1}
    assert converge_cloud.effects.versions("GreetingsBucket", "greet-u-1") == 1
    s3, bucket = converge_cloud.client("s3"), converge_cloud.outputs["GreetingsBucketName"]
    assert s3.get_object(Bucket=bucket, Key="greetings/greet-u-1")["Body"].read() == b"Hello, u-1!"


def test_a_worker_that_dies_after_the_greeting_writes_the_same_object_again(converge_cloud) -> None:
    # Given a worker that dies once, after the greeting is written and before its operation is recorded
    app = converge_cloud.converge
    with converge_cloud.faults() as faults:
        faults.plan(FaultKind.CRASH_AFTER_EFFECT, "greet-crash")
        # When the greeting is enqueued and the cloud runs until quiet (SQS delivers it again after the crash)
        app.enqueue("{{toggle_key}}.v1", "greet-crash", {"user_id": "u-2"})
        converge_cloud.run_until_quiet()
    # Then the retry wrote the same object again (keyed_effect): still one greeting, in two versions
    operation = converge_cloud.operation("greet-crash")
    assert (operation.state, operation.attempts) == (OperationState.SUCCEEDED, 2)
    assert faults.counts[FaultKind.CRASH_AFTER_EFFECT] == 1
    assert converge_cloud.effects.of("greet-crash") == {"GreetingsBucket": 1}
    assert converge_cloud.effects.versions("GreetingsBucket", "greet-crash") == 2
