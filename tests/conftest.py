"""Fixtures shared by every tier: moto, tables built from template.yaml, and a wired converge."""

from __future__ import annotations

import compileall
import copy
import functools
import os
import re
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import boto3
import botocore.session
import pytest
from moto import mock_aws

from localcloud.collector import collect_less_often, freeze_survivors
from localcloud.speedups import fast_moto
from localcloud.template import application_templates

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = ROOT / "template.yaml"
REGION = "us-east-1"

os.environ.setdefault("AWS_DEFAULT_REGION", REGION)
os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "true")
os.environ.setdefault("POWERTOOLS_METRICS_NAMESPACE", "Converge")

# moto gives every test a fresh default boto3 session, and a new botocore session reads and parses the
# endpoint and service-model JSON again (about a tenth of a second per client, most of a unit test's
# set-up). The files never change within a run, so every session here shares one loader, which keeps
# what it has parsed; clients, credentials and moto's state stay per test.
botocore.session.create_loader = functools.lru_cache(maxsize=None)(botocore.session.create_loader)  # type: ignore[attr-defined]


# -- the suite in parallel (pytest-xdist: `-n auto --dist loadfile` in the test command) ---------------------------

MAX_WORKERS = 4
"""`-n auto` runs one worker per CPU, but at most this many: each worker deploys local clouds of its own, and beyond
four the longest test files, which one worker runs whole (`--dist loadfile`), bound the time anyway."""


def as_a_shell_starts_it() -> None:
    """A child process's Ctrl-C as an operator's shell gives it (`preexec_fn` of a command a test stops with SIGINT):
    SIGINT delivered and its default disposition, whatever the test process inherited (an ignored or blocked SIGINT
    is inherited across exec, and Python then installs no KeyboardInterrupt handler)."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    signal.signal(signal.SIGINT, signal.SIG_DFL)


WITH_STACKS = {"PYTHONFAULTHANDLER": "1"}
"""Environment for a Python command a test stops with `stopped_with_ctrl_c`: SIGABRT then prints every thread's
stack (faulthandler) before the process ends, which is how a command that did not stop tells what it was doing."""


def stopped_with_ctrl_c(process: subprocess.Popen[str], what: str, timeout: float = 60.0) -> None:
    """Ctrl-C to a command a test started (with `as_a_shell_starts_it`), waited for. A command still running after
    `timeout` is aborted and the test fails with what it was doing: its state and signal masks as the kernel shows
    them, and (started with `WITH_STACKS`) every thread's stack, with the last of what it printed."""
    process.send_signal(signal.SIGINT)
    try:
        process.wait(timeout=timeout)
        return
    except subprocess.TimeoutExpired:
        pass
    seen = _kernel_view(process.pid)
    process.send_signal(signal.SIGABRT)
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    printed = process.stdout.read() if process.stdout is not None else ""
    tail = printed[-12000:]
    pytest.fail(f"{what} did not stop within {timeout:.0f} s of Ctrl-C\n{seen}\nthe last it printed:\n{tail}")


def _kernel_view(pid: int) -> str:
    """A process's state, signal masks and, per thread, its state and where in the kernel it waits (Linux)."""
    lines = []
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        lines.append(" ".join(line for line in status.splitlines() if line.startswith(("State", "Sig", "Shd"))))
        for task in sorted(Path(f"/proc/{pid}/task").iterdir()):
            state = (task / "stat").read_text().rsplit(")", 1)[1].split()[0]
            wchan = (task / "wchan").read_text() if (task / "wchan").exists() else "?"
            lines.append(f"thread {task.name}: state {state}, waiting in {wchan or '-'}")
    except OSError as unreadable:
        lines.append(f"(no /proc view: {unreadable})")
    return "\n".join(lines)


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """The CPUs this process may use, logical ones (xdist counts physical cores where psutil is installed: one
    worker on a two-vCPU machine, though much of a test's time is waiting on servers and subprocesses), capped.
    PYTEST_XDIST_AUTO_NUM_WORKERS, when set, is xdist's to apply."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(cpus, MAX_WORKERS))


def pytest_sessionstart(session: pytest.Session) -> None:
    """The project's own modules compiled once, before any test: every interpreter the suite starts (the command
    line, local clouds, cold starts: some hundred) then reads their bytecode instead of compiling them again, also
    where PYTHONDONTWRITEBYTECODE is set (as on CI machines; the venv's packages are compiled when installed). The
    bytecode lands in __pycache__ beside each module, as Python writes it anywhere else; a changed module is
    compiled again. The scaffold's sources are templates, never imported from here."""
    if hasattr(session.config, "workerinput"):
        return  # the controller compiled them
    for folder in ("shared", "infra", "benchmarks"):
        compileall.compile_dir(ROOT / folder, quiet=2, rx=re.compile(r"[/\\]scaffold[/\\]"))


def pytest_configure(config: pytest.Config) -> None:
    # The collector walked moto's and botocore's long-lived objects over and over: a fifth of the workers' CPU
    # with Python's defaults (localcloud/collector.py has the figures).
    collect_less_often()
    # xdist hands out files with the most tests first; files are handed out in collection order instead, which
    # pytest_collection_modifyitems below starts with the slow ones
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On xdist's workers, the files that hold a test marked `slow` first (each worker collects the same order):
    started last, one of them would end the run alone while the other workers stand idle. A serial run keeps
    the files' own order."""
    if not hasattr(config, "workerinput"):
        return
    slow_files = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow_files)  # stable: each file's own order is kept


def pytest_collection_finish(session: pytest.Session) -> None:
    """Everything alive once the test modules are imported (the libraries, the parsed templates) lives until the
    process ends: out of the collector's reach from now on."""
    freeze_survivors()


@functools.cache
def load_template() -> dict[str, Any]:
    """template.yaml and converge's application it includes, as one view, parsed once per process (a tenth of a
    second or more each time; tests only read it): each section holds the entries of both, so a test finds the
    jobs table and the reference application's bucket alike, wherever each is declared (the root's win)."""
    return merged_view(TEMPLATE)


def merged_view(path: Path) -> dict[str, Any]:
    """A template and the nested applications it includes from disk (localcloud's lookup), section by section."""
    merged: dict[str, Any] = {}
    for _, sam, _ in reversed(application_templates(path)):
        for section, entries in sam.items():
            if isinstance(entries, dict):
                merged[section] = {**merged.get(section, {}), **entries}
            else:
                merged[section] = entries
    return merged


@pytest.fixture(scope="session")
def template() -> dict[str, Any]:
    return load_template()


def warm() -> None:
    """Fill this process's caches before it forks test sessions of its own (the mutation run forks one per
    mutant): the parsed template, botocore's service models, moto's backends and the empty tables the `tables`
    fixture copies, by one round trip through the tables and queues the tests build. Nothing of it is kept but
    what the caches hold."""
    keys = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": REGION}
    with mock.patch.dict(os.environ, keys), mock_aws():
        from moto.dynamodb.models import dynamodb_backends

        names = create_tables(boto3.client("dynamodb", region_name=REGION), load_template())
        tables = dynamodb_backends[MOTO_ACCOUNT][REGION].tables
        EMPTY_TABLES.update(copy.deepcopy({name: tables[name] for name in names.values()}))
        boto3.client("sqs", region_name=REGION).create_queue(QueueName="warm")
        boto3.client("ssm", region_name=REGION).put_parameter(Name="/warm", Value="on", Type="String")
        for service in ("s3", "sesv2", "scheduler", "lambda", "cloudformation", "sts"):
            boto3.client(service, region_name=REGION)  # type: ignore[call-overload]


LOCAL_AWS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_REGION": REGION,
    "AWS_DEFAULT_REGION": REGION,
}
"""Dummy credentials and the region of the in-process cloud."""


def local_aws(patch: pytest.MonkeyPatch) -> None:
    """The environment of a test that runs converge's command line or a local cloud in this process: dummy
    credentials, and nothing that would point it elsewhere (an endpoint, a profile, a stack name)."""
    for name, value in LOCAL_AWS.items():
        patch.setenv(name, value)
    for name in ("AWS_ENDPOINT_URL", "AWS_PROFILE", "CONVERGE_STACK"):
        patch.delenv(name, raising=False)


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """An empty moto account with dummy credentials; nothing leaves the process."""
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": REGION,
        "AWS_REGION": REGION,
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    with mock_aws():
        yield


@pytest.fixture(autouse=True)
def moto_shortcuts(request: pytest.FixtureRequest) -> Iterator[None]:
    """Every test's moto runs through the local cloud's shortcuts (localcloud.speedups: DynamoDB's responses
    encoded as the wire document, a transaction backed up item by item, each response class's actions listed
    once, JSON templates read as JSON; verified equal to moto's own paths by tests/localcloud/test_speedups.py
    and tests/faults/test_load.py), unless it is marked `moto_as_is`. moto's own copy of every table a
    transaction touches made a 1,000-child batch's deliveries quadratic."""
    if request.node.get_closest_marker("moto_as_is") is not None:
        yield
        return
    with fast_moto():
        yield


def create_table_from_template(client: Any, template: dict[str, Any], logical_id: str, name: str) -> str:
    """create_table from a template resource's Properties, so tests and template cannot drift."""
    properties = template["Resources"][logical_id]["Properties"]
    request: dict[str, Any] = {
        "TableName": name,
        "AttributeDefinitions": properties["AttributeDefinitions"],
        "KeySchema": properties["KeySchema"],
        "BillingMode": properties.get("BillingMode", "PAY_PER_REQUEST"),
    }
    indexes = []
    for index in properties.get("GlobalSecondaryIndexes", []):
        index_name = index["IndexName"]
        if isinstance(index_name, dict):  # !FindInMap [Names, AttentionIndex, Name]
            mapping, key, field = index_name["Fn::FindInMap"]
            index_name = template["Mappings"][mapping][key][field]
        indexes.append({"IndexName": index_name, "KeySchema": index["KeySchema"], "Projection": index["Projection"]})
    if indexes:
        request["GlobalSecondaryIndexes"] = indexes
    if "StreamSpecification" in properties:
        request["StreamSpecification"] = {"StreamEnabled": True, **properties["StreamSpecification"]}
    client.create_table(**request)
    ttl = properties.get("TimeToLiveSpecification")
    if ttl:
        client.update_time_to_live(TableName=name, TimeToLiveSpecification=ttl)
    return name


@pytest.fixture
def tables(aws: None, template: dict[str, Any]) -> dict[str, str]:
    """The jobs, state and markers tables, exactly as the template declares them: created through the API by the
    first test of a process, and copied from moto's objects of those, still empty, for every later one (a tenth of
    the time: five API calls cost about 40 ms, and a thousand tests ask for these tables)."""
    from moto.dynamodb.models import dynamodb_backends

    backend = dynamodb_backends[MOTO_ACCOUNT][REGION]
    if not EMPTY_TABLES:
        names = create_tables(boto3.client("dynamodb", region_name=REGION), template)
        EMPTY_TABLES.update(copy.deepcopy({name: backend.tables[name] for name in names.values()}))
        return names
    backend.tables.update(copy.deepcopy(EMPTY_TABLES))
    return {role: name for role, (_, name) in TABLES.items()}


MOTO_ACCOUNT = "123456789012"
"""moto's default account, the one every test's clients use."""
EMPTY_TABLES: dict[str, Any] = {}
"""moto's objects of the three tables as the first test of this process created them, before it wrote to them."""


TABLES = {
    "jobs": ("JobsTable", "converge-jobs"),
    "state": ("StateTable", "converge-state"),
    "markers": ("MarkersTable", "converge-markers"),
}
"""The tables tests make, by their role: the template's logical id and the name they get."""


def create_tables(client: Any, template: dict[str, Any]) -> dict[str, str]:
    """The jobs, state and markers tables from the template, by their names in the tests."""
    return {
        role: create_table_from_template(client, template, logical_id, name)
        for role, (logical_id, name) in TABLES.items()
    }


SUMMARIES = {
    "heuristics": "PII and secret heuristics, measured on the corpus",
    "linear time": "hostile input refused in linear time: ratios of the slowest shape's times between sizes",
    "open break": "replayed breaks that broke again in this run, with their traces",
}
"""Figures tests record (`record_property(name, line)`) and the end of the run prints, also under xdist."""


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Print the figures the measuring tests recorded: the heuristics' precision and recall, the time ratios, and
    the trace of a replayed break that broke again (failed, or xfailed while it is marked open)."""
    reports = [r for outcome in ("passed", "failed", "xfailed") for r in terminalreporter.stats.get(outcome, [])]
    for name, title in SUMMARIES.items():
        lines = {value for report in reports for key, value in getattr(report, "user_properties", ()) if key == name}
        if lines:
            terminalreporter.write_sep("-", title)
            for line in sorted(lines):
                terminalreporter.write_line(line)


def drive_to(store: Any, operation: Any, state: Any, attempts: int = 1, error: str = "boom") -> Any:
    """Move an admitted operation to `state` the way the pipeline would, through the store's own writes
    (the transition table allows no shortcut), and return it as stored."""
    from converge.model.records import Lease, Subject
    from converge.model.states import OperationState

    request = operation.request
    subject = Subject(operation.operation_id, request.job_type, request.fingerprint)
    if state is OperationState.ACCEPTED:
        return store.require(operation.operation_id)
    if state is OperationState.PAUSED:
        assert store.state.pause(subject, "test: kill switch is off") is None
        return store.require(operation.operation_id)
    if state is OperationState.REJECTED:
        assert store.state.reject(subject, error) is None
        return store.require(operation.operation_id)
    lease = None
    for attempt in range(1, attempts + 1):
        lease = store.state.acquire(subject, f"test-worker-{attempt}", 30)
        assert isinstance(lease, Lease), lease
        if attempt < attempts:
            store.state.release(lease, f"attempt {attempt} failed; retrying", error)
    assert lease is not None
    if state is not OperationState.IN_PROGRESS:
        failing = state in (OperationState.FAILED, OperationState.UNKNOWN)
        assert store.state.settle(lease, state, f"test: {state.value}", error=error if failing else None) is None
    return store.require(operation.operation_id)
