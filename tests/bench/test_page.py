"""docs/benchmarks.md is the bench's own output: the page the latest report renders, saying when, where and how
loaded the run was, and every target with its verdict. Nothing here times anything."""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import pytest

from converge_bench import page
from tests.conftest import TEMPLATE

ROOT = TEMPLATE.parent


@pytest.fixture(scope="module")
def latest() -> dict[str, Any]:
    return json.loads(page.REPORT.read_text())


def test_the_page_is_what_the_latest_report_renders(latest: dict[str, Any]) -> None:
    # Given the report `converge bench --write-docs` wrote beside the page / Then the page is its rendering, unchanged
    assert page.PAGE.read_text() == page.render(latest), (
        "docs/benchmarks.md is written by `converge bench --write-docs` (make bench-docs), not by hand"
    )


def test_the_page_says_when_where_and_how_loaded_the_run_was(latest: dict[str, Any]) -> None:
    run = latest["run"]
    text = page.render(latest)
    # Then it names the command, the date, the cores, the load before and after, and how long the run took
    assert f"`{run['command']}` wrote it on {run['date']}" in text
    assert f"a machine of {run['cpus']} cores" in text
    for loads in (run["load_before"], run["load_after"]):
        assert ", ".join(f"{value:.2f}" for value in loads) in text
    minutes, seconds = divmod(round(run["seconds"]), 60)
    assert f"the run took {minutes} min {seconds} s" in text


def test_every_target_is_on_the_page_with_its_verdict_and_spread(latest: dict[str, Any]) -> None:
    text = page.render(latest)
    for target in latest["targets"]:
        row = next(line for line in text.splitlines() if line.startswith(f"| {target['name']} |"))
        assert row.endswith("| **PASS** |" if target["pass"] else "| **FAIL** |"), row
        if target.get("spread"):
            low, high = target["spread"]
            assert f"{low:g}{page.DASH}{high:g}" in row
    # And every ratio over rounds shows its median, its spread and each round's value
    for key, label in page.ROUNDS:
        values = latest["round_ratios"][key]
        row = next(line for line in text.splitlines() if line.startswith(f"| {label} |"))
        assert row.endswith("| " + " ".join(f"{value:.2f}" for value in values) + " |"), row


def test_a_machine_that_was_not_quiet_is_said_so(latest: dict[str, Any]) -> None:
    # Given the same report from a quiet machine, and from a busy one
    quiet, busy = copy.deepcopy(latest), copy.deepcopy(latest)
    cpus = latest["run"]["cpus"]
    quiet["run"]["load_before"] = quiet["run"]["load_after"] = [cpus / 4, cpus / 4, cpus / 4]
    busy["run"]["load_after"] = [cpus * 2.0, cpus, cpus]
    # Then only the busy run's page says that the machine was not quiet
    assert "The machine was not quiet" not in page.render(quiet)
    assert "The machine was not quiet" in page.render(busy)


def test_the_page_has_the_sections_other_pages_link_to(latest: dict[str, Any]) -> None:
    headings = re.findall(r"^#+ (.*)$", page.render(latest), flags=re.MULTILINE)
    for heading in (
        "Benchmarks",
        "The latest run",
        "Cold start as Lambda pays it",
        "SnapStart: what it costs and when it pays off",
        "Batches",
        "How it is measured",
    ):
        assert heading in headings, heading


def test_the_readme_quotes_no_benchmark_figure() -> None:
    # The figures live on the page the bench writes; the README only points to it
    readme = (ROOT / "README.md").read_text()
    for pattern in (r"\d\s*\N{MULTIPLICATION SIGN}", r"\d\s*x faster", r"\d\s*(ms|µs)\b", r"US\$\s*\d", r"\d\s*WRU"):
        assert not re.search(pattern, readme), pattern


def test_write_puts_the_report_beside_the_page(latest: dict[str, Any], tmp_path) -> None:
    target, report = tmp_path / "benchmarks.md", tmp_path / "latest-report.json"
    page.write(latest, target, report)
    assert json.loads(report.read_text()) == latest
    assert target.read_text() == page.render(latest)


def test_the_run_names_its_command_without_its_defaults() -> None:
    from converge_bench.command import _command

    assert _command(400, 5, False, True, 1_000, False, 100_000, True) == "converge bench --write-docs"
    assert (
        _command(700, 7, True, False, 0, True, 100_000, False)
        == "converge bench --jobs 700 --rounds 7 --batch-children 0 --scale-check --batch-large --no-cold-starts"
    )


def test_the_flow_control_section_gives_the_hottest_limiter_item_when_measured(latest: dict[str, Any]) -> None:
    # Given a report that measured the limiter's item apart, one key and the same over four items
    result = copy.deepcopy(latest)
    hot = {"jobs_per_second": 1000, "write_units_per_job": 1.0, "write_units_per_second": 1000.0, "limit": 1000.0}
    result["flow_control"]["hot_limiter_key"] = hot
    result["flow_control"]["hot_sharded_limiter_key"] = {**hot, "write_units_per_second": 250.0, "shards": 4}
    result["flow_control"]["hot_cap_key"] = {**hot, "write_units_per_job": 2.0, "write_units_per_second": 2000.0}
    # When the page is rendered / Then its flow control section says each figure
    text = page.render(result)
    section = text[text.index("## Flow control") : text.index("## How it is measured")]
    assert "1,000 write units a second on one item, against the 1,000 one partition takes" in section
    assert "the key over 4 items: 250 on the hottest" in section
    assert "A cap's key takes 2 a job" in section and "2,000 a second at 1,000 starts a second" in section
