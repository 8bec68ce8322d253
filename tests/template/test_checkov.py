"""checkov, the IaC scanner platform teams run on every template, finds nothing unexplained in ours.

Each finding is either fixed in the template or skipped in that resource's Metadata with the reason
(`checkov: skip: [{id: CKV_..., comment: "..."}]`). The scan covers template.yaml, converge's application (which
it includes), the scaffold's template as shipped (placeholders and all) and the template `converge init` writes
from it. checkov lives in its own
environment (.venv-scan, `pip install -e '.[scan]'`: it pins boto3 and packaging to releases the dev tools have
left behind); the README's test command creates it before running the suite. Options: .checkov.yaml.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from converge_cli.commands.init import SCAFFOLD, scaffold
from localcloud.template import load_sam_template
from tests.conftest import ROOT, TEMPLATE
from tests.template.conftest import APPLICATION

SCAN_VENV = ROOT / ".venv-scan"


def checkov_command() -> str:
    for candidate in (SCAN_VENV / "bin" / "checkov", shutil.which("checkov")):
        if candidate and Path(candidate).is_file():
            return str(candidate)
    reason = (
        f"checkov is not installed: python3 -m venv {SCAN_VENV.name} && {SCAN_VENV.name}/bin/pip install -e '.[scan]'"
    )
    if os.environ.get("CI"):
        pytest.fail(reason)  # CI runs the README's test command, which installs it: never pass by skipping there
    pytest.skip(reason)


@pytest.fixture(scope="module")
def templates(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    project = tmp_path_factory.mktemp("init") / "shop-jobs"
    scaffold(project)
    return {
        "template.yaml": TEMPLATE,
        "converge's application": APPLICATION,
        "the scaffold's template": SCAFFOLD / "template.yaml",
        "a project's template from converge init": project / "template.yaml",
    }


@pytest.fixture(scope="module")
def scan(templates: dict[str, Path]) -> dict[str, Any]:
    """One checkov run over every template, its JSON report (passed, failed and skipped checks)."""
    files = [arg for path in templates.values() for arg in ("-f", str(path))]
    done = subprocess.run(
        [checkov_command(), *files, "--output", "json"], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert done.returncode in (0, 1), done.stdout[-2000:] + done.stderr[-2000:]  # 1: findings, listed below
    report = json.loads(done.stdout)
    [report] = report if isinstance(report, list) else [report]  # one framework: cloudformation (.checkov.yaml)
    return dict(report)


def _template_of(check: dict[str, Any], templates: dict[str, Path]) -> str:
    for name, path in templates.items():
        if Path(check["file_abs_path"]).resolve() == path.resolve():
            return name
    raise AssertionError(f"checkov reported a file it was not given: {check['file_abs_path']}")


def test_checkov_finds_nothing_unexplained(scan: dict[str, Any], templates: dict[str, Path]) -> None:
    # Given checkov's report on the three templates / Then every one was parsed and scanned
    assert scan["summary"]["parsing_errors"] == 0, scan["results"].get("parsing_errors")
    results = scan["results"]
    scanned = {_template_of(c, templates) for c in results["passed_checks"] + results["skipped_checks"]}
    assert scanned == set(templates)
    # And no check failed: each finding is fixed, or skipped in its resource's Metadata with a reason
    unexplained = sorted(
        f"{_template_of(c, templates)}: {c['resource']} {c['check_id']} ({c['check_name']}) {c['file_line_range']}"
        for c in results["failed_checks"]
    )
    assert unexplained == [], "\n".join(["checkov findings with no fix and no reason:", *unexplained])
    # And every skip carries its reason (checkov's placeholder when the comment is missing is not one)
    unreasoned = sorted(
        f"{_template_of(c, templates)}: {c['resource']} {c['check_id']}"
        for c in results["skipped_checks"]
        if c["check_result"].get("suppress_comment") in (None, "", "No comment provided")
    )
    assert unreasoned == []


def test_the_scan_covers_what_platform_teams_look_for(scan: dict[str, Any], templates: dict[str, Path]) -> None:
    # Given the checks that passed on template.yaml and converge's application, then they include the ones the
    # templates were fixed for: customer-managed keys (where given), the documents bucket's versioning and access
    # logs, the workers' caps
    passed = {
        (c["check_id"], c["resource"].split(".", 1)[1])
        for c in scan["results"]["passed_checks"]
        if _template_of(c, templates) in ("template.yaml", "converge's application")
    }
    expected = {
        ("CKV_AWS_119", "JobsTable"),  # DynamoDB under a customer-managed key
        ("CKV_AWS_27", "CriticalQueue"),  # SQS under KMS, not SSE-SQS
        ("CKV_AWS_158", "OutboxRelayLogGroup"),  # log group under KMS
        ("CKV_AWS_173", "CriticalWorkerFunction"),  # the environment under KMS (from Globals)
        ("CKV_AWS_26", "AlarmTopic"),
        ("CKV_AWS_149", "SigningSecret"),
        ("CKV_AWS_21", "DocumentsBucket"),  # versioning
        ("CKV_AWS_18", "DocumentsBucket"),  # access logging
        ("CKV_AWS_115", "CriticalWorkerFunction"),  # reserved concurrency
        ("CKV_AWS_111", "KeySendersPolicy"),  # the IAM checks read the KMS grants (a separate policy each)
    }
    assert expected <= passed, expected - passed


def _skips(path: Path) -> list[tuple[str, str, Any]]:
    template = load_sam_template(path)
    return [
        (logical_id, skip.get("id"), skip.get("comment"))
        for logical_id, resource in template["Resources"].items()
        for skip in ((resource.get("Metadata") or {}).get("checkov") or {}).get("skip", [])
    ]


@pytest.mark.parametrize(
    "path", [TEMPLATE, APPLICATION, SCAFFOLD / "template.yaml"], ids=["template.yaml", "application", "scaffold"]
)
def test_each_skip_names_a_check_and_gives_a_one_line_reason(path: Path) -> None:
    # Given every checkov skip in a template's Metadata (read without checkov, so this holds wherever it runs)
    skips = _skips(path)
    assert skips
    # Then each names one check and says why in a sentence on one line, and no resource skips a check twice
    bad = [
        (logical_id, check_id, comment)
        for logical_id, check_id, comment in skips
        if not (isinstance(check_id, str) and check_id.startswith("CKV_"))
        or not isinstance(comment, str)
        or not 40 <= len(comment) <= 240
        or "\n" in comment
    ]
    assert bad == []
    assert len({(lid, cid) for lid, cid, _ in skips}) == len(skips)
