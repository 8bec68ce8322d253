"""A team adopts converge: the wheel built from this checkout, installed outside the repository, `converge init`.

One fresh virtual environment per test module, outside the repository, with the wheel installed non-editable with
its `cli` and `test` extras, as docs/use-converge.md says; uv (the installer the README's commands use) installs the
dependencies from the package index, unpinned, as any team's machine would: the newest releases converge's
requirements allow. The new project is then run as its README says (its test command through `.ci/run`, with pip),
built with `sam build` on a machine without python3.13, served by `converge local up` to the AWS CLI, and given
jobs of the team's own (tests/testing/project.py: the orders), whose tests, demo and chaos run must pass, and whose
missing grant must fail naming the project's own policy.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import boto3
import pytest

from tests.adoption.conftest import UV, run
from tests.conftest import ROOT
from tests.testing.project import add_orders, remove_grant

pytestmark = pytest.mark.slow
CORE = {"boto3", "aws-lambda-powertools", "pydantic", "snapshot-restore-py"}
DEVELOPER_ONLY = {"converge_cli", "localcloud", "converge_bench", "converge_testing"}
"""What converge-jobs ships for a developer's machine: never in a Lambda layer."""


@pytest.fixture(scope="module")
def team(tmp_path_factory: pytest.TempPathFactory, wheel: Path) -> dict[str, Path]:
    """A team's machine: a fresh venv with the wheel and its `cli` and `test` extras, a project from `converge init`."""
    home = tmp_path_factory.mktemp("team")
    assert ROOT not in home.parents
    # --seed: with pip, as `python3 -m venv` makes it (`sam build` builds the layer with `python3 -m pip`)
    run(UV, "venv", "-q", "--seed", "-p", sys.executable, home / "venv", cwd=home)
    bin_dir = home / "venv" / "bin"
    run(UV, "pip", "install", "-q", "-p", bin_dir / "python", f"{wheel}[cli,test]", cwd=home)
    run(bin_dir / "converge", "init", "billing-jobs", cwd=home)
    return {"home": home, "bin": bin_dir, "project": home / "billing-jobs", "wheel": wheel}


def clean_env(team: dict[str, Path], without_python313: bool = False) -> dict[str, str]:
    """The team's shell: its venv first on PATH, nothing of this repository's environment (and, when asked, no
    python3.13 anywhere on PATH: a machine that has only its own Python)."""
    keep = {k: v for k, v in os.environ.items() if k in ("HOME", "LANG", "TMPDIR", "PIP_CONFIG_FILE")}
    path = [str(team["bin"]), *os.environ["PATH"].split(os.pathsep)]
    if without_python313:
        path = [entry for entry in path if not (Path(entry) / "python3.13").exists()]
    return {**keep, "PATH": os.pathsep.join(path), "SAM_CLI_TELEMETRY": "0"}


def test_the_wheel_ships_the_framework_and_not_the_reference_application(wheel: Path) -> None:
    # Given the wheel built from this checkout
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        metadata = next(archive.read(n).decode() for n in names if n.endswith(".dist-info/METADATA"))
        entry_points = next(archive.read(n).decode() for n in names if n.endswith(".dist-info/entry_points.txt"))
    packages = {name.split("/")[0] for name in names if "/" in name and ".dist-info" not in name}
    # Then it holds converge, converge_testing, the CLI, the console and the local cloud (and the
    # benchmark), never the catalogue, its functions or tests
    assert packages == {"converge", *DEVELOPER_ONLY}
    assert "converge_testing/plugin.py" in names
    assert any(n.startswith("converge_cli/console/templates/") and n.endswith(".html") for n in names)  # its pages
    assert not [n for n in names if n.startswith(("catalogue/", "functions/", "tests/", "baseline/"))]
    # And its pytest plugin and its command are registered
    assert "[pytest11]\nconverge = converge_testing.plugin" in entry_points
    assert "converge = converge_cli.entry:main" in entry_points
    # And without extras it requires exactly the core dependencies
    required = [line.split(":", 1)[1].strip() for line in metadata.splitlines() if line.startswith("Requires-Dist:")]
    core = {
        r.split(";")[0].split("[")[0].split(">")[0].split("<")[0].split("=")[0].strip()
        for r in required
        if "extra ==" not in r
    }
    assert core == CORE


def test_a_team_adopts_converge_from_a_fresh_venv(team: dict[str, Path]) -> None:
    # (one test, so that under xdist one worker builds the one venv it needs)
    it_pins_the_wheel_it_was_made_from(team)
    its_readme_test_command_passes_untouched(team)
    a_new_project_passes_its_own_tests_and_lists_its_jobs(team)
    its_demo_holds_with_hooks_that_give_no_scenario(team)
    its_chaos_run_holds_and_says_why_it_rejected_what_it_did(team)
    sam_builds_it_without_python313_and_its_layer_holds_only_what_lambda_loads(team)
    local_up_runs_a_put_item_of_the_example_job_to_success(team)


def test_a_team_adds_its_own_jobs_and_they_hold_to_converges_promise(team: dict[str, Path], tmp_path: Path) -> None:
    # Given the new project with the team's own jobs: an order in two steps (a row in its own table, then an
    # e-mail), its follow-up (a continuation), 50 receipts as a batch and its callback
    project = tmp_path / "orders-jobs"
    shutil.copytree(team["project"], project, symlinks=True)
    add_orders(project)
    env = clean_env(team)
    # When its own tests run / Then they pass (the greeting's, the sign-up's, the orders')
    out = run(team["bin"] / "python", "-m", "pytest", "-q", "-p", "no:cacheprovider", cwd=project, env=env)
    assert "7 passed" in out
    # And `converge demo` holds, its effects the project's own, by resource; the batch of 50 once, its callback once
    demo = json.loads(run(team["bin"] / "converge", "demo", "--json", cwd=project, env=env))
    assert demo["invariants_hold"], [c for c in demo["checks"] if not c["ok"]]
    assert demo["effects"]["ReceiptsTable"] == 51 and demo["effects"]["OrdersTable"] == 1
    # And `converge demo --chaos` holds every invariant under faults, each operation held to a clean run of its job
    chaos = json.loads(
        run(team["bin"] / "converge", "demo", "--chaos", "--jobs", "500", "--json", cwd=project, env=env)
    )
    assert chaos["invariants_hold"], [c for c in chaos["checks"] if not c["holds"]]
    assert chaos["faults_total"] > 0 and chaos["operations"]["SUCCEEDED"] > 0
    # And `converge explore` holds the promise over its own catalogue for a bounded run (the project's tests ran
    # a shorter one through the converge_explore fixture)
    explored = json.loads(
        run(team["bin"] / "converge", "explore", "--seed", "3", "--examples", "10", "--json", cwd=project, env=env)
    )
    assert explored["held"] and explored["histories"] == 10, explored["break"]
    assert explored["clean_runs"]["orders.receipt.v1"] == {"ReceiptsTable": 1}
    # When the e-mail's grant is taken out of the project's runner policy / Then its test fails, naming the policy
    remove_grant(project, "SendOrderEmail")
    command = (team["bin"] / "python", "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_orders.py")
    failed = subprocess.run(command, cwd=project, env=env, capture_output=True, text=True, timeout=600)
    assert failed.returncode == 1, failed.stdout[-2000:]
    assert "missing grant: not authorized to perform: ses:SendEmail" in failed.stdout
    assert "grant it in DefaultRunnerPolicy of template.yaml" in failed.stdout


def it_pins_the_wheel_it_was_made_from(team: dict[str, Path]) -> None:
    # Given the project made in an environment that installed converge from the wheel file
    requirements = (team["project"] / "shared" / "requirements.txt").read_text().splitlines()
    # Then the project's pin is that file, which its own install and its layer's build both read
    assert requirements[-1] == f"converge-jobs @ {team['wheel'].resolve().as_uri()}"


def its_readme_test_command_passes_untouched(team: dict[str, Path]) -> None:
    # Given the project's README test command, which its `.ci/run` runs exactly (a fresh venv, pip, the link, pytest)
    project = team["project"]
    readme = (project / "README.md").read_text()
    command = (project / ".ci" / "run").read_text().splitlines()[-1]
    assert command in readme
    # When it runs / Then it passes: converge installs from the pinned wheel, and the project's tests pass
    out = run(project / ".ci" / "run", cwd=project, env=clean_env(team))
    assert "4 passed" in out
    shutil.rmtree(project / ".venv-test")  # the link is the team venv's again for what follows
    run(team["bin"] / "converge", "link", cwd=project, env=clean_env(team))


def sam_builds_it_without_python313_and_its_layer_holds_only_what_lambda_loads(team: dict[str, Path]) -> None:
    # Given a machine whose only Python is the team's (no python3.13 on PATH), and SAM
    project, env = team["project"], clean_env(team, without_python313=True)
    sam = Path(sys.executable).with_name("sam")  # a dev dependency, as `pip install aws-sam-cli` gives a team
    assert not any((Path(entry) / "python3.13").exists() for entry in env["PATH"].split(os.pathsep))
    # When the template is validated and built
    run(sam, "validate", "--lint", cwd=project, env=env)
    run(sam, "build", cwd=project, env=env, timeout=600)
    # Then the catalogue's layer holds the catalogue, converge and their dependencies, for Python 3.13 on arm64,
    # and nothing converge-jobs ships for a developer's machine (converge_testing among it)
    layer = project / ".aws-sam" / "build" / "CatalogueLayer" / "python"
    held = {path.name for path in layer.iterdir()}
    assert {"billing_jobs", "converge", "boto3", "pydantic", "aws_lambda_powertools"} <= held
    assert not held & DEVELOPER_ONLY
    assert list((layer / "pydantic_core").glob("*cpython-313-aarch64-linux-gnu.so"))
    # And the project's own function is built beside converge's
    assert (project / ".aws-sam" / "build" / "SignUpFunction" / "app.py").is_file()


def its_demo_holds_with_hooks_that_give_no_scenario(team: dict[str, Path]) -> None:
    # Given the new project, whose local hooks offer a seed and a workload but no demo scenario
    # When `converge demo` runs there / Then it runs each job's example payload, twice, and its checks hold
    report = json.loads(run(team["bin"] / "converge", "demo", "--json", cwd=team["project"], env=clean_env(team)))
    assert report["invariants_hold"] is True
    assert report["job_types"] == {"hello.greeting.v1": {"accepted": 1, "succeeded": 1}}
    assert report["events"]["duplicate_enqueues_absorbed"] == 1
    assert report["effects"] == {"GreetingsBucket": 1}


def its_chaos_run_holds_and_says_why_it_rejected_what_it_did(team: dict[str, Path]) -> None:
    # Given the untouched new project / When `converge demo --chaos` runs there (faults injected under load)
    command = (team["bin"] / "converge", "demo", "--chaos", "--jobs", "150", "--json")
    report = json.loads(run(*command, cwd=team["project"], env=clean_env(team)))
    # Then every invariant holds, the example job's greetings are counted in its bucket (one object per operation
    # that succeeded), and every REJECTED operation is one of the raw items of an unknown job type it writes on purpose
    assert report["invariants_hold"] is True, [c for c in report["checks"] if not c["holds"]]
    assert report["effects"]["GreetingsBucket"] == report["operations"]["SUCCEEDED"] > 0
    assert report["operations"].get("REJECTED", 0) == sum(report["rejected"].values())
    assert all(reason.startswith("unknown.no-such-job.v1: ") for reason in report["rejected"])


def a_new_project_passes_its_own_tests_and_lists_its_jobs(team: dict[str, Path]) -> None:
    # Given a project made by `converge init`, outside this repository
    project, env = team["project"], clean_env(team)
    assert (project / "template.yaml").is_file() and (project / ".ci" / "run").is_file()
    # When its own tests run with the team's venv / Then they pass
    out = run(team["bin"] / "python", "-m", "pytest", "-q", "-p", "no:cacheprovider", cwd=project, env=env)
    assert "4 passed" in out
    # And `converge jobs list` lists the project's example job, and nothing of the reference application
    listed = json.loads(run(team["bin"] / "converge", "jobs", "list", "--json", cwd=project, env=env))
    assert [row["job_type"] for row in listed] == ["hello.greeting.v1"]


def local_up_runs_a_put_item_of_the_example_job_to_success(team: dict[str, Path]) -> None:
    # Given `converge local up` running from the new project
    aws = shutil.which("aws")
    assert aws, "the AWS CLI is needed on PATH (pip install awscli)"
    project, env = team["project"], clean_env(team)
    outputs_file = project / ".converge" / "outputs.json"
    server = subprocess.Popen(  # on a port the OS picks: the outputs file names the endpoint
        [str(team["bin"] / "converge"), "local", "up", "--port", "0", "--outputs-file", str(outputs_file)],
        cwd=project,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 180
        while not outputs_file.exists() and server.poll() is None and time.monotonic() < deadline:
            time.sleep(0.5)
        assert outputs_file.exists(), server.stderr.read() if server.poll() is not None else "not ready in time"
        info = json.loads(outputs_file.read_text())
        outputs, endpoint = info["outputs"], info["endpoint_url"]
        aws_env = {
            **env,
            "AWS_ENDPOINT_URL": endpoint,
            "AWS_ACCESS_KEY_ID": "local",
            "AWS_SECRET_ACCESS_KEY": "local",
            "AWS_REGION": info["region"],
            "AWS_DEFAULT_REGION": info["region"],
        }
        # When the jobs table's name is read from the project's own stack, as docs/local-cloud.md does, and the
        # example job written there with the plain AWS CLI
        query = "Stacks[0].Outputs[?OutputKey=='JobsTableName'].OutputValue"
        jobs = run(aws, "cloudformation", "describe-stacks", "--stack-name", "converge", "--query", query,
                   "--output", "text", cwd=project, env=aws_env).strip()  # fmt: skip
        assert jobs == outputs["JobsTableName"]
        stack = json.loads(run(aws, "cloudformation", "describe-stacks", "--stack-name", "converge", cwd=project,
                               env=aws_env))["Stacks"][0]  # fmt: skip
        assert {"JobsTableName", "ProducerPolicyArn", "EnqueueApiUrl"} <= {o["OutputKey"] for o in stack["Outputs"]}
        item = {
            "operation_id": {"S": "greet-cli-1"},
            "job_type": {"S": "hello.greeting.v1"},
            "payload": {"M": {"user_id": {"S": "u-7"}}},
        }
        run(aws, "dynamodb", "put-item", "--table-name", jobs, "--item", json.dumps(item), cwd=project, env=aws_env)
        # Then its operation succeeds, as the state table (converge's record) says
        dynamodb = boto3.client(
            "dynamodb",
            endpoint_url=endpoint,
            region_name=info["region"],
            aws_access_key_id="l",
            aws_secret_access_key="l",
        )
        state = None
        deadline = time.monotonic() + 60
        while state != "SUCCEEDED" and time.monotonic() < deadline:
            found = dynamodb.get_item(TableName=outputs["StateTableName"], Key={"operation_id": {"S": "greet-cli-1"}})
            state = found.get("Item", {}).get("state", {}).get("S")
            time.sleep(0.5)
        assert state == "SUCCEEDED"
    finally:
        server.send_signal(signal.SIGINT)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
