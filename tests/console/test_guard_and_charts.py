"""The console's pure parts: whom it answers (Host, Origin, form token) and the chart geometry."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from converge_cli.console.charts import depth_chart, outcome_charts
from converge_cli.console.figures import OUTCOMES, Depth, Outcomes, QueueFigures
from converge_cli.console.guard import Origins, Refused, check_token, is_loopback, new_token

SERVING = Origins.serving("127.0.0.1", 8123)


@pytest.mark.parametrize("host", ["127.0.0.1:8123", "localhost:8123", "LOCALHOST:8123"])
def test_its_own_names_are_served(host: str) -> None:
    SERVING.check("GET", host, None, None)
    SERVING.check("POST", host, f"http://{host.lower()}", "same-origin")


@pytest.mark.parametrize(
    ("method", "host", "origin", "site"),
    [
        ("GET", "attacker.example:8123", None, None),  # DNS rebinding: a foreign name for 127.0.0.1
        ("GET", "127.0.0.1:9999", None, None),  # another port is another origin
        ("GET", None, None, None),  # HTTP/1.0 without a Host
        ("POST", "127.0.0.1:8123", "http://attacker.example", "cross-site"),
        ("POST", "127.0.0.1:8123", "null", "cross-site"),  # a data: or sandboxed page
        ("POST", "127.0.0.1:8123", "https://127.0.0.1:8123", None),  # another scheme
        ("POST", "127.0.0.1:8123", None, "cross-site"),  # no Origin, but the browser says where it came from
    ],
)
def test_anything_else_is_refused(method: str, host: str | None, origin: str | None, site: str | None) -> None:
    with pytest.raises(Refused):
        SERVING.check(method, host, origin, site)


def test_form_tokens_must_be_the_sessions_own() -> None:
    token = new_token()
    check_token(token, token)
    assert len(token) >= 40 and new_token() != token
    for expected, given in [(token, None), (token, ""), (None, token), (token, token[:-1] + "x"), (token, token + "x")]:
        with pytest.raises(Refused):
            check_token(expected, given)


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.0.0.2", True),
        ("::1", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("192.168.1.5", False),
        ("example.com", False),
    ],
)
def test_only_loopback_addresses_may_be_served(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_outcome_bars_stack_per_hour_on_one_scale_for_every_job_type() -> None:
    # Given two job types: one with 4 successes and 2 failures in the last hour, one with 3 successes before
    start = datetime(2026, 12, 1, 9, tzinfo=UTC)
    hours = [start + timedelta(hours=n) for n in range(3)]
    counts = {name: {outcome: [0, 0, 0] for outcome in OUTCOMES} for name in ("a.v1", "b.v1")}
    counts["a.v1"]["succeeded"][2], counts["a.v1"]["failed"][2] = 4, 2
    counts["b.v1"]["succeeded"][0] = 3
    # When they are charted
    first, second = outcome_charts(Outcomes(hours, counts), width=300, height=78)
    # Then the busiest hour fills the plot (60 px) and each bar is proportional on the same scale
    assert [(bar.series, bar.height) for bar in first.bars] == [("succeeded", 40.0), ("failed", 20.0)]
    assert first.bars[1].y + first.bars[1].height == first.bars[0].y  # stacked
    assert [(bar.series, bar.height, bar.x) for bar in second.bars] == [("succeeded", 30.0, 2.0)]
    assert (first.total, second.total) == (6, 3)
    assert [label.text for label in first.labels] == ["09h", "10h", "11h"]


def test_depth_bars_are_proportional_and_dead_letters_marked() -> None:
    queues = [
        QueueFigures("critical", Depth("critical", 6, 2), Depth("critical DLQ", 4, 0)),
        QueueFigures("bulk", Depth("bulk", 0, 0), None),
    ]
    chart = depth_chart(queues, width=520)
    widths = [(bar.series, bar.width) for bar in chart.bars]
    assert widths == [("visible", 270.0), ("in-flight", 90.0), ("visible dlq", 180.0)]
    assert [label.text for label in chart.labels] == ["critical", "8", "critical DLQ", "4", "bulk", "0"]
    assert chart.total == 12
