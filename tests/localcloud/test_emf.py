"""EMF log lines as CloudWatch metric data, as the service extracts them from Powertools' output."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from localcloud.emf import metric_data

LINE = {
    "_aws": {
        "Timestamp": 1796126116669,
        "CloudWatchMetrics": [
            {
                "Namespace": "Converge",
                "Dimensions": [["job_type", "service"]],
                "Metrics": [{"Name": "succeeded", "Unit": "Count"}],
            }
        ],
    },
    "job_type": "email.password-reset.v1",
    "service": "converge",
    "succeeded": [1.0, 2.0],
}


def test_each_value_of_an_emf_line_is_a_datum_with_its_dimensions():
    [(namespace, data)] = metric_data(json.dumps(LINE))
    assert namespace == "Converge"
    assert [datum["Value"] for datum in data] == [1.0, 2.0]
    assert data[0]["Dimensions"] == [
        {"Name": "job_type", "Value": "email.password-reset.v1"},
        {"Name": "service", "Value": "converge"},
    ]
    assert data[0]["Timestamp"] == datetime.fromtimestamp(1796126116.669, UTC)
    assert data[0]["MetricName"] == "succeeded" and data[0]["Unit"] == "Count"


def test_other_lines_carry_no_metrics():
    for line in ('{"level": "INFO", "message": "operation settled"}', 'not json "_aws"', '{"_aws": {}}', ""):
        assert metric_data(line) == []
