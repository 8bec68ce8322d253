"""The operations dashboard: built from the template's own resources, and showing what the framework emits."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest

from converge.model.outcomes import Outcome
from localcloud import LocalCloud

# Counts the framework emits per job type besides the outcomes (pipeline.py, resumer.py), and the
# reconciler's count of operations it found stuck.
OTHER_COUNTS = {"retried", "paused", "resumed", "stuck"}
QUERY = re.compile(r"SELECT SUM\((\w+)\) FROM SCHEMA\(Converge, job_type, service\) GROUP BY job_type")


@pytest.fixture(scope="module")
def dashboard() -> Iterator[tuple[dict[str, Any], LocalCloud]]:
    # Given the template deployed (moto's CloudFormation creates dashboards itself: no gap to close)
    with pytest.MonkeyPatch.context() as patch:
        for name, value in {"AWS_ACCESS_KEY_ID": "t", "AWS_SECRET_ACCESS_KEY": "t", "AWS_REGION": "us-east-1"}.items():
            patch.setenv(name, value)
        patch.delenv("AWS_ENDPOINT_URL", raising=False)
        with LocalCloud.start() as cloud:
            body = cloud.client("cloudwatch").get_dashboard(DashboardName=cloud.outputs["DashboardName"])
            yield json.loads(body["DashboardBody"]), cloud


def metrics_of(body: dict[str, Any]) -> list[list[Any]]:
    return [metric for widget in body["widgets"] for metric in widget["properties"].get("metrics", [])]


def test_queue_widgets_name_every_deployed_queue_and_dlq(dashboard):
    body, cloud = dashboard
    # Then depth and age cover each source queue, depth covers each DLQ and the relay's failure queue,
    # all by the names the stack deployed (resolved from the template's own resources)
    names = {output: cloud.outputs[output].rsplit("/", 1)[1] for output in cloud.outputs if output.endswith("QueueUrl")}
    names |= {output: cloud.outputs[output].rsplit("/", 1)[1] for output in cloud.outputs if output.endswith("DlqUrl")}
    by_metric: dict[str, set[str]] = {}
    for metric in metrics_of(body):
        if metric[0] == "AWS/SQS":
            by_metric.setdefault(metric[1], set()).add(metric[3])
    sources = {names[f"{q}QueueUrl"] for q in ("Critical", "Default", "Bulk")}
    dlqs = {names[f"{q}DlqUrl"] for q in ("Critical", "Default", "Bulk")}
    assert by_metric["ApproximateAgeOfOldestMessage"] == sources
    assert by_metric["ApproximateNumberOfMessagesVisible"] == sources | dlqs | {names["RelayFailureQueueUrl"]}


def test_the_relays_iterator_age_is_the_deployed_relay(dashboard):
    body, cloud = dashboard
    [relay] = [m for m in metrics_of(body) if m[:2] == ["AWS/Lambda", "IteratorAge"]]
    assert relay[3] == cloud.functions["OutboxRelayFunction"].name


def test_outcome_queries_read_the_framework_counts_by_job_type(dashboard):
    body, _ = dashboard
    expressions = [m[0]["expression"] for m in metrics_of(body) if isinstance(m[0], dict)]
    counted = set()
    for expression in expressions:
        # Then each is a Metrics Insights query over namespace Converge, grouped by the job_type dimension
        match = re.fullmatch(
            r"SELECT SUM\((\w+)\) FROM SCHEMA\(Converge, job_type, service\) GROUP BY job_type", expression
        )
        assert match, expression
        counted.add(match.group(1))
    # And every name is one the framework emits; the final outcomes, UNKNOWN and stuck are all there
    assert counted <= {outcome.value for outcome in Outcome} | OTHER_COUNTS
    assert {"succeeded", "noop", "failed", "failed_final", "rejected", "unknown", "stuck"} <= counted
