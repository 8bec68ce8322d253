"""Cold start as Lambda pays it: a fresh interpreter from its start to its first answer, per function and design.

Each subject (a function of one design) is measured in two steps:

1. **Record, once** (`record()`, in its own interpreter): the resources it needs are created on moto,
   the handler module is imported and given its first event, and every answer moto gives (status,
   headers, body, as botocore received them) is written to a file, in order, per service operation.
2. **Replay, in fresh interpreters** (`_REPLAY`, run as `python -S -c`): no moto, no converge_bench,
   nothing loaded before the clock. The interpreter starts with the function's code directory and its
   layers on the path (as Lambda's /var/task and /opt/python), imports the handler module (the
   framework, Powertools, pydantic, boto3 and botocore: every import), and handles the same first
   event. botocore's whole client side runs (client creation, serializing, signing, parsing); the
   answers come from the recording through a `before-send` hook, as moto's own stubber answers, so
   neither the emulator nor a network is timed. The time the hook itself takes is subtracted.

Each sample has the wall time from the parent starting the interpreter (`spawn`) to the first answer, split
into the interpreter's own start, the handler module's import and the first event, and the interpreter's CPU
time over the same span (the ratios' basis, below). What Lambda adds
before any of it (fetching the code, starting the sandbox and its runtime client) is the same for every
design and is not measured. Tracing is off for every design (with `Tracing: Active` each would also load
the X-Ray SDK). Bytecode is precompiled for all (the first round is a warm-up, not counted).

Designs are taken in turn within each round (converge, bare baseline, same-job baseline, then the enqueue
APIs), so a change in the machine's load falls on all of them alike; each ratio is computed per round, on the
interpreter's CPU time (user + system, from its start to its first answer): on a dedicated CPU, as a Lambda
sandbox has, that is the wall time of a start whose files are in the page cache, and unlike wall time it does
not grow when a neighbour takes the CPU. The wall times are reported beside it.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "benchmarks"
REGION = "us-east-1"
ACCOUNT = "123456789012"
OPERATION_ID = "cold-0000001"
JOB_TYPE = "bench.noop.v1"
CALLER = f"arn:aws:iam::{ACCOUNT}:user/bench-producer"


@dataclass(frozen=True)
class Subject:
    """One function of one design: what it runs and with what on its path."""

    key: str
    """`<function>/<design>`, e.g. `worker/converge`."""
    handler_file: Path
    layers: tuple[Path, ...] = ()
    """Directories on the path after the code directory, as a Lambda's layers (/opt/python)."""

    @property
    def function(self) -> str:
        return self.key.split("/")[0]

    @property
    def design(self) -> str:
        return self.key.split("/")[1]


FUNCTIONS = ROOT / "shared" / "converge" / "application" / "functions"
"""converge's functions' code roots, in the package beside its application's template."""

SUBJECTS = (
    Subject("worker/converge", FUNCTIONS / "worker" / "app.py", (ROOT / "shared", BENCHMARKS)),
    Subject("worker/baseline", BENCHMARKS / "baseline" / "worker" / "app.py"),
    Subject("worker/same_job", BENCHMARKS / "baseline_same_job" / "worker" / "app.py"),
    Subject("enqueue_api/converge", FUNCTIONS / "enqueue_api" / "app.py", (ROOT / "shared", BENCHMARKS)),
    Subject("enqueue_api/same_job", BENCHMARKS / "baseline_same_job" / "api" / "app.py"),
)
"""converge's functions load only the benchmark catalogue (CONVERGE_CATALOGUE=converge_bench.jobs), so that the
figure is the framework's, not the reference application's; `BENCHMARKS` is on their path for that alone."""
BY_KEY = {subject.key: subject for subject in SUBJECTS}
RATIOS = {
    "cold_start_same_job": ("worker/converge", "worker/same_job"),
    "cold_start_bare": ("worker/converge", "worker/baseline"),
    "cold_start_enqueue_api_same_job": ("enqueue_api/converge", "enqueue_api/same_job"),
}
"""Each cold-start ratio: converge's function over the baseline's that does the same (or, bare, less)."""


# -- measuring (the parent) ----------------------------------------------------------------------------------

RESTORE_ROUNDS = 3
"""Rounds that also take a SnapStart restore sample per subject (an estimate, reported as a median, not a ratio)."""
BREAKDOWN_RUNS = 3
"""Runs under -X importtime per subject (fewer if there are fewer rounds); each part is the median of them."""


def _median_parts(runs: list[dict[str, float]]) -> dict[str, float]:
    return {part: round(statistics.median(run[part] for run in runs), 1) for part in runs[0]}


@dataclass
class Sample:
    total_ms: float
    """From spawning the interpreter to the first answer, less the replay hook's own time."""
    interpreter_ms: float
    import_ms: float
    first_event_ms: float
    restored_ms: float = 0.0
    """In a restore sample: from the restore (the fork) to the first answer, after-restore hooks included."""
    cpu_ms: float = 0.0
    """The interpreter's CPU time (user + system) to its first answer, less the harness's and the hook's; in a
    restore sample, the restored child's alone. What a dedicated CPU would take: a busy neighbour does not add to
    it as it adds to the wall time, so the ratios are taken on it."""


def measure(rounds: int = 5, progress: Callable[[str], None] = lambda message: None) -> dict[str, Any]:
    """Record each subject once, then `rounds` interleaved rounds of fresh interpreters (after one warm-up round).

    Returns per subject its samples and medians, and per ratio (see RATIOS) the value of each round,
    its median and its spread (min, max)."""
    with tempfile.TemporaryDirectory(prefix="converge-coldstart-") as scratch:
        recordings = {}
        for subject in SUBJECTS:
            progress(f"cold start: recording {subject.key}'s AWS answers")
            recordings[subject.key] = _record_in_subprocess(subject, Path(scratch))
        samples: dict[str, list[Sample]] = {subject.key: [] for subject in SUBJECTS}
        restores: dict[str, list[Sample]] = {subject.key: [] for subject in SUBJECTS}
        for round_index in range(rounds + 1):
            progress(f"cold start: round {round_index}/{rounds}" + (" (warm-up)" if round_index == 0 else ""))
            for subject in SUBJECTS:
                sample = replay(subject, recordings[subject.key])
                if round_index:  # round 0 warms the page cache and the bytecode cache alike for every design
                    samples[subject.key].append(sample)
                if 0 < round_index <= RESTORE_ROUNDS:
                    restores[subject.key].append(replay(subject, recordings[subject.key], restore=True))
        runs = min(BREAKDOWN_RUNS, rounds)
        progress(f"cold start: what each is made of (-X importtime, {runs} runs each)")
        parts = {
            subject.key: _median_parts([made_of(subject, recordings[subject.key]) for _ in range(runs)])
            for subject in SUBJECTS
        }
    summary = summarise(samples)
    for key, breakdown in parts.items():
        summary["subjects"][key]["made_of_ms"] = breakdown
        summary["subjects"][key]["after_restore_ms"] = _median([sample.restored_ms for sample in restores[key]])
        summary["subjects"][key]["after_restore_cpu_ms"] = _median([sample.cpu_ms for sample in restores[key]])
    return summary


def summarise(samples: dict[str, list[Sample]]) -> dict[str, Any]:
    subjects = {
        key: {
            "cpu_ms": _median([s.cpu_ms for s in taken]),
            "total_ms": _median([s.total_ms for s in taken]),
            "interpreter_ms": _median([s.interpreter_ms for s in taken]),
            "import_ms": _median([s.import_ms for s in taken]),
            "first_event_ms": _median([s.first_event_ms for s in taken]),
            "samples_cpu_ms": [round(s.cpu_ms, 1) for s in taken],
            "samples_ms": [round(s.total_ms, 1) for s in taken],
        }
        for key, taken in samples.items()
    }
    ratios = {}
    for name, (ours, theirs) in RATIOS.items():
        per_round = [round(a.cpu_ms / b.cpu_ms, 3) for a, b in zip(samples[ours], samples[theirs], strict=True)]
        wall = [round(a.total_ms / b.total_ms, 3) for a, b in zip(samples[ours], samples[theirs], strict=True)]
        ratios[name] = {
            "rounds": per_round,
            "median": round(statistics.median(per_round), 3) if per_round else None,
            "spread": [min(per_round), max(per_round)] if per_round else None,
            "wall_rounds": wall,
            "wall_median": round(statistics.median(wall), 3) if wall else None,
        }
    return {"subjects": subjects, "ratios": ratios, "rounds": len(next(iter(samples.values()), []))}


def _median(values: list[float]) -> float | None:
    return round(statistics.median(values), 1) if values else None


def _record_in_subprocess(subject: Subject, scratch: Path) -> Path:
    path = scratch / (subject.key.replace("/", "-") + ".json")
    done = subprocess.run(
        [sys.executable, "-c", f"from converge_bench.coldstart import record; record({subject.key!r}, {str(path)!r})"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"recording {subject.key} failed: {done.stderr.strip()[-1500:]}")
    return path


def _lambda_path(subject: Subject) -> list[str]:
    """The code directory, the layers, then the packages a deployment of these functions carries."""
    return [str(subject.handler_file.parent), *map(str, subject.layers), str(_packages())]


DEPLOYED = "converge-jobs"
"""The distribution whose requirements (boto3, aws-lambda-powertools[tracer], pydantic) and what they require are
what every design's Lambda has: the baselines use the same three."""


def _packages() -> Path:
    """A directory of links to what `DEPLOYED` requires, as installed here, and nothing else.

    The fresh interpreter must not see what this environment holds besides (dev tools bring awscrt and
    pyOpenSSL, which botocore imports wherever they are installed: some 300 ms that no Lambda pays)."""
    from importlib import metadata

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    environment = hashlib.sha256(sys.prefix.encode()).hexdigest()[:12]  # one directory per environment
    directory = Path(tempfile.gettempdir()) / f"converge-bench-lambda-packages-{os.getuid()}-{environment}"
    directory.mkdir(exist_ok=True)
    wanted: dict[str, set[str]] = {}
    pending = [Requirement(text) for text in metadata.requires(DEPLOYED) or []]
    pending = [
        requirement for requirement in pending if not requirement.marker or requirement.marker.evaluate({"extra": ""})
    ]
    while pending:
        requirement = pending.pop()
        name, extras = canonicalize_name(requirement.name), set(requirement.extras)
        if name in wanted and extras <= wanted[name]:
            continue
        wanted[name] = wanted.get(name, set()) | extras
        for text in metadata.requires(requirement.name) or []:
            needed = Requirement(text)
            if needed.marker and not any(needed.marker.evaluate({"extra": extra}) for extra in (extras or {""})):
                continue
            pending.append(needed)
    for name in wanted:
        distribution = metadata.distribution(name)
        for top in {file.parts[0] for file in distribution.files or [] if len(file.parts) > 0}:
            if top.endswith((".dist-info", ".data", ".pth")) or top in ("..", "__pycache__", "bin"):
                continue
            source = Path(str(distribution.locate_file(top)))
            link = directory / top
            if source.exists() and not link.exists():
                with contextlib.suppress(FileExistsError):  # another run, at the same moment, made the same link
                    link.symlink_to(source)
    return directory


PARTS = {
    "boto3 + botocore": ("boto3", "botocore", "s3transfer", "jmespath", "dateutil", "urllib3", "six"),
    "powertools": ("aws_lambda_powertools",),
    "pydantic": ("pydantic", "pydantic_core", "annotated_types", "typing_extensions", "typing_inspection"),
    "converge": ("converge", "converge_bench"),
}
"""How `made_of` groups the modules a fresh interpreter imports (the rest is the standard library)."""


def import_parts(importtime: str) -> dict[str, float]:
    """Milliseconds of import by part (PARTS, the rest is the standard library), from `-X importtime`'s report:
    each module's own time, so that nothing is counted twice."""
    parts = dict.fromkeys((*PARTS, "standard library and other", "handler module's own code"), 0.0)
    owner = {package: part for part, packages in PARTS.items() for package in packages}
    for line in importtime.splitlines():
        fields = line.removeprefix("import time:").split("|")
        if not line.startswith("import time:") or len(fields) != 3 or not fields[0].strip().isdigit():
            continue  # the header line, or anything else the interpreter printed
        name = fields[2].strip()
        parts[owner.get(name.split(".")[0], "standard library and other")] += int(fields[0]) / 1000
    return parts


def made_of(subject: Subject, recording: Path) -> dict[str, float]:
    """One more fresh interpreter under `-X importtime`: milliseconds by part (imports by package, the handler
    module's own code at import, the first event). importtime's own bookkeeping inflates the import parts a little."""
    sample, stderr = _run(subject, recording, ("-X", "importtime"))
    parts = import_parts(stderr)
    # The handler module runs by exec_module, which importtime does not log: its own code is what the import
    # took beyond the imports logged (the few the harness made before the clock are in "standard library").
    parts["handler module's own code"] = max(0.0, sample.import_ms - sum(parts.values()))
    return {
        "interpreter": round(sample.interpreter_ms, 1),
        **{part: round(ms, 1) for part, ms in parts.items()},
        "first event": round(sample.first_event_ms, 1),
    }


def replay(subject: Subject, recording: Path, restore: bool = False) -> Sample:
    """One fresh interpreter: `-S` (no site: the path is only what a Lambda's would be), replaying `recording`.

    With `restore`, the interpreter initialises the function (the handler module's import), runs the
    before-snapshot hooks, forks, and in the child runs the after-restore hooks and the first event: the time to a
    first answer after a SnapStart restore, as far as this machine can tell (not AWS's restore latency)."""
    return _run(subject, recording, restore=restore)[0]


def _run(subject: Subject, recording: Path, flags: tuple[str, ...] = (), restore: bool = False) -> tuple[Sample, str]:
    recorded = json.loads(recording.read_text())
    mode = "restore" if restore else "cold"
    path = _lambda_path(subject)
    env = {
        **{name: os.environ[name] for name in ("PATH", "HOME", "LANG", "TZ") if name in os.environ},
        **recorded["environment"],
        "PYTHONPATH": os.pathsep.join(path),
    }
    spawned = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-S", *flags, "-c", _REPLAY, str(subject.handler_file), str(recording), mode],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=subject.handler_file.parent,
    )
    if done.returncode != 0:
        raise RuntimeError(f"cold start of {subject.key} failed: {done.stderr.strip()[-1500:]}")
    measured = json.loads(done.stdout.strip().splitlines()[-1])
    sample = Sample(
        total_ms=(measured["answered"] - spawned - measured["harness"]) * 1000,
        interpreter_ms=(measured["started"] - spawned) * 1000,
        import_ms=(measured["imported"] - measured["import_started"]) * 1000,
        first_event_ms=(measured["answered"] - measured["imported"] - measured["hook"]) * 1000,
        restored_ms=(measured["answered"] - measured["restored"] - measured["hook"]) * 1000,
        cpu_ms=measured["cpu"] * 1000,
    )
    return sample, done.stderr


_REPLAY = r"""
import time
started, cpu_started = time.monotonic(), time.process_time()
import json, os, sys, importlib.util
from collections import defaultdict, deque
handler_file, recording, mode = sys.argv[1], sys.argv[2], sys.argv[3]
with open(recording) as source:
    recorded = json.load(source)
answers = defaultdict(deque)
for operation, status, headers, body in recorded["answers"]:
    answers[operation].append((status, headers, body))
hook, cpu_hook = [0.0], [0.0]

def answer(request, event_name, **kwargs):
    began, cpu_began = time.monotonic(), time.process_time()
    import base64, io
    from botocore.awsrequest import AWSResponse

    class Raw(io.BytesIO):
        def stream(self, **kwargs):
            contents = self.read()
            while contents:
                yield contents
                contents = self.read()

    operation = event_name.split(".", 1)[1]
    if not answers[operation]:
        raise RuntimeError(f"no recorded answer for {operation}")
    status, headers, body = answers[operation].popleft()
    response = AWSResponse(request.url, status, headers, Raw(base64.b64decode(body)))
    hook[0] += time.monotonic() - began
    cpu_hook[0] += time.process_time() - cpu_began
    return response

class AnswerFromRecording:
    # The hook joins botocore's built-in handlers when the function's own imports load botocore.handlers (as
    # moto's stub does), so that botocore is imported where the function imports it, not before its first line.
    def find_spec(self, name, path, target=None):
        if name != "botocore.handlers":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            module.BUILTIN_HANDLERS.append(("before-send", answer))

        spec.loader.exec_module = exec_module
        return spec

sys.meta_path.insert(0, AnswerFromRecording())
import_started, cpu_import_started = time.monotonic(), time.process_time()
harness, cpu_harness = import_started - started, cpu_import_started - cpu_started

spec = importlib.util.spec_from_file_location("app", handler_file)
module = importlib.util.module_from_spec(spec)
sys.modules["app"] = module
spec.loader.exec_module(module)
imported = restored = time.monotonic()
if mode == "restore":  # SnapStart, estimated: the before-snapshot hooks, a fork (the restore), the after-restore hooks
    hooks = sys.modules.get("snapshot_restore_py")
    for runtime_hook, args, kwargs in hooks.get_before_snapshot() if hooks else ():
        runtime_hook(*args, **kwargs)
    child = os.fork()
    if child:
        sys.exit(os.waitstatus_to_exitcode(os.waitpid(child, 0)[1]))
    restored = time.monotonic()
    hook[0] = cpu_hook[0] = cpu_harness = 0.0  # a forked child's CPU time starts at zero
    for runtime_hook, args, kwargs in hooks.get_after_restore() if hooks else ():
        runtime_hook(*args, **kwargs)

class Context:
    function_name = recorded["environment"]["AWS_LAMBDA_FUNCTION_NAME"]
    function_version = "$LATEST"
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:" + function_name
    memory_limit_in_mb = 512
    aws_request_id = "cold-start"
    log_group_name = "/aws/lambda/" + function_name
    log_stream_name = "cold"
    def get_remaining_time_in_millis(self):
        return 30_000

response = module.handler(recorded["event"], Context())
answered, cpu_answered = time.monotonic(), time.process_time()
if json.dumps(response, sort_keys=True, default=str) != recorded["response"]:
    raise SystemExit(f"the replayed answer differs from the recorded one: {response}")
left = {operation: len(queue) for operation, queue in answers.items() if queue}
if left:
    raise SystemExit(f"recorded answers were not asked for: {left}")
print(json.dumps({"started": started, "import_started": import_started, "imported": imported, "answered": answered,
                  "restored": restored, "hook": hook[0], "harness": harness + hook[0],
                  "cpu": cpu_answered - cpu_harness - cpu_hook[0]}), flush=True)
"""


# -- recording (a fresh interpreter with moto) -----------------------------------------------------------------


def _lambda_environment(function_name: str, task_root: Path) -> dict[str, str]:
    return {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_REGION": REGION,
        "AWS_DEFAULT_REGION": REGION,
        "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled",
        "POWERTOOLS_TRACE_DISABLED": "true",
        "POWERTOOLS_LOG_LEVEL": "WARNING",
        "POWERTOOLS_METRICS_NAMESPACE": "Bench",
        "AWS_LAMBDA_FUNCTION_NAME": function_name,
        # As Lambda's runtime sets it (the address of its runtime API), for every design: converge's functions
        # read it to know they run alone in their process (converge.runtime.startup).
        "AWS_LAMBDA_RUNTIME_API": "127.0.0.1:9001",
        # As Lambda sets it. Outside Lambda the X-Ray SDK, which Powertools' Tracer imports, also builds a
        # sampling client at import (over 100 ms) that a Lambda never pays.
        "LAMBDA_TASK_ROOT": str(task_root),
    }


def _table(ddb: Any, name: str, key: str) -> str:
    ddb.create_table(
        TableName=name,
        AttributeDefinitions=[{"AttributeName": key, "AttributeType": "S"}],
        KeySchema=[{"AttributeName": key, "KeyType": "HASH"}],
        BillingMode="PAY_PER_REQUEST",
    )
    return name


def _sqs_event(body: dict[str, Any]) -> dict[str, Any]:
    return {
        "Records": [
            {
                "messageId": str(uuid.UUID(int=1)),
                "receiptHandle": "cold-start-receipt",
                "body": json.dumps(body, separators=(",", ":"), sort_keys=True),
                "attributes": {"ApproximateReceiveCount": "1", "SentTimestamp": str(int(time.time() * 1000))},
                "messageAttributes": {},
                "md5OfBody": "",
                "eventSource": "aws:sqs",
                "eventSourceARN": f"arn:aws:sqs:{REGION}:{ACCOUNT}:jobs",
                "awsRegion": REGION,
            }
        ]
    }


def _http_event(job_type: str, payload: dict[str, Any]) -> dict[str, Any]:
    """API Gateway HTTP API (payload 2.0), IAM-authorized, as it invokes the function for POST /jobs/{job_type}."""
    return {
        "version": "2.0",
        "routeKey": "POST /jobs/{job_type}",
        "rawPath": f"/jobs/{job_type}",
        "rawQueryString": "",
        "headers": {
            "content-type": "application/json",
            "idempotency-key": "cold-start-key-0001",
            "host": "api.example.com",
        },
        "requestContext": {
            "accountId": ACCOUNT,
            "apiId": "bench",
            "authorizer": {
                "iam": {
                    "accessKey": "AKIA0000000000000000",
                    "accountId": ACCOUNT,
                    "callerId": "AIDA0000000000000000",
                    "principalOrgId": None,
                    "userArn": CALLER,
                    "userId": "AIDA0000000000000000",
                }
            },
            "domainName": "api.example.com",
            "http": {
                "method": "POST",
                "path": f"/jobs/{job_type}",
                "protocol": "HTTP/1.1",
                "sourceIp": "10.0.0.1",
                "userAgent": "bench",
            },
            "requestId": "cold-start",
            "routeKey": "POST /jobs/{job_type}",
            "stage": "$default",
            "time": "01/Jan/2026:00:00:00 +0000",
            "timeEpoch": 1767225600000,
        },
        "pathParameters": {"job_type": job_type},
        "body": json.dumps(payload),
        "isBase64Encoded": False,
    }


def _converge_tables(ddb: Any, sqs: Any) -> dict[str, str]:
    queue_url = sqs.create_queue(QueueName="jobs")["QueueUrl"]
    dlq_url = sqs.create_queue(QueueName="jobs-dlq")["QueueUrl"]
    return {
        "JOBS_TABLE": _table(ddb, "jobs", "operation_id"),
        "MARKERS_TABLE": _table(ddb, "markers", "pk"),
        "STATE_TABLE": _table(ddb, "state", "operation_id"),
        "TOGGLE_PREFIX": "/converge/dev/toggles",
        "CONVERGE_CATALOGUE": "converge_bench.jobs",
        "DEFAULT_QUEUE_URL": queue_url,
        "POWERTOOLS_SERVICE_NAME": "converge",
        "_QUEUE_URL": queue_url,
        "_DLQ_URL": dlq_url,
    }


def _setup(subject: Subject, ddb: Any, sqs: Any, ssm: Any) -> tuple[dict[str, str], dict[str, Any]]:
    """The subject's resources on moto, its environment (beyond a Lambda's) and its first event."""
    payload = {"item_id": "item-1"}
    if subject.design == "converge":
        env = _converge_tables(ddb, sqs)
        queue_url, dlq_url = env.pop("_QUEUE_URL"), env.pop("_DLQ_URL")
        if subject.function == "enqueue_api":
            env["IDEMPOTENCY_TABLE"] = _table(ddb, "idempotency", "id")
            return env, _http_event(JOB_TYPE, payload)
        env.update({"QUEUE_NAME": "default", "QUEUE_URL": queue_url, "DLQ_URL": dlq_url, "MAX_RECEIVE_COUNT": "4"})
        # A raw producer item (no state record yet: ACCEPTED), written without importing converge here.
        ddb.put_item(
            TableName=env["JOBS_TABLE"],
            Item={
                "operation_id": {"S": OPERATION_ID},
                "job_type": {"S": JOB_TYPE},
                "payload": {"M": {"item_id": {"S": "item-1"}}},
            },
        )
        message = {"v": 1, "operation_id": OPERATION_ID, "job_type": JOB_TYPE, "payload": payload}
        return env, _sqs_event({**message, "correlation_id": None})
    env = {
        "ENTITY_TABLE": _table(ddb, "entities", "id"),
        "IDEMPOTENCY_TABLE": _table(ddb, "idempotency", "id"),
        "POWERTOOLS_SERVICE_NAME": subject.design,
    }
    if subject.function == "enqueue_api":
        env["OUTBOX_TABLE"] = _table(ddb, "outbox", "id")
        return env, _http_event(JOB_TYPE, payload)
    if subject.design == "same_job":
        env["TOGGLE_PREFIX"] = "/baseline/toggles"
        ssm.put_parameter(Name=f"/baseline/toggles/{JOB_TYPE}", Value="on", Type="String")
    ddb.put_item(TableName=env["ENTITY_TABLE"], Item={"id": {"S": OPERATION_ID}, "status": {"S": "PENDING"}})
    return env, _sqs_event({"operation_id": OPERATION_ID, "job_type": JOB_TYPE, "payload": payload})


def record(key: str, path: str) -> None:
    """Runs in its own interpreter: the subject's first event on moto, every AWS answer written to `path`."""
    import importlib.util

    subject = BY_KEY[key]
    environment = _lambda_environment(f"bench-{subject.function}-{subject.design}", subject.handler_file.parent)
    os.environ.update(environment)
    sys.path[:0] = [str(subject.handler_file.parent), *map(str, subject.layers)]
    import boto3
    from moto import mock_aws
    from moto.core.botocore_stubber import BotocoreStubber

    answers: list[tuple[str, int, dict[str, str], str]] = []
    with mock_aws():
        setup_session = boto3.session.Session(region_name=REGION)
        env, event = _setup(
            subject, setup_session.client("dynamodb"), setup_session.client("sqs"), setup_session.client("ssm")
        )
        environment.update(env)
        os.environ.update(env)
        original = BotocoreStubber.__call__

        def recorded(stubber: Any, event_name: str, request: Any, **kwargs: Any) -> Any:
            response = original(stubber, event_name, request, **kwargs)
            if response is not None:
                body = base64.b64encode(response.content).decode()
                answers.append((event_name.split(".", 1)[1], response.status_code, dict(response.headers), body))
            return response

        BotocoreStubber.__call__ = recorded  # type: ignore[method-assign]
        boto3.DEFAULT_SESSION = None
        try:
            spec = importlib.util.spec_from_file_location("app", subject.handler_file)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            sys.modules["app"] = module
            spec.loader.exec_module(module)
            response = module.handler(event, _RecordingContext(environment["AWS_LAMBDA_FUNCTION_NAME"]))
        finally:
            BotocoreStubber.__call__ = original  # type: ignore[method-assign]
    _check(subject, response)
    document = {
        "subject": key,
        "environment": environment,
        "event": event,
        "answers": answers,
        "response": json.dumps(response, sort_keys=True, default=str),
    }
    Path(path).write_text(json.dumps(document))


def _check(subject: Subject, response: dict[str, Any]) -> None:
    if subject.function == "worker" and response.get("batchItemFailures"):
        raise SystemExit(f"{subject.key}: the first record failed: {response}")
    if subject.function == "enqueue_api" and response.get("statusCode") != 202:
        raise SystemExit(f"{subject.key}: the first request was not admitted: {response}")


class _RecordingContext:
    def __init__(self, function_name: str) -> None:
        self.function_name = function_name
        self.function_version = "$LATEST"
        self.invoked_function_arn = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{function_name}"
        self.memory_limit_in_mb = 512
        self.aws_request_id = "cold-start"
        self.log_group_name = f"/aws/lambda/{function_name}"
        self.log_stream_name = "cold"

    def get_remaining_time_in_millis(self) -> int:
        return 30_000


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    result = measure(rounds, progress=lambda message: print(message, file=sys.stderr))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
