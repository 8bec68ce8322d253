"""A function's start: on Lambda no collection while it loads and what it loaded frozen; elsewhere nothing changes."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

PROBE = """
import gc, json, sys
from converge.runtime import startup
seen = {"before": gc.isenabled()}
seen["light"] = not any(name in sys.modules for name in ("botocore", "pydantic", "converge.runtime.root"))
startup.loading()
seen["loading"] = gc.isenabled()
kept_objects = [object() for _ in range(1000)]
startup.loaded()
seen["loaded"] = gc.isenabled()
seen["frozen"] = gc.get_freeze_count()
with startup.kept():
    seen["building"] = gc.isenabled()
    more = [[] for _ in range(1000)]
seen["built"] = gc.isenabled()
seen["frozen_more"] = gc.get_freeze_count() - seen["frozen"]
gc.disable()
with startup.kept():
    pass
seen["kept_off"] = gc.isenabled()
print(json.dumps(seen))
"""


def probe(on_lambda: bool) -> dict[str, object]:
    env = {key: value for key, value in os.environ.items() if key != "AWS_LAMBDA_RUNTIME_API"}
    if on_lambda:
        env["AWS_LAMBDA_RUNTIME_API"] = "127.0.0.1:9001"
    done = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def test_on_lambda_the_collector_is_off_while_loading_and_what_was_loaded_is_frozen():
    # Given a fresh interpreter with Lambda's runtime variable set / When a function loads, then builds a part
    seen = probe(on_lambda=True)
    # Then the startup module loaded nothing before the collector was turned off
    assert seen["light"] is True
    # And the collector was off while it loaded and while it built, on again after each
    assert (seen["before"], seen["loading"], seen["loaded"]) == (True, False, True)
    assert (seen["building"], seen["built"]) == (False, True)
    # And what it loaded and built was moved out of later collections
    assert seen["frozen"] > 1000 and seen["frozen_more"] > 1000  # type: ignore[operator]
    # And a collector someone else turned off stays off
    assert seen["kept_off"] is False


def test_anywhere_else_the_collector_is_left_as_it_is():
    # Given a process that is not a Lambda function's own (a local cloud running several, a test, a tool)
    seen = probe(on_lambda=False)
    # Then nothing is turned off and nothing frozen
    assert {key: seen[key] for key in ("loading", "loaded", "building", "built")} == dict.fromkeys(
        ("loading", "loaded", "building", "built"), True
    )
    assert (seen["frozen"], seen["frozen_more"]) == (0, 0)


@pytest.mark.parametrize("code_root", ["worker", "enqueue_api", "outbox_relay"])
def test_each_function_turns_the_collector_off_before_its_imports_and_on_after(code_root):
    # Given a function's app.py as shipped
    from converge.runtime.handlers import app_source

    lines = app_source(code_root).splitlines()
    # Then the only import before `startup.loading()` is the startup module, and `startup.loaded()` is its last line
    loading = lines.index(next(line for line in lines if line.startswith("startup.loading()")))
    assert [line for line in lines[:loading] if "import" in line] == ["from converge.runtime import startup"]
    assert lines[-1] == "startup.loaded()"
