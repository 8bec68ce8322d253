"""Every function imports only what it runs: no image or PDF library at cold start, whatever its catalogue."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from converge_bench.imports import HEAVY, cold_imports
from tests.conftest import TEMPLATE


@pytest.fixture(scope="module")
def imports() -> dict[str, object]:
    # Given each function of the template imported in its own fresh interpreter, as Lambda would
    return {result.function: result for result in cold_imports(TEMPLATE)}


@pytest.mark.parametrize(
    "function",
    [
        "OutboxRelayFunction",
        "BatchCounterFunction",
        "EnqueueApiFunction",
        "ResumerFunction",
        "DlqRedriveFunction",
        "ReconcilerFunction",
        "RecurringFunction",
        "CriticalWorkerFunction",
        "DefaultWorkerFunction",
        "BulkWorkerFunction",
    ],
)
def test_no_function_imports_a_heavy_library_at_cold_start(imports: dict[str, object], function: str) -> None:
    # When its handler module has been imported (the cold start)
    result = imports[function]
    # Then it knows the catalogue's bindings, but has loaded neither Pillow, fpdf2 nor fontTools:
    # a worker loads a runner's library with the first message of that job, not before
    assert result.loaded("catalogue")  # type: ignore[attr-defined]
    assert [package for package in HEAVY if result.loaded(package)] == []  # type: ignore[attr-defined]


def test_a_runner_brings_its_library_on_first_use() -> None:
    # Given the reference catalogue imported in a fresh interpreter (its runners are named lazily)
    probe = (
        "import sys\n"
        "from converge.flow.registry import load_catalogue\n"
        "registry = load_catalogue('catalogue')\n"
        "before = 'fpdf' in sys.modules\n"
        "registry.runner('pdf.cv.v1')\n"
        "print(before, 'fpdf' in sys.modules)\n"
    )
    env = {
        **os.environ,
        "PYTHONPATH": str(TEMPLATE.parent / "shared"),
        "APP_TABLE": "app",
        "DOCUMENTS_BUCKET": "d",
        "SENDER_EMAIL": "noreply@example.com",  # the CV's link is e-mailed (its third step)
    }
    # When the CV job's runner is built
    done = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    # Then fpdf2 was imported then, and not before
    assert done.stdout.split() == ["False", "True"]


@pytest.mark.parametrize(
    ("function", "not_loaded"),
    [
        (
            "OutboxRelayFunction",
            ["converge.flow.worker", "converge.flow.pipeline", "aws_lambda_powertools.utilities.batch"],
        ),
        (
            "CriticalWorkerFunction",
            ["converge.flow.relay", "converge.flow.delays", "converge.flow.dispatch", "converge.flow.resumer"],
        ),
        ("EnqueueApiFunction", ["converge.flow.worker", "converge.flow.relay", "converge.flow.pipeline"]),
        ("ResumerFunction", ["converge.flow.worker", "converge.flow.relay", "converge.flow.pipeline"]),
        ("BatchCounterFunction", ["converge.flow.worker", "converge.flow.relay", "converge.flow.pipeline"]),
    ],
)
def test_a_function_loads_its_own_parts_and_not_the_others(
    imports: dict[str, object], function: str, not_loaded: list[str]
) -> None:
    # When a function's handler module has been imported (tracing off, as the template's local runs have it)
    result = imports[function]
    # Then none of the other functions' parts are loaded, and neither is the X-Ray SDK
    assert [module for module in not_loaded if result.loaded(module)] == []  # type: ignore[attr-defined]
    assert not result.loaded("aws_xray_sdk")  # type: ignore[attr-defined]
