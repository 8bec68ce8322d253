"""The scaffold follows the framework: its handlers and template are this repository's, less the reference app."""

from __future__ import annotations

from pathlib import Path

from converge_cli.init_cmd import SCAFFOLD, scaffold
from converge_cli.project import _read, catalogue_of
from tests.conftest import ROOT, TEMPLATE

REFERENCE_RESOURCES = {
    "AppTable", "LedgerTable", "DocumentsBucket", "DocumentsBucketPolicy", "SigningSecret", "SenderIdentity",
    "CriticalWorkerAppPolicy", "DefaultWorkerAppPolicy", "BulkWorkerAppPolicy", "RecurringAppPolicy",
    "PartnerBenefitsToggle", "BoostExpirySweepToggle", "MediaLibrariesLayer", "DocumentsAccessLogsBucket",
    "DocumentsAccessLogsBucketPolicy",
}  # fmt: skip
"""What this repository's template holds for the reference application only."""


def test_the_scaffolds_handlers_are_the_frameworks() -> None:
    # Given every function directory of this repository / Then the scaffold carries the same handler, unchanged
    for handler in sorted((ROOT / "functions").glob("*/app.py")):
        copy = SCAFFOLD / "functions" / handler.parent.name / "app.py"
        assert copy.read_text() == handler.read_text(), f"{copy} differs from {handler}"


def test_a_scaffolded_template_has_the_frameworks_resources_and_the_example_toggle(tmp_path: Path) -> None:
    # Given a project made by `converge init`
    scaffold(tmp_path / "shop-jobs")
    made = _read((tmp_path / "shop-jobs" / "template.yaml").resolve())
    ours = _read(TEMPLATE.resolve())
    # Then it holds every resource of this template but the reference application's, plus the example's toggle
    assert set(made["Resources"]) == (set(ours["Resources"]) - REFERENCE_RESOURCES) | {"GreetingToggle"}
    # And its functions name the new catalogue, whose package is where the layer has it
    assert catalogue_of(made) == "shop_jobs"
    assert (tmp_path / "shop-jobs" / "shared" / "shop_jobs" / "__init__.py").is_file()
    leftovers = [p for p in (tmp_path / "shop-jobs").rglob("*") if p.is_file() and "{{" in p.read_text() + p.name]
    assert leftovers == []
