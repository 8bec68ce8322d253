"""The report's ratios, spreads and targets, from figures given here: nothing is timed (speed is the benchmark's)."""

from __future__ import annotations

from typing import Any

import pytest

from converge_bench import coldstart, report
from converge_bench.attention import AttentionCost


def _listing() -> list[AttentionCost]:
    return [AttentionCost(1_000, 60, 50, 1.5), AttentionCost(100_000, 60, 50, 1.5)]


def _result(**ratios: Any) -> dict[str, Any]:
    """A report as `run()` leaves it before its targets: converge's happy path, and the ratios given."""
    rounds = ratios.pop("rounds", {})
    spread = {key: [value, value] for key, value in ratios.items() if isinstance(value, float)}
    return {
        "converge": {"write_units_per_job": 3.0, "read_units_per_job": 0.0},
        "ratios": {"usd_per_million_jobs": 0.45, **ratios},
        "spread": spread,
        "round_ratios": rounds,
        "scale": {"small_jobs": 25, "large_jobs": 500},
        "cold_start": {},
    }


def _verdicts(result: dict[str, Any]) -> dict[str, bool]:
    return {target["name"]: target["pass"] for target in report.targets(result, 2.0, 2.0, _listing())}


def test_the_overhead_target_is_met_only_if_every_round_meets_it() -> None:
    # Given a median under 0.7x but one round above it
    result = _result(overhead_us_per_message=0.6, rounds={"overhead_us_per_message": [0.55, 0.6, 0.62, 0.6, 0.72]})

    # Then the overhead target fails, and it reports the worst round with the median and spread beside it
    targets = report.targets(result, 2.0, 2.0, _listing())
    overhead = next(target for target in targets if target["name"].startswith("overhead per message"))
    assert (overhead["value"], overhead["limit"], overhead["pass"]) == (0.72, 0.7, False)
    assert overhead["median"] == 0.6 and "5 rounds" in overhead["name"]

    # ...and passes once every round is at or under 0.7x
    result["round_ratios"]["overhead_us_per_message"][-1] = 0.7
    assert next(t for t in report.targets(result, 2.0, 2.0, _listing()) if t["name"].startswith("overhead"))["pass"]


@pytest.mark.parametrize(
    ("key", "limit"),
    [("cold_start_same_job", 0.6), ("cold_start_bare", 1.0), ("cold_start_enqueue_api_same_job", 0.8)],
)
def test_each_cold_start_target_has_its_limit(key: str, limit: float) -> None:
    at_limit = _result(**{key: limit})
    over = _result(**{key: round(limit + 0.001, 3)})
    name = next(name for name in _verdicts(at_limit) if report.TARGETS[key][0] in name)
    assert _verdicts(at_limit)[name] is True
    assert _verdicts(over)[name] is False
    target = next(t for t in report.targets(over, 2.0, 2.0, _listing()) if t["name"] == name)
    assert target["spread"] == [round(limit + 0.001, 3)] * 2  # every ratio target carries its spread


def test_no_cold_start_target_without_cold_starts_and_none_against_the_bare_baseline_at_0_8() -> None:
    result = _result()
    del result["cold_start"]
    assert not any("cold start" in name for name in _verdicts(result))
    limits = {(t["name"], t["limit"]) for t in report.targets(_result(), 2.0, 2.0, _listing())}
    assert not any("bare" in name and "cold start" in name and limit == 0.8 for name, limit in limits)


def test_a_missing_round_makes_no_median() -> None:
    assert report.median_and_spread([0.5, 0.7, 0.6]) == (0.6, [0.5, 0.7])
    assert report.median_and_spread([0.5, None, 0.6]) == (None, None)
    assert report.median_and_spread([]) == (None, None)


def _sample(total: float) -> coldstart.Sample:
    return coldstart.Sample(
        total_ms=total + 100, interpreter_ms=10.0, import_ms=total / 2, first_event_ms=total / 2 - 10, cpu_ms=total
    )


def test_cold_start_ratios_are_taken_per_round() -> None:
    # Given five rounds of each subject, converge's worker twice as slow as the bare baseline's in one round only
    samples = {
        "worker/converge": [_sample(t) for t in (200, 210, 190, 400, 205)],
        "worker/baseline": [_sample(200)] * 5,
        "worker/same_job": [_sample(400)] * 5,
        "enqueue_api/converge": [_sample(300)] * 5,
        "enqueue_api/same_job": [_sample(250)] * 5,
    }
    summary = coldstart.summarise(samples)

    # Then each ratio is the median of the rounds' ratios of CPU time, with their spread, and every round is kept
    assert summary["rounds"] == 5
    bare = summary["ratios"]["cold_start_bare"]
    assert (bare["rounds"], bare["median"], bare["spread"]) == ([1.0, 1.05, 0.95, 2.0, 1.025], 1.025, [0.95, 2.0])
    assert summary["ratios"]["cold_start_same_job"]["median"] == 0.512
    assert summary["ratios"]["cold_start_enqueue_api_same_job"]["median"] == 1.2
    assert summary["subjects"]["worker/converge"]["cpu_ms"] == 205.0
    assert summary["subjects"]["worker/converge"]["total_ms"] == 305.0  # the wall time, beside it
    assert summary["ratios"]["cold_start_bare"]["wall_median"] == 1.017
    assert set(summary["ratios"]) == set(report.ROUND_RATIOS) - {
        "overhead_us_per_message",
        "overhead_us_per_message_same_job",
    }


def test_import_time_is_grouped_by_package_without_counting_a_module_twice() -> None:
    # Given -X importtime's report (self time, cumulative time, nested name)
    importtime = "\n".join(
        [
            "import time: self [us] | cumulative | imported package",
            "import time:      1000 |       1000 |     _io",
            "import time:      2000 |       5000 |   botocore.utils",
            "import time:      3000 |       3000 |     urllib3",
            "import time:      4000 |      12000 | boto3",
            "import time:       500 |        500 |   pydantic_core",
            "import time:      1500 |       2000 | pydantic",
            "import time:      7000 |       7000 | converge.heuristics",
            "import time:      2500 |       2500 | aws_lambda_powertools.logging",
            "not an import line",
        ]
    )
    parts = coldstart.import_parts(importtime)
    assert parts["boto3 + botocore"] == 9.0  # self times only: boto3, botocore.utils, urllib3
    assert parts["pydantic"] == 2.0 and parts["converge"] == 7.0 and parts["powertools"] == 2.5
    assert parts["standard library and other"] == 1.0


def test_the_three_designs_and_every_function_are_subjects() -> None:
    assert {subject.design for subject in coldstart.SUBJECTS} == set(report.DESIGNS)
    assert {subject.key for subject in coldstart.SUBJECTS} == {
        "worker/converge",
        "worker/baseline",
        "worker/same_job",
        "enqueue_api/converge",
        "enqueue_api/same_job",
    }
    for subject in coldstart.SUBJECTS:
        assert subject.handler_file.is_file(), subject.key


def test_snapstart_costs_follow_the_dated_prices_and_lambdas_cpu_share() -> None:
    from converge_bench.prices import PRICES, snapstart_costs

    # Given a 512 MB function whose start takes 500 ms of a full core, and 25 ms after a restore
    costs = snapstart_costs(512, 500.0, 25.0)

    # Then caching its snapshot costs 0.5 GB-month at the cache price, and each restore 0.5 GB at the restore price
    assert costs["cache_usd_per_month"] == round(0.5 * 30 * 24 * 3600 * PRICES.snapstart_cache_gb_second, 4)
    assert costs["restore_usd_per_million_starts"] == round(0.5 * PRICES.snapstart_restore_gb * 1e6, 2)
    # ...and at 512 MB (512/1769 of a vCPU) the start takes 1769/512 times as long as on a full core
    assert costs["start_ms_at_memory"] == round(500 * 1769 / 512, 1)
    assert costs["start_ms_after_restore_at_memory"] == round(25 * 1769 / 512, 1)
