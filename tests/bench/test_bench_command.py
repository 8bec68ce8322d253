"""`converge bench --jobs 20 --rounds 1 --json`, end to end in its own process (the benchmark registers its own
job types into the process-wide registry, so it must not share a process with other tests). The report's keys and
what its figures count are checked here, never how fast anything was: so, as few jobs as fill two batches of ten
per design (the command's default is 400), and a batch row of 260 children (the command's is 1,000 by default):
more than one counting shard's 250, so two shards, at a fraction of the time."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

KEYS = (
    "write_units_per_job",
    "read_units_per_job",
    "sqs_requests_per_job",
    "usd_per_million_jobs",
    "overhead_us_per_message",
    "jobs_per_second",
    "cold_start_ms",
)
DESIGNS = ("converge", "baseline", "same_job")
ROUND_RATIOS = (
    "cold_start_same_job",
    "cold_start_bare",
    "cold_start_enqueue_api_same_job",
    "overhead_us_per_message",
)
CONVERGE = Path(sys.executable).with_name("converge")
JOBS = 20
CHILDREN = 260
pytestmark = pytest.mark.slow  # three designs deployed and some twenty fresh interpreters, in one bench run


@pytest.fixture(scope="module")
def result() -> dict[str, Any]:
    completed = subprocess.run(
        [
            *(str(CONVERGE), "bench", "--jobs", str(JOBS), "--rounds", "1", "--json", "--attention-items", "2000"),
            *("--batch-children", str(CHILDREN)),
        ],
        capture_output=True,
        text=True,
        timeout=900,  # three designs deployed, and some twenty fresh interpreters, on a shared machine
        check=False,
    )
    assert completed.returncode in (0, 1), completed.stderr[-2000:]
    return {**json.loads(completed.stdout), "exit_code": completed.returncode}


def test_the_exit_code_says_whether_every_target_passed(result: dict[str, Any]) -> None:
    # Then 0 when every target passed, 1 when any failed (the report is printed either way)
    assert result["exit_code"] == (0 if all(target["pass"] for target in result["targets"]) else 1)


def test_every_key_is_reported_for_the_three_designs_and_as_ratios(result: dict[str, Any]) -> None:
    for design in DESIGNS:
        for key in KEYS:
            assert isinstance(result[design][key], (int, float)), (design, key)
    # ...the enqueue API's cold start for the designs that have one
    assert isinstance(result["converge"]["enqueue_api_cold_start_ms"], (int, float))
    assert isinstance(result["same_job"]["enqueue_api_cold_start_ms"], (int, float))
    assert result["baseline"]["enqueue_api_cold_start_ms"] is None
    # ...each ratio taken over rounds, with its spread (min, max) under the same key
    assert result["rounds"] == 1
    for key in ROUND_RATIOS:
        assert isinstance(result["ratios"][key], float), key
        low, high = result["spread"][key]
        assert low <= result["ratios"][key] <= high, key
        assert len(result["round_ratios"][key]) == 1, key
    for key in ("write_units_per_job", "usd_per_million_jobs"):
        assert isinstance(result["ratios"][key], float) and isinstance(result["ratios_same_job"][key], float)
    for target in result["targets"]:
        assert {"limit", "name", "pass", "value"} <= set(target)


def test_the_values_are_sane(result: dict[str, Any]) -> None:
    for design in DESIGNS:
        figures = result[design]
        assert figures["completed"] == JOBS, "every job must finish, or the per-job figures mean nothing"
        assert 0 < figures["sqs_requests_per_job"] < 1, "a batch of ten is one request"
        assert 0 < figures["usd_per_million_jobs"] < 100
        assert 0 < figures["overhead_us_per_message"] < 1_000_000
        assert figures["jobs_per_second"] > 0
        assert 0 < figures["cold_start_ms"] < 60_000
    # The baselines' transactional outbox is two items at 2x, plus two idempotency writes and a status update
    assert result["baseline"]["write_units_per_job"] == 7
    assert result["same_job"]["write_units_per_job"] == 7  # the parser and the kill switch write nothing
    assert result["ratios"]["write_units_per_job"] == pytest.approx(3 / 7, abs=0.001)


def test_the_happy_path_is_three_writes_no_read_and_no_index_write(result: dict[str, Any]) -> None:
    # Given converge's measured happy path (units from item sizes, indexes included, not from constants)
    # Then every policy costs exactly 3 WRU and 0 RRU per job, end to end, none of it on an index
    assert result["converge"]["write_units_per_job"] == 3
    assert result["converge"]["read_units_per_job"] == 0
    assert result["converge"]["index_write_units_per_job"] == 0
    assert result["converge"]["api_calls_per_job"]["dynamodb:UpdateItem"] == 2  # the worker's two calls
    assert len(result["per_policy"]) == 3
    for policy, figures in result["per_policy"].items():
        assert (figures["write_units_per_job"], figures["read_units_per_job"]) == (3, 0), policy
        assert figures["completed"] == f"{JOBS}/{JOBS}", policy


def test_a_delayed_job_costs_its_scheduled_record_and_a_long_one_a_schedule(result: dict[str, Any]) -> None:
    # Given jobs run now, due in 5 minutes and due in 2 hours, measured the same way as the happy path
    delayed = result["delayed"]
    assert {row["completed"] for row in delayed.values()} == {f"{JOBS}/{JOBS}"}
    assert delayed["immediate"]["write_units_per_job"] == 3
    # Then a delay costs the SCHEDULED write and its listing, in then out of two indexes (the attention index, and
    # the schedule index by run_at that finds overdue operations): 5 WRU more, 4 on the indexes
    for name in ("message_delay", "one_time_schedule"):
        assert delayed[name]["extra_write_units_per_job"] == 5, name
        assert delayed[name]["index_write_units_per_job"] == 4, name
    # ...and only beyond SQS's 900 s, one CreateSchedule and one firing per job (the schedule deletes itself)
    assert (
        delayed["message_delay"]["scheduler_requests_per_job"],
        delayed["message_delay"]["schedule_firings_per_job"],
    ) == (0, 0)
    assert (
        delayed["one_time_schedule"]["scheduler_requests_per_job"],
        delayed["one_time_schedule"]["schedule_firings_per_job"],
    ) == (1, 1)


def test_a_rate_limited_job_costs_at_most_one_write_more_than_a_plain_job_and_no_read(result: dict[str, Any]) -> None:
    # Given a no-op job under a limit it never meets, and the same job without one
    figures = result["flow_control"]
    plain, limited = figures["plain"], figures["rate_limited"]
    # Then both complete, the limit's slot is one write on the markers table (a second when the worker's guess
    # of the key's state was wrong: at most the first job after the key went busy), and neither reads
    assert (plain["completed"], limited["completed"]) == (f"{JOBS}/{JOBS}", f"{JOBS}/{JOBS}")
    assert plain["write_units_per_job"] == 3
    assert 1 <= figures["extra_write_units_per_job"] <= 1 + 1 / JOBS
    assert (plain["read_units_per_job"], limited["read_units_per_job"]) == (0, 0)
    assert limited["index_write_units_per_job"] == 0
    # And its targets are reported with the others
    names = {target["name"] for target in result["targets"]}
    assert {"rate-limited job: write units over a plain job", "rate-limited job: read units, happy path"} <= names


def test_a_capped_job_costs_two_writes_more_than_a_plain_job_and_no_read(result: dict[str, Any]) -> None:
    # Given a no-op job under a concurrency cap it never meets, and the same job without one
    figures = result["flow_control"]
    capped = figures["capped"]
    # Then it completes, its slot is one write taken and one given back, and it reads nothing
    assert capped["completed"] == f"{JOBS}/{JOBS}"
    assert figures["capped_extra_write_units_per_job"] == 2
    # And a key's first use (measured apart, before the sample) costs one write more: its take refused, then its item
    assert figures["capped_first_use_extra_write_units"] == 3
    assert (capped["read_units_per_job"], capped["index_write_units_per_job"]) == (0, 0)
    assert "capped job: write units over a plain job" in {target["name"] for target in result["targets"]}


def test_the_hottest_limiter_item_at_a_thousand_jobs_a_second_is_at_one_partitions_limit_and_shards_divide_it(
    result: dict[str, Any],
) -> None:
    # Given the limiter's key measured per reservation, and the same key over four items
    figures = result["flow_control"]
    one, sharded = figures["hot_limiter_key"], figures["hot_sharded_limiter_key"]
    # Then a reservation is one write unit on the key's one item: 1,000 a second at 1,000 jobs a second, the most
    # one partition takes; over four items the hottest takes about a quarter (the sample's spread decides)
    assert (one["write_units_per_job"], one["write_units_per_second"], one["limit"]) == (1.0, 1000.0, 1000.0)
    assert "limit#bench-partner" in one["item"] and "~" in sharded["item"] and sharded["shards"] == 4
    assert 0.25 <= sharded["write_units_per_job"] <= 0.6 and sharded["pass"]
    # And a cap's key takes two (its slot taken and given back)
    assert figures["hot_cap_key"]["write_units_per_job"] == 2.0
    assert figures["sharded"]["completed"] == f"{JOBS}/{JOBS}"


def test_jobs_with_several_effects_cost_one_write_per_marker_and_are_priced_beside_the_orchestrators(
    result: dict[str, Any],
) -> None:
    # Given three steps, one continuation and one wait, measured as the happy path is
    shapes = result["shapes"]
    assert set(shapes) == {"three_steps", "one_continuation", "one_wait"}
    # Then three steps cost the plain job's 3 write units and one per step's marker, and no read
    three = shapes["three_steps"]
    assert (three["write_units_per_job"], three["read_units_per_job"], three["succeeded"]) == (6, 0, f"{JOBS}/{JOBS}")
    # ...a continuation: the settle and the next request in one transaction (2 units each), then the next job's
    # lease and terminal write: 8 write units for the two jobs, no read; parents and children all succeed
    chained = shapes["one_continuation"]
    assert (chained["write_units_per_job"], chained["read_units_per_job"], chained["succeeded"]) == (
        8,
        0,
        f"{2 * JOBS}/{JOBS}",
    )
    # ...a wait: two markers, the SCHEDULED write and its listing in and out of two indexes (4), the resumed
    # delivery's lease and terminal write, and one read: the resumed run's one Query of the markers
    waited = shapes["one_wait"]
    assert (waited["write_units_per_job"], waited["index_write_units_per_job"], waited["read_units_per_job"]) == (
        12,
        4,
        1,
    )
    # And each is priced beside the same work on Lambda durable functions and Step Functions, as ratios
    for name, row in shapes.items():
        assert row["ratio_to_durable_functions"] is not None and row["ratio_to_step_functions"] is not None, name
        assert row["durable_functions_usd_per_million"] > 0 and row["step_functions_usd_per_million"] > 0, name
    assert result["prices"]["durable_operation"] == 8e-06 and result["prices"]["step_functions_transition"] == 2.5e-05


def test_the_cold_start_says_what_it_is_made_of_and_the_time_after_a_restore(result: dict[str, Any]) -> None:
    subjects = result["cold_start"]
    assert set(subjects) == {f"worker/{d}" for d in DESIGNS} | {"enqueue_api/converge", "enqueue_api/same_job"}
    for key, subject in subjects.items():
        parts = subject["made_of_ms"]
        assert {"interpreter", "boto3 + botocore", "powertools", "pydantic", "first event"} <= set(parts), key
        assert parts["boto3 + botocore"] > 0, "boto3 is imported in the measured interpreter, not before it"
        assert subject["after_restore_ms"] > 0, key
    # converge's own modules are in converge's functions only
    assert subjects["worker/converge"]["made_of_ms"]["converge"] > 0
    assert subjects["worker/same_job"]["made_of_ms"]["converge"] == 0


def test_the_targets_are_the_new_ones(result: dict[str, Any]) -> None:
    names = [target["name"] for target in result["targets"]]
    assert any(name.startswith("worker cold start, converge / same-job baseline") for name in names)
    assert any(name.startswith("worker cold start, converge / bare baseline") for name in names)
    assert any(name.startswith("enqueue API cold start, converge / same-job baseline") for name in names)
    assert any(name.startswith("overhead per message, converge / bare baseline, in every one of") for name in names)
    assert not any(name == "cold start, converge / baseline" for name in names)  # the old 0.8x target is gone


def test_the_overhead_is_measured_by_replaying_every_worker_invocation(result: dict[str, Any]) -> None:
    for design in DESIGNS:
        figures = result[design]
        assert figures["replayed_invocations"] >= JOBS // 10 and figures["replay_mismatches"] == 0, design
        assert 0 < figures["overhead_us_per_message"] < 1_000_000
        assert 0 < figures["overhead_us_per_message_live"] < 1_000_000


def test_listing_attention_costs_the_same_on_a_bigger_table(result: dict[str, Any]) -> None:
    small, large = result["attention"]
    assert small["page_items"] == large["page_items"] == 50
    assert small["read_units"] == large["read_units"]


def test_the_batch_row_counts_its_children_the_write_units_each_over_a_plain_job_and_the_hottest_item(
    result: dict[str, Any],
) -> None:
    # Given the batch of 260 no-op children and its callback, admitted, run and completed on the local cloud
    batches = result["batches"]
    [row] = batches["rows"]
    assert (row["children"], row["state"], row["counts"], row["drained"]) == (
        CHILDREN,
        "complete",
        {"SUCCEEDED": CHILDREN},
        True,
    )
    # Then a plain job of the same type is its 3 write units, and a child about as much: its lease and its settle
    # (1 + 1), its share of the admission (1 and a little), of the batch counter's writes (one a shard a stream
    # batch) and of the completion: under 1 more, the target
    assert batches["plain_write_units_per_job"] == 3
    assert 3.0 < row["write_units_per_child"] < 3.5
    assert row["extra_write_units_per_child"] == pytest.approx(row["write_units_per_child"] - 3, abs=1e-3)
    assert row["extra_write_units_pass"] is True and "stream" in row["extra_write_units_note"]
    # And a child reads nothing itself (the counter reads each batch's keys once, and the shards to complete it)
    assert row["read_units_per_child"] < 0.5
    # And its two shards (130 children each) are written a few times each: no item near a partition's second
    assert row["counting_shards"] == 2
    assert row["peak_item_write_units_per_second"] < 100 and row["peak_item_pass"] is True
    # And the callback ran after the batch completed, and the admission was timed
    assert row["callback_latency_seconds"] >= 0 and row["admission_seconds"] > 0
    names = {target["name"]: target["pass"] for target in result["targets"]}
    assert names[f"batch of {CHILDREN}: write units per child over a plain job"] is True
    assert (
        names[f"batch of {CHILDREN}: peak write units a second on one item, children final at 5,000 a second"] is True
    )


def test_a_signal_wait_is_reported_beside_a_plain_job_and_a_time_wait_and_priced_beside_the_orchestrators(
    result: dict[str, Any],
) -> None:
    from converge_bench.prices import PRICES
    from converge_bench.signals import STEPS

    # Given a job that waits for a signal (sent once it waits), a plain job and a time wait, measured alike
    figures = result["signals"]
    plain, timed, signalled = figures["plain"], figures["time_wait"], figures["signal_wait"]
    # Then every job completed, each signalled one resumed by its signal (accepted once, then woken)
    assert {row["completed"] for row in (plain, timed, signalled)} == {f"{JOBS}/{JOBS}"}
    assert signalled["signals_accepted"] == f"{JOBS}/{JOBS}"
    # ...each row has its write and read units, and the differences are of the rows as reported
    for row in (plain, timed, signalled):
        assert row["write_units_per_job"] >= plain["write_units_per_job"] > 0
        assert row["index_write_units_per_job"] <= row["write_units_per_job"]
    for row in (timed, signalled):
        assert row["extra_write_units_per_job"] == round(row["write_units_per_job"] - plain["write_units_per_job"], 4)
        assert row["extra_read_units_per_job"] == round(row["read_units_per_job"] - plain["read_units_per_job"], 4)
    over = figures["signal_over_time_wait_write_units_per_job"]
    assert over == round(signalled["write_units_per_job"] - timed["write_units_per_job"], 4)
    # ...a signal costs more than a wait for a time: its item written and read, the sender's read and wake
    assert over > 0 and signalled["read_units_per_job"] > timed["read_units_per_job"]
    # ...its timeout of a day is a one-time schedule created, then deleted by the wake; a 300 s wait needs none
    assert (timed["scheduler_requests_per_job"], signalled["scheduler_requests_per_job"]) == (0, 2)
    # And the dollars are the reported units at the report's prices, the orchestrators' from their own counts
    for row in (plain, timed, signalled):
        usd = 1e6 * (
            row["write_units_per_job"] * PRICES.dynamodb_write_unit
            + row["read_units_per_job"] * PRICES.dynamodb_read_unit
            + row["sqs_requests_per_job"] * PRICES.sqs_request
            + row["lambda_requests_per_job"] * PRICES.lambda_request
        )
        assert row["usd_per_million_jobs"] == pytest.approx(usd, abs=1e-3)
    token = 1e6 * ((STEPS + 1) * PRICES.step_functions_transition + STEPS * PRICES.lambda_request)
    callback = 1e6 * ((STEPS + 2) * PRICES.durable_operation + 2 * PRICES.lambda_request)
    assert figures["step_functions_task_token_usd_per_million"] == pytest.approx(token, abs=1e-3)
    assert figures["durable_functions_callback_usd_per_million"] == pytest.approx(callback, abs=1e-3)
    assert figures["ratio_to_step_functions"] == pytest.approx(signalled["usd_per_million_jobs"] / token, abs=1e-3)
