"""Framework and application apart: nothing converge ships names the reference application."""

from __future__ import annotations

import re

from catalogue import BINDINGS
from tests.conftest import ROOT

SHIPPED = [ROOT / "shared" / "converge", ROOT / "infra"]
REFERENCE_OUTPUTS = ("AppTableName", "DocumentsBucketName", "LedgerTableName", "SigningSecretArn")
IMPORTS = re.compile(r"^\s*(from|import)\s+catalogue\b|load_catalogue\(\s*[\"']catalogue[\"']", re.MULTILINE)


def shipped_sources() -> list:
    return [
        path
        for directory in SHIPPED
        for path in sorted(directory.rglob("*.py"))
        if "scaffold" not in path.parts and "__pycache__" not in path.parts
    ]


def test_no_framework_module_imports_or_names_the_reference_catalogue() -> None:
    # Given every Python module of the framework, the CLI and the local cloud
    names = [binding.job_type.rsplit(".v", 1)[0] for binding in BINDINGS] + list(REFERENCE_OUTPUTS)
    found = []
    for path in shipped_sources():
        text = path.read_text()
        # Then none imports the reference catalogue, nor names one of its job types or its stack outputs
        if IMPORTS.search(text):
            found.append(f"{path.relative_to(ROOT)}: imports catalogue")
        found += [f"{path.relative_to(ROOT)}: {name}" for name in names if name in text]
    assert found == []
