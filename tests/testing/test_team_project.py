"""A team's project (`converge init`'s, with the orders' jobs) run as a team runs it: its own tests through
converge_testing's pytest plugin, `converge demo` and `converge demo --chaos` counting its effects by resource,
and a grant taken out of its template failing its test with where the grant belongs."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from converge_cli.commands.init import SCAFFOLD
from tests.testing.project import remove_grant

BIN = Path(sys.executable).parent


def run(project: Path, *command: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([*command], cwd=project, capture_output=True, text=True, timeout=600)
    if ok:
        assert done.returncode == 0, f"{command}: {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def copy_of(project: Path, tmp_path: Path) -> Path:
    copied = tmp_path / project.name
    shutil.copytree(project, copied, symlinks=True)
    return copied


def test_its_own_tests_pass_with_the_plugins_fixtures_one_cloud_per_module_or_session(orders_project: Path) -> None:
    # When the project's tests run (the greeting's, the sign-up's, the orders'), the cloud kept for the session
    done = run(orders_project, str(BIN / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider",
               "-o", "converge_cloud_scope=session", "--setup-show")  # fmt: skip
    # Then they pass, each against the one cloud of the session
    assert " passed" in done.stdout and "failed" not in done.stdout
    assert done.stdout.count("SETUP    S converge_cloud") == 1
    # And a scope the plugin does not know is refused, naming the ones it does
    wrong = run(orders_project, str(BIN / "python"), "-m", "pytest", "-q", "-o", "converge_cloud_scope=test", ok=False)
    assert wrong.returncode != 0 and "use one of module, session" in wrong.stdout + wrong.stderr


def test_demo_and_chaos_count_its_effects_by_resource_and_hold(orders_project: Path) -> None:
    # When `converge demo` runs in the project (its hooks' storyline: every job, a batch of 50 receipts)
    demo = json.loads(run(orders_project, str(BIN / "converge"), "demo", "--json").stdout)
    # Then every check held, and the effects are the project's, by resource: no reference application's words
    assert demo["invariants_hold"], [c for c in demo["checks"] if not c["ok"]]
    assert demo["effects"] == {
        "AccountingQueue": 1, "FollowUpsTopic": 1, "GreetingsBucket": 1, "OrdersTable": 1, "ReceiptsTable": 51,
        "ses": 1,
    }  # fmt: skip
    assert not {"batch_emails", "timed_emails", "continuation_emails"} & set(demo["events"])
    # And under faults and load, `demo --chaos` holds every invariant, its effects checked against clean runs
    command = (str(BIN / "converge"), "demo", "--chaos", "--jobs", "300", "--json")
    chaos = json.loads(run(orders_project, *command).stdout)
    assert chaos["invariants_hold"], [c for c in chaos["checks"] if not c["holds"]]
    assert chaos["checks"][0]["name"] == "effects_as_a_clean_run" and chaos["faults_total"] > 0
    assert {"OrdersTable", "ReceiptsTable", "ses", "FollowUpsTopic"} <= set(chaos["effects"])


def test_a_project_without_a_storyline_gets_each_job_a_producer_starts(orders_project: Path, tmp_path: Path) -> None:
    # Given the project with the scaffold's hooks (no demo storyline of its own)
    project = copy_of(orders_project, tmp_path)
    hooks = (SCAFFOLD / "shared" / "__package__" / "local.py").read_text().replace("{{toggle_key}}", "hello.greeting")
    (project / "shared" / "orders_team" / "local.py").write_text(hooks)
    # When `converge demo` runs
    demo = json.loads(run(project, str(BIN / "converge"), "demo", "--json").stdout)
    # Then each job a producer starts ran and its replayed dispatch made nothing again; the continuation and the
    # batch's callback were not enqueued on their own, and the report says why
    assert demo["invariants_hold"], [c for c in demo["checks"] if not c["ok"]]
    assert set(demo["job_types"]) == {
        "hello.greeting.v1",
        "orders.confirm.v1",
        "orders.follow-up.v1",
        "orders.receipt.v1",
    }
    assert set(demo["not_enqueued"]) == {"orders.follow-up.v1", "orders.receipts-written.v1"}
    assert "when orders.confirm.v1 succeeds" in demo["not_enqueued"]["orders.follow-up.v1"]
    replayed = [c for c in demo["checks"] if "replayed dispatch made no effect again" in c["name"]]
    assert len(replayed) == 3 and all(c["ok"] for c in replayed)


@pytest.mark.parametrize("tool", ["pytest", "demo"])
def test_a_grant_taken_out_fails_naming_the_templates_own_policy(
    orders_project: Path, tmp_path: Path, tool: str
) -> None:
    # Given the project with the orders' e-mail grant taken out of its runner policy
    project = copy_of(orders_project, tmp_path)
    remove_grant(project, "SendOrderEmail")
    # When its own tests run, or `converge demo`
    if tool == "pytest":
        done = run(
            project,
            str(BIN / "python"),
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "tests/test_orders.py",
            ok=False,
        )
        output = done.stdout
    else:
        done = run(project, str(BIN / "converge"), "demo", "--json", ok=False)
        output = json.dumps([c for c in json.loads(done.stdout)["checks"] if not c["ok"]])
    # Then it fails, the receipt naming the action and where the grant belongs: the project's own runner policy
    assert done.returncode != 0
    assert "missing grant: not authorized to perform: ses:SendEmail" in output
    assert "grant it in DefaultRunnerPolicy of template.yaml" in output
