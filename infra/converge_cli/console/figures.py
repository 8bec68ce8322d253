"""The overview's figures: queue and DLQ depths, attention counts, toggles, recent outcomes per job type.

The same figures as `converge status`, computed from the same framework calls and kept in this one
module, so the console can use that command's functions once they exist. None of them scans a table:
attention counts are COUNT queries on the sparse attention index (their cost is the result), depths
are queue attributes, outcomes are the EMF metrics the pipeline publishes (CloudWatch, hourly sums).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from converge.flow.registry import Queue
from converge.model.states import ATTENTION_KEYS, Flag
from converge.observability import NAMESPACE
from converge_cli.support.target import Target
from localcloud.project import NoCatalogue

SERVICE = "converge"
"""The `service` dimension Powertools adds to every per-job-type metric set (converge.observability)."""
OUTCOMES = ("succeeded", "noop", "failed", "failed_final", "unknown", "rejected")
"""The pipeline's outcome metrics (`converge.outcomes.Outcome` values) charted per job type."""
ATTENTION_ORDER = ("UNKNOWN", "FAILED", "STUCK", "PAUSED", "REJECTED", "CONFLICT", "SCHEDULED", "EXPIRED", "CANCELLED")
"""UNKNOWN first: it is the one that waits for a person; then what else is listed (waiting, or ended by time or
by an operator)."""


@dataclass(frozen=True)
class Depth:
    name: str
    visible: int
    in_flight: int
    delayed: int = 0

    @property
    def total(self) -> int:
        return self.visible + self.in_flight + self.delayed


@dataclass(frozen=True)
class QueueFigures:
    queue: str
    source: Depth
    dlq: Depth | None


@dataclass(frozen=True)
class ToggleFigure:
    job_type: str
    toggle: str
    parameter: str
    enabled: bool
    source: str
    default_enabled: bool


@dataclass(frozen=True)
class Outcomes:
    """Hourly sums of each outcome per job type, oldest hour first."""

    hours: list[datetime]
    counts: dict[str, dict[str, list[int]]] = field(default_factory=dict)  # job type -> outcome -> per hour

    def total(self, job_type: str) -> int:
        return sum(sum(values) for values in self.counts.get(job_type, {}).values())


@dataclass(frozen=True)
class Overview:
    queues: list[QueueFigures]
    attention: dict[str, int]
    toggles: list[ToggleFigure]
    outcomes: Outcomes
    outcomes_problem: str | None = None
    catalogue_problem: str | None = None
    """Why no job is shown (no job catalogue was found), if none can be."""
    rate_limits: list[dict[str, Any]] = field(default_factory=list)
    """Each rate limit's keys that jobs wait on, as `converge status` shows them."""
    concurrency: list[dict[str, Any]] = field(default_factory=list)
    """Each concurrency cap's keys running, waiting or paused, as `converge status` shows them."""


def overview(deployment: Target, hours: int = 6, now: datetime | None = None) -> Overview:
    queues, attention = queue_figures(deployment), attention_counts(deployment)
    try:
        outcomes, problem = recent_outcomes(deployment, hours, now)
    except NoCatalogue as missing:  # queues and attention lists need no catalogue; toggles and outcomes do
        return Overview(queues, attention, [], Outcomes(hour_slots(hours, now)), catalogue_problem=str(missing))
    # The flow control's keys: one Query per limiter and per cap, through the framework's own overview
    flow = deployment.converge.overview()
    return Overview(
        queues, attention, toggles(deployment), outcomes, problem, None, flow.waiting_keys(), flow.capped_keys()
    )


def queue_figures(deployment: Target) -> list[QueueFigures]:
    settings, sqs = deployment.converge.settings, deployment.converge.clients.sqs
    figures = []
    for queue in Queue:
        source_url = settings.queues.url(queue)
        dlq_url = settings.per_queue[queue].dlq_url
        figures.append(
            QueueFigures(
                queue.value,
                depth(sqs, queue.value, source_url),
                depth(sqs, f"{queue.value} DLQ", dlq_url) if dlq_url else None,
            )
        )
    return figures


def depth(sqs: Any, name: str, url: str) -> Depth:
    attributes = sqs.get_queue_attributes(
        QueueUrl=url,
        AttributeNames=[
            "ApproximateNumberOfMessages",
            "ApproximateNumberOfMessagesNotVisible",
            "ApproximateNumberOfMessagesDelayed",
        ],
    )["Attributes"]
    return Depth(
        name,
        int(attributes.get("ApproximateNumberOfMessages", 0)),
        int(attributes.get("ApproximateNumberOfMessagesNotVisible", 0)),
        int(attributes.get("ApproximateNumberOfMessagesDelayed", 0)),
    )


def attention_counts(deployment: Target) -> dict[str, int]:
    """How many operations each attention key lists: COUNT queries on the sparse indexes, paged."""
    settings, dynamodb = deployment.converge.settings, deployment.converge.clients.dynamodb
    counts = {}
    for key in sorted(ATTENTION_KEYS, key=ATTENTION_ORDER.index):
        index, hash_name = (
            (settings.conflict_index, "conflict") if key == Flag.CONFLICT else (settings.attention_index, "attention")
        )
        request: dict[str, Any] = {
            "TableName": settings.state_table,
            "IndexName": index,
            "KeyConditionExpression": "#key = :key",
            "ExpressionAttributeNames": {"#key": hash_name},
            "ExpressionAttributeValues": {":key": {"S": key}},
            "Select": "COUNT",
        }
        total = 0
        while True:
            response = dynamodb.query(**request)
            total += int(response.get("Count", 0))
            if not response.get("LastEvaluatedKey"):
                break
            request["ExclusiveStartKey"] = response["LastEvaluatedKey"]
        counts[key] = total
    return counts


def toggles(deployment: Target) -> list[ToggleFigure]:
    """Every job's kill switch, read now; NoCatalogue when no catalogue names the jobs."""
    registry, converge = deployment.registry, deployment.converge
    figures = []
    for binding in registry:
        state = converge.toggles.state(binding.toggle_key, binding.default_enabled, fresh=True)
        figures.append(
            ToggleFigure(
                binding.job_type,
                binding.toggle_key,
                converge.toggles.parameter_name(binding.toggle_key),
                state.enabled,
                state.source.value,
                binding.default_enabled,
            )
        )
    return figures


def hour_slots(hours: int, now: datetime | None = None) -> list[datetime]:
    """The start of each of the last `hours` hours, the current one included, oldest first."""
    end = (now or datetime.now(UTC)).replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    return [end - timedelta(hours=hours - offset) for offset in range(hours)]


def recent_outcomes(deployment: Target, hours: int, now: datetime | None = None) -> tuple[Outcomes, str | None]:
    """Hourly sums of the outcome metrics per job type (GetMetricData; at most 500 series a call)."""
    job_types = [binding.job_type for binding in deployment.registry]
    slots = hour_slots(hours, now)
    start, end = slots[0], slots[-1] + timedelta(hours=1)
    series = [(job_type, outcome) for job_type in job_types for outcome in OUTCOMES]
    queries = [
        {
            "Id": f"m{position}",
            "MetricStat": {
                "Metric": {
                    "Namespace": NAMESPACE,
                    "MetricName": outcome,
                    "Dimensions": [{"Name": "job_type", "Value": job_type}, {"Name": "service", "Value": SERVICE}],
                },
                "Period": 3600,
                "Stat": "Sum",
            },
            "ReturnData": True,
        }
        for position, (job_type, outcome) in enumerate(series)
    ]
    counts: dict[str, dict[str, list[int]]] = {job_type: {o: [0] * hours for o in OUTCOMES} for job_type in job_types}
    cloudwatch = deployment.client("cloudwatch")
    try:
        for first in range(0, len(queries), 500):
            request: dict[str, Any] = {
                "MetricDataQueries": queries[first : first + 500],
                "StartTime": start,
                "EndTime": end,
            }
            while True:
                response = cloudwatch.get_metric_data(**request)
                for result in response.get("MetricDataResults", []):
                    job_type, outcome = series[int(result["Id"][1:])]
                    for stamp, value in zip(result.get("Timestamps", []), result.get("Values", []), strict=False):
                        slot = int((stamp.astimezone(UTC) - start).total_seconds() // 3600)
                        if 0 <= slot < hours:
                            counts[job_type][outcome][slot] += int(value)
                if not response.get("NextToken"):
                    break
                request["NextToken"] = response["NextToken"]
    except (BotoCoreError, ClientError) as exc:  # metrics are a view, not the truth: the page still shows the rest
        return Outcomes(slots, counts), f"outcome metrics unavailable: {type(exc).__name__}: {exc}"
    return Outcomes(slots, counts), None
