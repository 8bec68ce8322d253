"""Metrics from the functions' logs, as CloudWatch extracts them: EMF lines become metric data.

On AWS, a log line in the Embedded Metric Format (Powertools' metrics) is turned into CloudWatch
metrics by the service itself. Here a log listener does the same into the emulated CloudWatch, so
whatever reads the metrics (the console's outcome charts, the dashboard's widgets) reads them from
the same API on both.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
from datetime import UTC, datetime
from typing import Any

LOG = logging.getLogger(__name__)


def metric_data(line: str) -> list[tuple[str, list[dict[str, Any]]]]:
    """(namespace, MetricData for PutMetricData) of one EMF log line; [] for any other line."""
    if '"_aws"' not in line:
        return []
    try:
        document = json.loads(line)
        meta = document["_aws"]
        stamp = datetime.fromtimestamp(int(meta["Timestamp"]) / 1000, UTC)
        directives = meta["CloudWatchMetrics"]
    except (ValueError, KeyError, TypeError):
        return []
    found = []
    for directive in directives:
        dimension_sets = directive.get("Dimensions") or [[]]
        data = []
        for metric in directive.get("Metrics", []):
            values = document.get(metric.get("Name"))
            values = values if isinstance(values, list) else [values]
            numbers = [float(value) for value in values if isinstance(value, int | float)]
            for names in dimension_sets:
                dimensions = [{"Name": name, "Value": str(document[name])} for name in names if name in document]
                data += [
                    {
                        "MetricName": metric["Name"],
                        "Dimensions": dimensions,
                        "Timestamp": stamp,
                        "Value": number,
                        "Unit": metric.get("Unit", "None"),
                    }
                    for number in numbers
                ]
        if data:
            found.append((str(directive.get("Namespace", "aws-embedded-metrics")), data))
    return found


class EmfToCloudWatch:
    """A log listener (function, line) whose EMF lines are put into CloudWatch from a thread of its own.

    The listener only queues the line: it is called while the function's output is captured, and
    an HTTP call there would hold the capture (and the function) for the call's length.
    """

    def __init__(self, cloudwatch: Any) -> None:
        self._cloudwatch = cloudwatch
        self._lines: queue.SimpleQueue[tuple[str, str] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="localcloud-emf", daemon=True)

    def __call__(self, function: str, line: str) -> None:
        if '"_aws"' in line:
            self._lines.put((function, line))

    def start(self) -> EmfToCloudWatch:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._lines.put(None)
        if self._thread.is_alive():
            self._thread.join(timeout=10)

    def _run(self) -> None:
        while (item := self._lines.get()) is not None:
            function, line = item
            for namespace, data in metric_data(line):
                for first in range(0, len(data), 1000):
                    try:
                        self._cloudwatch.put_metric_data(Namespace=namespace, MetricData=data[first : first + 1000])
                    except Exception:  # a lost metric must never stop the ones after it
                        LOG.exception("could not put %s's metrics", function)
