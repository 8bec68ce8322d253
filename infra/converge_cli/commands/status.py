"""`converge status`: one overview of a deployment, once or refreshed (`--watch`)."""

from __future__ import annotations

import time
from typing import Annotated, Any

import typer
from rich.console import Console

from converge.operate.overview import ATTENTION_COUNTED_AT_MOST, OUTCOMES
from converge_cli.support.errors import fails_cleanly
from converge_cli.support.operators import operator_at
from converge_cli.support.options import Json, on_deployment, print_json
from converge_cli.support.output import Column, records, say, stdout, styled
from converge_cli.support.target import Target

_sleep = time.sleep  # the wait between refreshes (a test ends the watch here, as Ctrl-C would)

STATUS_HELP = (
    "One overview: each queue's and DLQ's depth, in-flight and delayed messages and oldest message age; each "
    "kill switch; how many operations each attention key lists; each rate limit's keys that jobs wait on, "
    "with their queue and next start; each concurrency cap's keys with what runs, how many wait and when the next "
    "tries, and who paused a key; the last hour's outcomes per job type.\n\n"
    "Depths come from SQS, attention counts from the sparse indexes (capped at 10000 per key), ages and "
    "outcomes from CloudWatch (SQS's ApproximateAgeOfOldestMessage and the framework's EMF counts): shown as "
    "'-' where CloudWatch has no data, as on the local cloud, whose functions' EMF lines stay in their logs.\n\n"
    "--watch N refreshes every N seconds until Ctrl-C (which exits 0)."
)


@on_deployment
def status(
    watch: Annotated[
        float | None, typer.Option("--watch", min=1, help="Refresh every this many seconds, until Ctrl-C.")
    ] = None,
    *,
    deployment: Target,
    as_json: Json = False,
) -> None:
    if watch is None:
        _once(deployment, as_json, clear=False)
        return
    try:
        while True:
            _once(deployment, as_json, clear=not as_json)
            _sleep(watch)
    except KeyboardInterrupt:
        raise typer.Exit(0) from None


STATUS = fails_cleanly(status)


def _once(deployment: Target, as_json: bool, clear: bool) -> None:
    deployment.registry  # noqa: B018 - its kill switches and outcomes are the catalogue's jobs: refuse if none
    operator = operator_at(deployment)  # the DLQ URLs from the stack's outputs
    snapshot = deployment.converge.overview(operator.dlq_urls).snapshot()
    if as_json:
        print_json(snapshot)
        return
    console = stdout()
    if clear:
        console.clear()
    show(console, snapshot)


def show(console: Console, snapshot: dict[str, Any]) -> None:
    say(console, styled("converge status", "bold"), f" at {snapshot['at']}")
    right = "right"
    records(
        console,
        [
            "queue",
            Column("visible", right),
            Column("in flight", right),
            Column("delayed", right),
            Column("oldest (s)", right),
            Column("DLQ", right),
            Column("DLQ oldest (s)", right),
        ],
        [
            [
                entry["queue"],
                _n(entry["visible"]),
                _n(entry["in_flight"]),
                _n(entry["delayed"]),
                _n(entry["oldest_age_seconds"]),
                _n(entry["dlq"]["visible"]),
                _n(entry["dlq"]["oldest_age_seconds"]),
            ]
            for entry in snapshot["queues"]
        ],
        title="queues",
    )
    records(
        console,
        ["job type", "toggle", "state", "source"],
        [
            [
                row["job_type"],
                row["toggle"],
                styled("on", "green") if row["enabled"] else styled("off", "red"),
                row["source"],
            ]
            for row in snapshot["toggles"]
        ],
        title="kill switches",
    )
    # One row per key, not one column: nine keys side by side are wider than 80 columns, and a table too wide
    # for the terminal becomes blocks headed by the first value, which would lose the first key's label.
    attention = snapshot["attention"]
    records(
        console,
        ["key", Column("operations", right)],
        [[key, _capped(attention[key])] for key in sorted(attention, key=_attention_rank)],
        title="needs attention (converge ops list --state KEY)",
    )
    if snapshot.get("rate_limits"):
        records(
            console,
            ["limiter", "key", "pace", Column("queued", right), "next start"],
            [
                [row["limiter"], row["key"], row["pace"], _n(row["queued"]), row["next_start"]]
                for row in snapshot["rate_limits"]
            ],
            title="rate limits: keys jobs wait on (SCHEDULED, listed with their start)",
        )
    if snapshot.get("concurrency"):
        records(
            console,
            ["cap", "key", "running", Column("waiting", right), "next start", "paused by"],
            [
                [
                    row["cap"],
                    row["key"],
                    ", ".join(row["running"]) or "-",
                    _n(row["waiting"]),
                    row["next_start"] or "-",
                    row["paused_by"] or "-",
                ]
                for row in snapshot["concurrency"]
            ],
            title="concurrency caps: keys running, waiting or paused (converge limits running)",
        )
    outcomes = snapshot["outcomes_last_hour"]
    if not outcomes:
        say(console, styled("outcomes, last hour", "bold"))
        say(console, "- (no EMF counts in CloudWatch for the last hour)")
        return
    names = [name for name in OUTCOMES if any(name in counts for counts in outcomes.values())]
    records(
        console,
        ["job type", *(Column(name, right) for name in names)],
        [[job_type, *(_n(counts.get(name, 0)) for name in names)] for job_type, counts in outcomes.items()],
        title="outcomes, last hour",
    )


ATTENTION_ORDER = ("UNKNOWN", "FAILED", "STUCK", "PAUSED", "REJECTED", "CONFLICT", "SCHEDULED", "EXPIRED", "CANCELLED")
"""UNKNOWN first (it waits for a person), then the other problems, then what waits for, or ended by, a time or an
operator; a key not named here comes last."""


def _attention_rank(key: str) -> tuple[int, str]:
    return (ATTENTION_ORDER.index(key) if key in ATTENTION_ORDER else len(ATTENTION_ORDER), key)


def _n(value: Any) -> str:
    if value is None:
        return "-"
    return f"{value:g}" if isinstance(value, float) else str(value)


def _capped(value: int) -> str:
    return f"{value}+" if value >= ATTENTION_COUNTED_AT_MOST else str(value)


def _switch(enabled: bool) -> Any:
    return styled("on", "green") if enabled else styled("off", "red")
