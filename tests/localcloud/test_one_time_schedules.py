"""One-time schedules in the local cloud (moto stores them and runs none: see test_moto_gaps): a firing whose
delivery fails is retried per its RetryPolicy on the emulated clock, then dead-lettered as Scheduler does."""

from __future__ import annotations

import json

from localcloud import LocalCloud


def test_the_local_cloud_retries_a_failed_firing_then_dead_letters_it_with_schedulers_attributes(
    cloud: LocalCloud,
) -> None:
    # Given two one-time schedules of the stack's group, with the template's scheduler role and schedules' DLQ:
    # one whose delivery keeps failing (retryable), one whose target the role may not send to (not retried)
    stack, group = cloud.deployment, cloud.outputs["ScheduleGroupName"]  # names found in converge's application
    role, dlq = stack.get_att("SchedulerRole", "Arn"), stack.get_att("ScheduleDlq", "Arn")
    scheduler, at = cloud.client("scheduler"), "at(2020-01-01T00:00:00)"
    for name, queue in (("flaky", "CriticalQueue"), ("forbidden", "RelayFailureQueue")):
        target = {
            "Arn": stack.get_att(queue, "Arn"),
            "RoleArn": role,
            "Input": json.dumps({"schedule": name}),
            "RetryPolicy": {"MaximumRetryAttempts": 2, "MaximumEventAgeInSeconds": 3600},
            "DeadLetterConfig": {"Arn": dlq},
        }
        scheduler.create_schedule(
            Name=name, GroupName=group, ScheduleExpression=at, FlexibleTimeWindow={"Mode": "OFF"}, Target=target,
            ActionAfterCompletion="DELETE",
        )  # fmt: skip
    cloud.one_time_schedules.fail_delivery = lambda name: name == "flaky"
    # When they come due and the emulated clock runs through the retries
    fired = cloud.fire_one_time_schedules()
    while (due := cloud.one_time_schedules.next_due()) is not None:
        cloud.advance(max(0.0, due - cloud.clock.now()) + 0.001)
        fired += cloud.fire_one_time_schedules()
    # Then the flaky one was tried three times (two retries) and the forbidden one once; none was delivered
    attempts = {name: [f for f in fired if f.name == name] for name in ("flaky", "forbidden")}
    assert [f.attempt for f in attempts["flaky"]] == [0, 1, 2] and [f.attempt for f in attempts["forbidden"]] == [0]
    assert not any(f.ok for f in fired) and attempts["flaky"][-1].dead_lettered
    assert attempts["flaky"][1].at - attempts["flaky"][0].at >= 60  # backoff on the emulated clock
    # And each went to the DLQ with Scheduler's attributes and the schedule's input as its body
    sqs = cloud.client("sqs")
    messages = sqs.receive_message(
        QueueUrl=cloud.outputs["ScheduleDlqUrl"], MaxNumberOfMessages=10, MessageAttributeNames=["All"]
    )["Messages"]
    found = {
        json.loads(m["Body"])["schedule"]: {k: v["StringValue"] for k, v in m["MessageAttributes"].items()}
        for m in messages
    }
    assert found["flaky"]["EXHAUSTED_RETRY_CONDITION"] == "MaximumRetryAttempts"
    assert (found["flaky"]["RETRY_ATTEMPTS"], found["forbidden"]["RETRY_ATTEMPTS"]) == ("2", "0")
    assert "EXHAUSTED_RETRY_CONDITION" not in found["forbidden"]  # a permission error is not retried
    assert found["forbidden"]["ERROR_CODE"] == "AccessDenied"
    for name, attributes in found.items():
        assert attributes["SCHEDULE_ARN"].endswith(f"/{name}") and attributes["TARGET_ARN"].startswith("arn:aws:sqs")
        assert {"ERROR_MESSAGE", "EXECUTION_ID", "IS_PAYLOAD_TRUNCATED", "SCHEDULED_TIME"} <= set(attributes)
