"""Schedules and "Parameter Store Change" events, delivered from the template's EventBridge rules."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import boto3

from localcloud import LocalCloud
from localcloud.schedules import CronExpression, next_due, rate_seconds

from .support import Recorder


def _rule(cloud: LocalCloud, function_id: str, *, scheduled: bool):
    return next(
        r
        for r in cloud.bus.rules
        if bool(r.schedule) == scheduled and any(t.function_id == function_id for t in r.targets)
    )


def test_a_tick_fires_due_schedules_with_their_input(cloud: LocalCloud) -> None:
    # Given the recurring and resumer functions with their template schedules
    recurring, resumer = Recorder(), Recorder()
    cloud.override_handler("RecurringFunction", recurring)
    cloud.override_handler("ResumerFunction", resumer)
    recurring_rule = _rule(cloud, "RecurringFunction", scheduled=True)
    period = rate_seconds(recurring_rule.schedule)

    # When less than a period has passed, then nothing fires
    cloud.advance(period - 5)
    cloud.tick_schedules()
    assert recurring.events == []

    # When the period has passed, then the recurring job gets its rule's Input...
    cloud.tick_schedules(cloud.clock.now() + 10)
    assert recurring.events == [json.loads(recurring_rule.targets[0].input)]

    # ...and the resumer (no Input) got the AWS "Scheduled Event" shape
    event = resumer.events[0]
    assert event["detail-type"] == "Scheduled Event" and event["source"] == "aws.events"
    assert event["resources"] == [_rule(cloud, "ResumerFunction", scheduled=True).arn]
    assert {"version", "id", "account", "time", "region", "detail"} <= set(event)

    # When ticking again at the same moment, then nothing fires twice
    cloud.tick_schedules()
    assert len(recurring.events) == 1


def test_a_parameter_put_by_any_client_reaches_the_resumer_rule(cloud: LocalCloud) -> None:
    # Given the resumer, and a plain boto3 client that knows nothing of the local cloud
    resumer = Recorder()
    cloud.override_handler("ResumerFunction", resumer)
    ssm = boto3.client("ssm", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="y")
    toggle = f"{cloud.outputs['TogglePrefix']}/ledger.partner-benefits"

    # When that client turns a toggle on, and writes a parameter outside the toggle prefix
    ssm.put_parameter(Name=toggle, Value="on", Type="String", Overwrite=True)
    ssm.put_parameter(Name="/elsewhere/setting", Value="x", Type="String")
    stats = cloud.drain()

    # Then the resumer received exactly one AWS-shaped "Parameter Store Change" event, for the toggle
    assert stats.parameter_events == 2
    assert stats.invocations["ResumerFunction"] == 1
    [event] = resumer.events
    assert event["source"] == "aws.ssm" and event["detail-type"] == "Parameter Store Change"
    assert event["detail"] == {"operation": "Update", "name": toggle, "type": "String", "description": ""}
    assert event["resources"] == [f"arn:aws:ssm:us-east-1:{event['account']}:parameter{toggle}"]


def test_creating_and_deleting_parameters_are_create_and_delete_operations(cloud: LocalCloud) -> None:
    # Given the resumer
    resumer = Recorder()
    cloud.override_handler("ResumerFunction", resumer)
    ssm = cloud.client("ssm")
    name = f"{cloud.outputs['TogglePrefix']}/new.job"

    # When a toggle is created, then deleted
    ssm.put_parameter(Name=name, Value="off", Type="String")
    cloud.deliver_parameter_changes()
    ssm.delete_parameter(Name=name)
    cloud.deliver_parameter_changes()

    # Then the operations are Create then Delete
    assert [e["detail"]["operation"] for e in resumer.events] == ["Create", "Delete"]


def test_schedule_expressions() -> None:
    # Given a moment: Wednesday 2024-01-03 10:07 UTC
    at = datetime(2024, 1, 3, 10, 7, tzinfo=UTC).timestamp()

    # Then rate and cron expressions come due when AWS would fire them
    assert next_due("rate(15 minutes)", at) == at + 900
    assert next_due("rate(1 day)", at) == at + 86400
    assert next_due("cron(0/15 * * * ? *)", at) == datetime(2024, 1, 3, 10, 15, tzinfo=UTC).timestamp()
    assert next_due("cron(0 9 ? * MON-FRI *)", at) == datetime(2024, 1, 4, 9, 0, tzinfo=UTC).timestamp()
    assert next_due("cron(30 2 1 * ? *)", at) == datetime(2024, 2, 1, 2, 30, tzinfo=UTC).timestamp()
    assert CronExpression("0 12 ? * SUN *").next_after(at) == datetime(2024, 1, 7, 12, 0, tzinfo=UTC).timestamp()
