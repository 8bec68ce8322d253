"""`converge demo --chaos` on the reference application carries the debounce's three checks: its CV re-render's
bursts (one per profile in the first wave) under the run's faults, counted in `debounced` in its JSON report."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from converge_cli.main import app

runner = CliRunner()


def test_a_small_chaos_run_reports_its_debounced_bursts_and_their_checks() -> None:
    # When a chaos run of one small wave runs (its bursts are sent whatever the wave's size)
    result = runner.invoke(app, ["demo", "--chaos", "--jobs", "60", "--seed", "11", "--json"])
    # Then it held, and its report counts a burst of four requests per profile and carries the three checks, held
    assert result.exit_code == 0, result.output[-2000:]
    report = json.loads(result.stdout[result.stdout.index("{") :])
    assert report["debounced"] == {
        "job_type": "pdf.cv-refresh.v1",
        "debounce": "10 s quiet, at most 60 s per profile_id, newest by version",
        "bursts": 2,
        "requests": 8,
        "keys": 2,
    }
    checks = {check["name"]: check for check in report["checks"]}
    for name in ("debounce_ran_once", "debounced_not_dead_lettered", "debounce_within_max_wait"):
        assert checks[name]["holds"], checks[name]
        assert checks[name]["detail"].startswith("2 bursts of pdf.cv-refresh.v1 (8 requests, 2 keys): ")
    # And the bursts' requests are among the operations the run's own invariants hold to (each final, none lost)
    assert report["job_types"] and sum(report["operations"].values()) >= 60 + 8
