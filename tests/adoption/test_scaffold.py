"""The scaffold is small and the team's own: its template holds the project's resources and includes converge as
one application from the installed package (through a link, never a copy), its requirements pin the converge
version that made it, and no file it writes holds what the package ships."""

from __future__ import annotations

import json
from importlib import metadata
from pathlib import Path

import pytest

import converge
from converge.runtime.handlers import FUNCTIONS, app_source
from converge_cli.commands.init import SCAFFOLD, scaffold
from converge_cli.commands.init_origin import BadOrigin, installed, named
from converge_cli.commands.link import LINK, application_dir, link
from localcloud.project import _read, catalogue_of
from localcloud.template import application_templates
from tests.conftest import ROOT, TEMPLATE

REFERENCE_RESOURCES = {
    "AppTable", "LedgerTable", "DocumentsBucket", "DocumentsBucketPolicy", "SigningSecret", "SenderIdentity",
    "CriticalRunnerPolicy", "DefaultRunnerPolicy", "BulkRunnerPolicy", "RecurringRunnerPolicy",
    "PartnerBenefitsToggle", "ApprovedCreditToggle", "BoostExpirySweepToggle", "CatalogueLayer", "MediaLibrariesLayer",
    "DocumentsAccessLogsBucket", "DocumentsAccessLogsBucketPolicy", "BoostExpirySweepSchedule",
    "BoostExpirySweepPermission", "SignUpFunction", "SignUpRole", "SignUpLogGroup", "PartnerCreditFunction",
    "PartnerCreditRole", "PartnerCreditLogGroup",
}  # fmt: skip
"""What this repository's template holds for the reference application only."""
APPLICATION = ROOT / "shared" / "converge" / "application"
"""converge's application in this checkout: its template and its functions' code roots, shipped in the package."""
PROJECT_RESOURCES = {
    "CatalogueLayer", "GreetingsBucket", "GreetingsBucketPolicy", "GreetingToggle", "DefaultRunnerPolicy", "Converge",
    "UsersTable", "SignUpFunction", "SignUpRole", "SignUpLogGroup",
}  # fmt: skip
"""What a new project's template declares: its own things (an example producer among them), and converge as one
application."""


@pytest.fixture
def made(tmp_path: Path) -> tuple[Path, list[Path]]:
    project = tmp_path / "shop-jobs"
    return project, scaffold(project)


def test_the_template_is_small_and_includes_converge_as_one_application(made: tuple[Path, list[Path]]) -> None:
    project, _ = made
    # Given a project made by `converge init` / Then its template is the project's own, of at most about 200 lines
    # (the example job's bucket, toggle and runner policy; the example producer's function, role and users' table)
    template = project / "template.yaml"
    assert len(template.read_text().splitlines()) <= 200
    sam = _read(template.resolve())
    assert set(sam["Resources"]) == PROJECT_RESOURCES
    # And converge comes in as one application, from the link init made into the installed package
    application = sam["Resources"]["Converge"]
    assert application["Type"] == "AWS::Serverless::Application"
    assert application["Properties"]["Location"] == f"{LINK.as_posix()}/template.yaml"
    assert (project / LINK).is_symlink() and (project / LINK).resolve() == application_dir()
    assert application_dir() == Path(converge.__file__).resolve().parent / "application" == APPLICATION.resolve()
    # And what the project passes it names the new catalogue, its layer and its runners' policy
    assert catalogue_of(sam) == "shop_jobs"
    assert (project / "shared" / "shop_jobs" / "__init__.py").is_file()
    parameters = application["Properties"]["Parameters"]
    assert parameters["CatalogueLayerArn"] == {"!Ref": "CatalogueLayer"}
    assert parameters["DefaultRunnerPolicyArns"] == {"!Ref": "DefaultRunnerPolicy"}
    # And the application it reads through the link is converge's: every parameter it passes is one it declares
    [_, (path, included, given)] = application_templates(template)
    assert path == (APPLICATION / "template.yaml").resolve() and set(given) <= set(included["Parameters"])
    leftovers = [p for p in project.rglob("*") if p.is_file() and "{{" in p.read_text() + p.name]
    assert leftovers == []


def pins(project: Path) -> list[str]:
    """The requirement lines of the project's requirements (its layer's, and its environment's through pyproject)."""
    lines = (project / "shared" / "requirements.txt").read_text().splitlines()
    return [line for line in lines if line.strip() and not line.startswith("#")]


def test_it_pins_the_converge_that_made_it(made: tuple[Path, list[Path]], tmp_path: Path) -> None:
    project, _ = made
    # Given a project made in this environment, whose converge is this checkout, installed editable
    records = [d.read_text("direct_url.json") for d in metadata.distributions(name="converge-jobs")]
    direct = json.loads(next(record for record in records if record))
    # Then converge is pinned, in one line, to where it came from: the checkout (pip installs and builds from it)
    assert pins(project) == [f"converge-jobs @ {direct['url']}"] == [installed().requirement]
    pyproject = (project / "pyproject.toml").read_text()
    assert 'dependencies = { file = ["shared/requirements.txt"] }' in pyproject
    assert "converge-jobs==" not in pyproject and "converge-jobs @" not in pyproject
    # And a project made with --converge pins what it names: a version from the index, or a wheel on disk
    scaffold(tmp_path / "from-index", origin=named("1.2.3"))
    assert pins(tmp_path / "from-index") == ["converge-jobs==1.2.3"]
    wheel = tmp_path / "converge_jobs-1.2.3-py3-none-any.whl"
    wheel.write_bytes(b"")
    assert named(str(wheel)).requirement == f"converge-jobs @ {wheel.resolve().as_uri()}"
    with pytest.raises(BadOrigin, match="neither a version"):
        named("latest")


def test_no_file_the_scaffold_writes_holds_what_the_package_ships(made: tuple[Path, list[Path]]) -> None:
    project, written = made
    # Given every file `converge init` wrote, and every file the package ships (converge's modules, its
    # application's template and handlers)
    shipped = {path: path.read_text() for path in Path(converge.__file__).resolve().parent.rglob("*") if path.is_file()
               and "__pycache__" not in path.parts}  # fmt: skip
    assert APPLICATION.resolve() / "template.yaml" in shipped
    # Then none is a copy of a shipped file, no handler is among them, and the template declares none of the
    # application's resources (converge comes in through the link, which is no file of the project)
    assert written and all(path.is_file() and not path.is_symlink() for path in written)
    for path in written:
        text = path.read_text()
        assert text not in shipped.values(), path
        assert not any(app_source(code_root) in text for code_root in FUNCTIONS), path
    included = set(_read((APPLICATION / "template.yaml").resolve())["Resources"])
    assert not set(_read((project / "template.yaml").resolve())["Resources"]) & included
    assert sorted(p.relative_to(project).as_posix() for p in written) == [
        ".ci/run", ".gitignore", "README.md", "functions/sign_up/app.py", "pyproject.toml", "shared/Makefile",
        "shared/requirements.txt", "shared/shop_jobs/__init__.py", "shared/shop_jobs/greeting.py",
        "shared/shop_jobs/local.py", "shared/shop_jobs/users.py", "template.yaml", "tests/test_explore.py",
        "tests/test_greeting.py", "tests/test_sign_up.py",
    ]  # fmt: skip
    # And its own functions are at the top, each directory its app.py alone, each deployed by its template
    assert own_functions(project) == {"sign_up"} == code_roots(_read((project / "template.yaml").resolve()))


def test_link_makes_the_link_again(made: tuple[Path, list[Path]]) -> None:
    project, _ = made
    # Given the link gone (a fresh clone) / When `converge link` runs / Then it points at the package again
    (project / LINK).unlink()
    assert link(project).resolve() == application_dir()
    # And a stale link is replaced, while a directory of the same name is left alone with a clear error
    assert link(project).resolve() == application_dir()
    (project / LINK).unlink()
    (project / LINK).mkdir()
    with pytest.raises(Exception, match="is not a link"):
        link(project)


def test_the_handlers_ship_in_the_package_beside_the_applications_template() -> None:
    # Given converge's application / Then each function code root its template names is shipped with the app.py
    # the package defines for it, and this repository's template includes that application as a team's does
    roots = code_roots(_read((APPLICATION / "template.yaml").resolve()))
    assert roots == set(FUNCTIONS)
    for code_root in FUNCTIONS:
        assert (APPLICATION / "functions" / code_root / "app.py").read_text() == app_source(code_root)
    ours = _read(TEMPLATE.resolve())
    assert set(ours["Resources"]) == REFERENCE_RESOURCES | {"Converge"}
    assert ours["Resources"]["Converge"]["Properties"]["Location"] == "shared/converge/application/template.yaml"
    # And this repository's own functions (its producers) are at the top, as a team's are, each its app.py alone
    assert own_functions(ROOT) == {"sign_up", "partner_credit"} == code_roots(ours)


def test_the_scaffold_ships_no_stray_file() -> None:
    # Given the scaffold as the package ships it / Then it holds no merge leftover or backup, which `converge init`
    # would copy into every new project
    strays = [path for path in SCAFFOLD.rglob("*") if path.suffix in (".orig", ".rej", ".bak", ".swp")]
    assert strays == []


def own_functions(project: Path) -> set[str]:
    """The project's function directories (functions/<name>/), each holding its app.py and nothing another
    function's directory could shadow (the local cloud imports every function into one process)."""
    found = {}
    for directory in sorted((project / "functions").iterdir()):
        found[directory.name] = sorted(p.name for p in directory.iterdir() if p.name != "__pycache__")
    assert all(files == ["app.py"] for files in found.values()), found
    return set(found)


def code_roots(sam: dict) -> set[str]:
    """The function code roots (functions/<name>/) a template's functions deploy."""
    return {
        str(resource["Properties"]["CodeUri"]).strip("/").rpartition("/")[2]
        for resource in sam["Resources"].values()
        if resource.get("Type") == "AWS::Serverless::Function"
    }
