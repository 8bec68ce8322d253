"""One overview of a deployment for an operator: queues, kill switches, attention counts, recent outcomes.

Every figure comes from where it is cheapest and exact: queue and DLQ depths from SQS's attributes;
the keys of rate limits that jobs wait on from their limiters' items (one Query per limiter); the oldest
message's age and the last hour's outcomes per job type from CloudWatch (SQS's own
ApproximateAgeOfOldestMessage, and the framework's EMF counts in the Converge namespace), because
the state table has no index by time and counting outcomes there would be a scan of every
operation; the attention counts from the sparse indexes (a COUNT query costs the entries counted,
capped at ATTENTION_COUNTED_AT_MOST per key). Where CloudWatch has no data (a local cloud, where
EMF lines stay in the functions' logs) the figure is None, never a guess.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from converge.flow.concurrency import ConcurrencyCaps
from converge.flow.limits import RateLimits
from converge.flow.registry import Queue, Queues, Registry
from converge.flow.toggles import Toggles
from converge.model import states
from converge.model.clock import Clock, iso
from converge.operate.deadletters import DlqUrls
from converge.store.listings import Listings

NAMESPACE = "Converge"
OUTCOMES = ("succeeded", "noop", "failed", "failed_final", "retried", "paused", "rejected", "unknown")
"""The framework's EMF counts per job type that say how work ended (or did not, yet)."""
DIMENSIONS = {"job_type", "service"}
ATTENTION_COUNTED_AT_MOST = 10_000
OUTCOME_WINDOW_SECONDS = 3600
AGE_WINDOW_SECONDS = 300


class Overview:
    def __init__(
        self,
        queues: Queues,
        dlq_urls: DlqUrls,
        registry: Registry,
        toggles: Toggles,
        listings: Listings,
        sqs_client: Any,
        cloudwatch_client: Callable[[], Any],
        clock: Clock,
        rate_limits: RateLimits | None = None,
        concurrency_caps: ConcurrencyCaps | None = None,
    ) -> None:
        """The runtime builds one (`Converge.overview`); CloudWatch's client is built on first use."""
        self._queue_urls = queues
        self._dlqs = dlq_urls.routes(queues)
        self._registry = registry
        self._toggle_states = toggles
        self._listings = listings
        self._sqs = sqs_client
        self._cloudwatch_client = cloudwatch_client
        self._clock = clock
        self._rate_limits = rate_limits
        self._caps = concurrency_caps

    def snapshot(self) -> dict[str, Any]:
        now = self._clock.now()
        queues = self._queues()
        ages = self._oldest_ages(now, [entry["name"] for entry in queues] + [e["dlq"]["name"] for e in queues])
        for entry in queues:
            entry["oldest_age_seconds"] = ages.get(entry.pop("name"))
            entry["dlq"]["oldest_age_seconds"] = ages.get(entry["dlq"].pop("name"))
        return {
            "at": iso(now),
            "queues": queues,
            "toggles": self._toggles(),
            "attention": self._attention(),
            "attention_counted_at_most": ATTENTION_COUNTED_AT_MOST,
            "outcomes_last_hour": self._outcomes(now),
            "outcomes_source": f"CloudWatch: the {NAMESPACE} namespace's EMF counts per job type",
            "rate_limits": self.waiting_keys(),
            "concurrency": self.capped_keys(),
        }

    def waiting_keys(self) -> list[dict[str, Any]]:
        """Each limiter's keys that jobs wait on (one Query per limiter, over the keys used within a day)."""
        if self._rate_limits is None:
            return []
        return [
            {
                "limiter": waiting.limiter.name,
                "key": waiting.key,
                "pace": waiting.limiter.describe(),
                "queued": waiting.queued,
                "next_start": iso(waiting.next_start),
            }
            for waiting in self._rate_limits.waiting()
        ]

    def capped_keys(self) -> list[dict[str, Any]]:
        """Each concurrency cap's keys with operations running, waiting, or paused (one Query per cap)."""
        if self._caps is None:
            return []
        return [
            {
                "cap": key.cap.name,
                "key": key.key,
                "limit": key.cap.describe(),
                "running": list(key.running),
                "waiting": key.waiting,
                "next_start": iso(key.next_start) if key.next_start is not None else None,
                "newest_waiting": key.newest,
                "paused_by": key.paused_by,
            }
            for key in self._caps.running()
        ]

    # -- queues ----------------------------------------------------------------------------------------------

    def _queues(self) -> list[dict[str, Any]]:
        rows = []
        for queue in Queue:
            url = self._queue_urls.url(queue)
            route = self._dlqs.get(queue)
            rows.append(
                {"queue": queue.value, **self._depth(url), "dlq": self._depth(route.dlq_url if route else None)}
            )
        return rows

    def _depth(self, url: str | None) -> dict[str, Any]:
        if not url:
            return {"name": None, "visible": None, "in_flight": None, "delayed": None}
        attributes = self._sqs.get_queue_attributes(
            QueueUrl=url,
            AttributeNames=[
                "ApproximateNumberOfMessages",
                "ApproximateNumberOfMessagesNotVisible",
                "ApproximateNumberOfMessagesDelayed",
            ],
        )["Attributes"]
        return {
            "name": url.rstrip("/").rsplit("/", 1)[-1],
            "visible": int(attributes.get("ApproximateNumberOfMessages", 0)),
            "in_flight": int(attributes.get("ApproximateNumberOfMessagesNotVisible", 0)),
            "delayed": int(attributes.get("ApproximateNumberOfMessagesDelayed", 0)),
        }

    # -- toggles and attention -----------------------------------------------------------------------------------

    def _toggles(self) -> list[dict[str, Any]]:
        toggles = self._toggle_states
        rows = []
        for binding in self._registry:
            state = toggles.state(binding.toggle_key, binding.default_enabled)
            rows.append(
                {
                    "job_type": binding.job_type,
                    "toggle": binding.toggle_key,
                    "enabled": state.enabled,
                    "source": state.source.value,
                }
            )
        return rows

    def _attention(self) -> dict[str, int]:
        """How many operations each attention key lists (COUNT queries on the sparse indexes)."""
        return {str(key): self._listings.count(key, ATTENTION_COUNTED_AT_MOST) for key in states.ATTENTION_KEYS}

    # -- CloudWatch ----------------------------------------------------------------------------------------------

    def _cloudwatch(self) -> Any:
        return self._cloudwatch_client()

    def _oldest_ages(self, now: float, names: list[str | None]) -> dict[str, float]:
        queries = [
            {
                "Id": f"age{n}",
                "MetricStat": {
                    "Metric": {
                        "Namespace": "AWS/SQS",
                        "MetricName": "ApproximateAgeOfOldestMessage",
                        "Dimensions": [{"Name": "QueueName", "Value": name}],
                    },
                    "Period": AGE_WINDOW_SECONDS,
                    "Stat": "Maximum",
                },
            }
            for n, name in enumerate(names)
            if name
        ]
        by_id = self._metric_data(queries, now, AGE_WINDOW_SECONDS)
        return {name: by_id[f"age{n}"] for n, name in enumerate(names) if name and f"age{n}" in by_id}

    def _outcomes(self, now: float) -> dict[str, dict[str, int]]:
        """The last hour's EMF counts per job type and outcome (those CloudWatch holds)."""
        metrics: list[dict[str, Any]] = []
        seen: set[tuple[str, tuple[tuple[str, str], ...]]] = set()
        for name in OUTCOMES:
            paginator = self._cloudwatch().get_paginator("list_metrics")
            for page in paginator.paginate(Namespace=NAMESPACE, MetricName=name, RecentlyActive="PT3H"):
                for metric in page.get("Metrics", []):
                    # The dimensions the framework's counts carry in a function (and the dashboard groups by).
                    dimensions = tuple(sorted((d["Name"], d["Value"]) for d in metric.get("Dimensions", [])))
                    if {key for key, _ in dimensions} != DIMENSIONS or (name, dimensions) in seen:
                        continue  # another set, or listed again (a listing may repeat a metric)
                    seen.add((name, dimensions))
                    metrics.append(metric)
        queries = [
            {"Id": f"m{n}", "MetricStat": {"Metric": metric, "Period": OUTCOME_WINDOW_SECONDS, "Stat": "Sum"}}
            for n, metric in enumerate(metrics)
        ]
        by_id = self._metric_data(queries, now, OUTCOME_WINDOW_SECONDS)
        outcomes: dict[str, dict[str, int]] = defaultdict(dict)
        for n, metric in enumerate(metrics):
            value = by_id.get(f"m{n}")
            if value:
                job_type, name = str(_dimension(metric, "job_type")), metric["MetricName"]
                outcomes[job_type][name] = outcomes[job_type].get(name, 0) + int(value)
        return {job_type: dict(sorted(counts.items())) for job_type, counts in sorted(outcomes.items())}

    def _metric_data(self, queries: list[dict[str, Any]], now: float, window: int) -> dict[str, float]:
        """One GetMetricData per 500 queries over the last `window` seconds: each query's single value."""
        end = datetime.fromtimestamp(now, tz=UTC)
        found: dict[str, float] = {}
        for start in range(0, len(queries), 500):
            response = self._cloudwatch().get_metric_data(
                MetricDataQueries=queries[start : start + 500],
                StartTime=end - timedelta(seconds=window),
                EndTime=end,
            )
            for result in response.get("MetricDataResults", []):
                values = result.get("Values") or []
                if values:
                    found[result["Id"]] = float(sum(values) if result["Id"].startswith("m") else max(values))
        return found


def _dimension(metric: dict[str, Any], name: str) -> str | None:
    return next((d["Value"] for d in metric.get("Dimensions", []) if d["Name"] == name), None)
