"""The scaffold follows the framework: its handlers come from the package, its template is this repository's less
the reference application."""

from __future__ import annotations

from pathlib import Path

from converge.runtime.handlers import FUNCTIONS, app_source
from converge_cli.init_cmd import SCAFFOLD, scaffold
from converge_cli.project import _read, catalogue_of
from tests.conftest import ROOT, TEMPLATE

REFERENCE_RESOURCES = {
    "AppTable", "LedgerTable", "DocumentsBucket", "DocumentsBucketPolicy", "SigningSecret", "SenderIdentity",
    "CriticalRunnerPolicy", "DefaultRunnerPolicy", "BulkRunnerPolicy", "RecurringRunnerPolicy",
    "PartnerBenefitsToggle", "BoostExpirySweepToggle", "CatalogueLayer", "MediaLibrariesLayer",
    "DocumentsAccessLogsBucket", "DocumentsAccessLogsBucketPolicy", "BoostExpirySweepSchedule",
    "BoostExpirySweepPermission",
}  # fmt: skip
APPLICATION_FUNCTIONS = ROOT / "shared" / "converge" / "application" / "functions"
"""converge's functions' code roots, beside its application's template in the package."""
"""What this repository's template holds for the reference application only."""


def test_the_handlers_come_from_the_package_not_from_copies(tmp_path: Path) -> None:
    # Given the scaffold shipped in the package / Then it carries no handler of its own
    assert not (SCAFFOLD / "functions").exists()
    # When `converge init` makes a project
    scaffold(tmp_path / "shop-jobs")
    made = tmp_path / "shop-jobs"
    # Then each function code root its template names holds the app.py the package writes for it
    for template in (made / "template.yaml", APPLICATION_FUNCTIONS.parent / "template.yaml"):
        roots = code_roots(_read(template.resolve()))
        assert roots and roots <= set(FUNCTIONS), f"{template} names a code root converge has no handler for"
    for code_root in FUNCTIONS:
        assert (made / "functions" / code_root / "app.py").read_text() == app_source(code_root)
        # ...and converge's application, which this repository includes, deploys the same handlers
        assert (APPLICATION_FUNCTIONS / code_root / "app.py").read_text() == app_source(code_root)


def test_the_scaffold_ships_no_stray_file() -> None:
    # Given the scaffold as the package ships it / Then it holds no merge leftover or backup, which `converge init`
    # would copy into every new project
    strays = [path for path in SCAFFOLD.rglob("*") if path.suffix in (".orig", ".rej", ".bak", ".swp")]
    assert strays == []


def code_roots(sam: dict) -> set[str]:
    """The function code roots (functions/<name>/) a template's functions deploy."""
    return {
        str(resource["Properties"]["CodeUri"]).strip("/").rpartition("/")[2]
        for resource in sam["Resources"].values()
        if resource.get("Type") == "AWS::Serverless::Function"
    }


def test_a_scaffolded_template_has_the_frameworks_resources_and_the_example_toggle(tmp_path: Path) -> None:
    # Given a project made by `converge init`
    scaffold(tmp_path / "shop-jobs")
    made = _read((tmp_path / "shop-jobs" / "template.yaml").resolve())
    ours = _read((APPLICATION_FUNCTIONS.parent / "template.yaml").resolve())
    # Then it holds every resource of converge's application, plus its layer and the example's toggle
    assert set(made["Resources"]) == set(ours["Resources"]) | {"ConvergeLayer", "GreetingToggle"}
    # And this repository's template holds the reference application's own and converge as one application
    assert set(_read(TEMPLATE.resolve())["Resources"]) == REFERENCE_RESOURCES | {"Converge"}
    # And its functions name the new catalogue, whose package is where the layer has it
    assert catalogue_of(made) == "shop_jobs"
    assert (tmp_path / "shop-jobs" / "shared" / "shop_jobs" / "__init__.py").is_file()
    leftovers = [p for p in (tmp_path / "shop-jobs").rglob("*") if p.is_file() and "{{" in p.read_text() + p.name]
    assert leftovers == []
