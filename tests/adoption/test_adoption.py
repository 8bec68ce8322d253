"""A team adopts converge: the wheel built from this checkout, installed outside the repository, `converge init`.

One fresh virtual environment per test session, outside the repository, with the wheel installed
non-editable with its `cli` and `local` extras (and pytest for the new project's own tests); uv (the
installer the README's commands use) installs the dependencies from the package index, unpinned, as
any team's machine would: the newest releases converge's requirements allow.
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

from tests.conftest import ROOT

pytestmark = pytest.mark.slow
CORE = {"boto3", "aws-lambda-powertools", "pydantic", "snapshot-restore-py"}


def run(*command: str | Path, cwd: Path, env: dict[str, str] | None = None, timeout: float = 900) -> str:
    done = subprocess.run(
        [str(part) for part in command], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, f"{command} failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # Built from a copy of the checkout: the build backend works in the source tree, and would leave build/ and an
    # egg-info in this checkout, which other tests (running meanwhile, in parallel) read, and a later wheel could
    # ship. uv builds it (2 s against pip's 6: its build environment comes from its cache).
    source, out = tmp_path_factory.mktemp("source") / "converge", tmp_path_factory.mktemp("wheel")
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(".*", "build", "dist", "*.egg-info", "__pycache__"))
    run(Path(sys.executable).with_name("uv"), "build", "-q", "--wheel", "-o", out, source, cwd=out)
    (built,) = out.glob("converge_jobs-*.whl")
    return built


@pytest.fixture(scope="module")
def team(tmp_path_factory: pytest.TempPathFactory, wheel: Path) -> dict[str, Path]:
    """A team's machine: a fresh venv with the wheel and its extras, and a project made by `converge init`."""
    home = tmp_path_factory.mktemp("team")
    assert ROOT not in home.parents
    uv = Path(sys.executable).with_name("uv")  # a dev dependency
    run(uv, "venv", "-q", "-p", sys.executable, home / "venv", cwd=home)
    bin_dir = home / "venv" / "bin"
    run(uv, "pip", "install", "-q", "-p", bin_dir / "python", f"{wheel}[cli,local]", "pytest", cwd=home)
    run(bin_dir / "converge", "init", "billing-jobs", cwd=home)
    return {"home": home, "bin": bin_dir, "project": home / "billing-jobs"}


def clean_env(team: dict[str, Path]) -> dict[str, str]:
    """The team's shell: its venv first on PATH, nothing of this repository's environment."""
    keep = {k: v for k, v in os.environ.items() if k in ("HOME", "LANG", "TMPDIR", "PIP_CONFIG_FILE")}
    return {**keep, "PATH": f"{team['bin']}{os.pathsep}{os.environ['PATH']}"}


def test_the_wheel_ships_the_framework_and_not_the_reference_application(wheel: Path) -> None:
    # Given the wheel built from this checkout
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        metadata = next(archive.read(n).decode() for n in names if n.endswith(".dist-info/METADATA"))
    packages = {name.split("/")[0] for name in names if "/" in name and ".dist-info" not in name}
    # Then it holds converge, the CLI, the console and the local cloud (and the benchmark), never the catalogue or tests
    assert packages == {"converge", "converge_cli", "converge_console", "localcloud", "converge_bench"}
    assert any(n.startswith("converge_console/templates/") and n.endswith(".html") for n in names)  # its pages
    assert not [n for n in names if n.startswith(("catalogue/", "tests/", "baseline/", "baseline_same_job/"))]
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
    a_new_project_passes_its_own_tests_and_lists_its_jobs(team)
    its_demo_holds_with_hooks_that_give_no_scenario(team)
    its_chaos_run_holds_and_says_why_it_rejected_what_it_did(team)
    local_up_runs_a_put_item_of_the_example_job_to_success(team)


def its_demo_holds_with_hooks_that_give_no_scenario(team: dict[str, Path]) -> None:
    # Given the new project, whose local hooks offer a seed and a workload but no demo scenario
    # When `converge demo` runs there / Then it runs each job's example payload, twice, and its checks hold
    report = json.loads(run(team["bin"] / "converge", "demo", "--json", cwd=team["project"], env=clean_env(team)))
    assert report["invariants_hold"] is True
    assert report["job_types"] == {"hello.greeting.v1": {"accepted": 1, "succeeded": 1}}
    assert report["events"]["duplicate_enqueues_absorbed"] == 1


def its_chaos_run_holds_and_says_why_it_rejected_what_it_did(team: dict[str, Path]) -> None:
    # Given the untouched new project / When `converge demo --chaos` runs there (faults injected under load)
    command = (team["bin"] / "converge", "demo", "--chaos", "--jobs", "150", "--json")
    report = json.loads(run(*command, cwd=team["project"], env=clean_env(team)))
    # Then every invariant holds, the example job's greetings are counted in S3 (one object per operation that
    # succeeded), and every REJECTED operation is one of the raw items of an unknown job type it writes on purpose
    assert report["invariants_hold"] is True, [c for c in report["checks"] if not c["holds"]]
    assert report["effects"]["s3"] == report["operations"]["SUCCEEDED"] > 0
    assert report["operations"].get("REJECTED", 0) == sum(report["rejected"].values())
    assert all(reason.startswith("unknown.no-such-job.v1: ") for reason in report["rejected"])


def a_new_project_passes_its_own_tests_and_lists_its_jobs(team: dict[str, Path]) -> None:
    # Given a project made by `converge init`, outside this repository
    project, env = team["project"], clean_env(team)
    assert (project / "template.yaml").is_file() and (project / ".ci" / "run").is_file()
    # When its own tests run with the team's venv / Then they pass
    out = run(team["bin"] / "python", "-m", "pytest", "-q", "-p", "no:cacheprovider", cwd=project, env=env)
    assert "1 passed" in out
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
        # When the example job is written with the plain AWS CLI
        aws_env = {
            **env,
            "AWS_ACCESS_KEY_ID": "local",
            "AWS_SECRET_ACCESS_KEY": "local",
            "AWS_DEFAULT_REGION": info["region"],
        }
        item = {
            "operation_id": {"S": "greet-cli-1"},
            "job_type": {"S": "hello.greeting.v1"},
            "payload": {"M": {"user_id": {"S": "u-7"}}},
        }
        run(aws, "dynamodb", "put-item", "--endpoint-url", endpoint, "--table-name", outputs["JobsTableName"],
            "--item", json.dumps(item), cwd=project, env=aws_env)  # fmt: skip
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
