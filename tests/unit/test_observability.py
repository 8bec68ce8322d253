"""Metrics: a batch publishes each (outcome, job type) once, not once per message."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from converge.observability import batched_counts, count


def emf_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{") and '"_aws"' in line]


def test_counts_inside_a_batch_are_added_up_and_published_once_per_job_type(capsys):
    # Given a batch in which three messages of one type and one of another succeed
    with batched_counts():
        for _ in range(3):
            count("succeeded", "mail.notice.v1")
        count("succeeded", "files.copy.v1")
        # Then nothing is published while the batch runs
        assert emf_lines(capsys.readouterr().out) == []
    # And at its end, one metric set per job type, carrying the sum
    published = {line["job_type"]: line["succeeded"] for line in emf_lines(capsys.readouterr().out)}
    assert published == {"mail.notice.v1": [3.0], "files.copy.v1": [1.0]}


def test_outside_a_batch_a_count_is_published_at_once(capsys):
    count("unknown", "money.credit.v1")
    [line] = emf_lines(capsys.readouterr().out)
    assert line["unknown"] == [1.0]
    assert line["_aws"]["CloudWatchMetrics"][0]["Dimensions"] == [["job_type"]]


# -- tracing: the X-Ray SDK only where a function is traced -------------------------------------------------

_TRACE_PROBE = """
import sys
from converge.observability import tracer

def handler(event, context):
    return {"event": event}

decorated = tracer.capture_lambda_handler(handler)
print(decorated is handler, "aws_xray_sdk" in sys.modules, decorated({"n": 1}, None) == {"event": {"n": 1}})
"""


def _probe(**env: str) -> list[str]:
    clean = {k: v for k, v in os.environ.items() if k not in ("POWERTOOLS_TRACE_DISABLED", "LAMBDA_TASK_ROOT")}
    done = subprocess.run(
        [sys.executable, "-c", _TRACE_PROBE],
        env={**clean, "AWS_DEFAULT_REGION": "us-east-1", **env},
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.split()


def test_a_handler_is_not_wrapped_and_xray_never_loads_while_tracing_is_off() -> None:
    # Given a Lambda with POWERTOOLS_TRACE_DISABLED, and a process outside Lambda (no LAMBDA_TASK_ROOT)
    for env in ({"LAMBDA_TASK_ROOT": "/var/task", "POWERTOOLS_TRACE_DISABLED": "true"}, {}):
        # When a handler is decorated in a fresh interpreter
        # Then the handler itself comes back, still answers, and the X-Ray SDK was not imported
        assert _probe(**env) == ["True", "False", "True"], env


def test_in_a_traced_lambda_the_handler_is_powertools_traced() -> None:
    # Given a Lambda environment with tracing on (the template's `Tracing: Active`)
    # When a handler is decorated
    # Then Powertools' Tracer wraps it (the X-Ray SDK loaded), and the wrapped handler still answers
    assert _probe(LAMBDA_TASK_ROOT="/var/task", AWS_XRAY_CONTEXT_MISSING="IGNORE_ERROR") == ["False", "True", "True"]


def test_under_sam_local_tracing_is_off_as_powertools_has_it() -> None:
    assert _probe(LAMBDA_TASK_ROOT="/var/task", AWS_SAM_LOCAL="true") == ["True", "False", "True"]
