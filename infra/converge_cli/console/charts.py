"""Small charts as SVG geometry, computed here and drawn by the templates (no script, no chart library).

Each chart is a list of bars (rectangles with a CSS class per series) and labels, so the template
only loops and the numbers stay testable. Every text in a chart comes from data and is escaped by
the template like any other value.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from converge_cli.console.figures import OUTCOMES, Outcomes, QueueFigures


@dataclass(frozen=True)
class Bar:
    x: float
    y: float
    width: float
    height: float
    series: str  # a CSS class: the outcome, or visible / in-flight / delayed
    title: str  # the tooltip: what the bar counts


@dataclass(frozen=True)
class Label:
    x: float
    y: float
    text: str
    anchor: str = "start"


@dataclass
class Chart:
    title: str
    width: int
    height: int
    bars: list[Bar] = field(default_factory=list)
    labels: list[Label] = field(default_factory=list)
    total: int = 0


def outcome_charts(outcomes: Outcomes, width: int = 260, height: int = 70) -> list[Chart]:
    """One chart per job type: a stacked bar per hour, every job type on the same scale."""
    hours = len(outcomes.hours)
    peak = max(
        [
            sum(series[slot] for series in per_outcome.values())
            for per_outcome in outcomes.counts.values()
            for slot in range(hours)
        ]
        or [0]
    )
    plot_height = height - 18
    slot_width = width / max(hours, 1)
    charts = []
    for job_type, per_outcome in outcomes.counts.items():
        chart = Chart(job_type, width, height, total=outcomes.total(job_type))
        for slot, hour in enumerate(outcomes.hours):
            base = plot_height
            for outcome in OUTCOMES:
                value = per_outcome[outcome][slot]
                if not value:
                    continue
                bar_height = plot_height * value / peak
                base -= bar_height
                chart.bars.append(
                    Bar(
                        round(slot * slot_width + 2, 1),
                        round(base, 1),
                        round(slot_width - 4, 1),
                        round(bar_height, 1),
                        outcome,
                        f"{value} {outcome} at {hour:%H}:00",
                    )
                )
            chart.labels.append(
                Label(round(slot * slot_width + slot_width / 2, 1), height - 4, f"{hour:%H}h", "middle")
            )
        charts.append(chart)
    return charts


def depth_chart(queues: list[QueueFigures], width: int = 520, row: int = 22) -> Chart:
    """Horizontal stacked bars: each queue and its DLQ, visible / in flight / delayed."""
    depths = [depth for figures in queues for depth in (figures.source, figures.dlq) if depth is not None]
    peak = max([depth.total for depth in depths] or [0]) or 1
    label_width, number_width = 110, 50
    plot_width = width - label_width - number_width
    chart = Chart("queue and DLQ depth", width, row * len(depths) + 4, total=sum(depth.total for depth in depths))
    for position, depth in enumerate(depths):
        y = position * row + 2
        chart.labels.append(Label(0, y + row * 0.65, depth.name))
        x = float(label_width)
        for series, value in (("visible", depth.visible), ("in-flight", depth.in_flight), ("delayed", depth.delayed)):
            if not value:
                continue
            bar_width = plot_width * value / peak
            dead = " dlq" if depth.name.endswith("DLQ") else ""
            chart.bars.append(
                Bar(
                    round(x, 1), y + 3, round(bar_width, 1), row - 8, series + dead, f"{value} {series} in {depth.name}"
                )
            )
            x += bar_width
        chart.labels.append(Label(round(x + 6, 1), y + row * 0.65, str(depth.total)))
    return chart
