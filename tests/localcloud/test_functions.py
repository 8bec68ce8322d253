"""Handler modules, environments, Lambda contexts and the Invoke API, on the fixture template."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time

import pytest

from localcloud import LambdaTimeoutError, LocalCloud
from localcloud.functions import LambdaContext

from .support import Recorder, send

PROBE = "ProbeFunction"


def test_handler_module_is_imported_by_path_with_the_function_environment(probe_cloud: LocalCloud) -> None:
    # Given the probe function, not yet loaded, and no FLAVOUR in this process
    assert "FLAVOUR" not in os.environ

    # When a message reaches it
    send(probe_cloud, "WorkQueueUrl", {"hello": "world"})
    probe_cloud.drain()

    # Then its module was imported under a unique name, with Globals and its own variables resolved
    module = sys.modules[probe_cloud.functions[PROBE].module_name]
    expected = {
        "FLAVOUR": "vanilla",
        "PROBE_TABLE": probe_cloud.outputs["ProbeTableName"],
        "WORK_QUEUE_URL": probe_cloud.outputs["WorkQueueUrl"],
    }
    assert module.environment_at_import == expected
    assert module.seen[-1]["flavour"] == "vanilla"
    # And the function directory was not put on sys.path, and the environment was restored afterwards
    assert str(probe_cloud.functions[PROBE].code_dir) not in sys.path
    assert "FLAVOUR" not in os.environ


def test_the_context_is_a_lambda_context_on_the_emulated_clock(probe_cloud: LocalCloud) -> None:
    # Given a handler that advances the emulated clock by 4 seconds
    spec = probe_cloud.functions[PROBE]
    seen = {}

    def handler(event: object, context) -> None:
        seen["before"] = context.get_remaining_time_in_millis()
        probe_cloud.advance(4)
        seen["after"] = context.get_remaining_time_in_millis()
        seen["context"] = context

    probe_cloud.override_handler(PROBE, handler)

    # When it is invoked
    probe_cloud.invoke(PROBE, {})

    # Then the context describes the deployed function and its remaining time follows the clock
    context = seen["context"]
    assert context.function_name == spec.name and context.invoked_function_arn == spec.arn
    assert context.memory_limit_in_mb == 256 and context.function_version == "$LATEST"
    assert context.aws_request_id and context.log_group_name == f"/aws/lambda/{spec.name}"
    assert spec.timeout * 1000 - 100 < seen["before"] <= spec.timeout * 1000
    assert seen["before"] - seen["after"] >= 4000


def test_using_more_than_the_timeout_is_a_timeout_and_fails_the_batch(probe_cloud: LocalCloud) -> None:
    # Given a handler that runs (in emulated time) past the function's timeout
    timeout = probe_cloud.functions[PROBE].timeout
    probe_cloud.override_handler(PROBE, lambda event, context: probe_cloud.advance(timeout + 1))

    # When invoked directly, then Lambda's timeout is raised
    with pytest.raises(LambdaTimeoutError):
        probe_cloud.invoke(PROBE, {})

    # And through the queue, the batch fails and the message stays
    send(probe_cloud, "WorkQueueUrl", {"n": 1})
    assert probe_cloud.queue_sources[0].poll(flush=True).failed == 1


def test_a_functions_time_is_its_own_not_the_wall_clocks(probe_cloud: LocalCloud) -> None:
    # Given an invocation's context on a function given one second
    spec = dataclasses.replace(probe_cloud.functions[PROBE], timeout=1)
    context = LambdaContext(spec, probe_cloud.clock)
    # When more than its timeout passes on the wall clock while it waits (a loaded machine, a paused process)
    time.sleep(1.1)
    # Then it has not timed out: waiting is not its time
    assert not context.timed_out() and context.get_remaining_time_in_millis() > 900
    # When it computes for a while, then that is its time
    started = time.thread_time()
    while time.thread_time() - started < 0.2:
        pass
    assert 0.2 <= context.spent() < 0.5 and context.get_remaining_time_in_millis() <= 800
    # When the emulated clock moves past what is left, then it has timed out
    probe_cloud.advance(0.9)
    assert context.timed_out() and context.get_remaining_time_in_millis() == 0


def test_lambda_invoke_api_runs_the_handler_in_process(cloud: LocalCloud) -> None:
    # Given the redrive function, found the way an operator would: by the stack output
    redrive = Recorder({"moved": 3})
    cloud.override_handler("DlqRedriveFunction", redrive)

    # When it is invoked through the Lambda API
    response = cloud.client("lambda").invoke(
        FunctionName=cloud.outputs["RedriveFunctionName"], Payload=json.dumps({"queue": "critical"})
    )

    # Then the handler ran with the payload and its result is the response payload
    assert redrive.events == [{"queue": "critical"}]
    assert json.loads(response["Payload"].read()) == {"moved": 3}
    assert "FunctionError" not in response


def test_lambda_invoke_api_reports_handler_errors(cloud: LocalCloud) -> None:
    def crash(event: object, context: object) -> None:
        raise ValueError("bad request")

    cloud.override_handler("DlqRedriveFunction", crash)
    response = cloud.client("lambda").invoke(FunctionName=cloud.outputs["RedriveFunctionName"], Payload=b"{}")
    assert response["FunctionError"] == "Unhandled"
    assert json.loads(response["Payload"].read())["errorType"] == "ValueError"


def test_a_failing_seeder_is_not_silently_ignored() -> None:
    def broken(cloud: LocalCloud) -> None:
        raise RuntimeError("seed failed")

    with pytest.raises(RuntimeError, match="seed failed"), LocalCloud.start(seeders=[broken]):
        pass
