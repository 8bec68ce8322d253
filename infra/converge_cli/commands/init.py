"""`converge init DIR`: a new project in converge's layout, with one example job, its tests and its CI.

The scaffold (converge_cli/scaffold, shipped in the package) holds only the team's own things: a template of
its resources (the catalogue's layer and its build, the example job's bucket, toggle and permissions, an example
producer function) that includes converge as one application, a catalogue package with one job and its local
hooks, tests on the local cloud, a README with the commands, a `.ci/run`, and `shared/requirements.txt` pinning the
converge that made it (converge_cli.commands.init_origin: its version, or the wheel or checkout it was installed from).
Placeholders `{{name}}`, `{{catalogue}}`, `{{toggle_key}}`, `{{toggle_resource}}` and `{{requirement}}` are filled
in. Nothing of converge is copied: the template's application is the installed package's, through the link
`.converge/application` (converge_cli.commands.link), which init makes.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated

import typer

from converge_cli.commands.init_origin import BadOrigin, Origin, installed, named
from converge_cli.commands.link import link
from converge_cli.support.errors import UsageError, fails_cleanly
from converge_cli.support.output import say, stdout, styled

SCAFFOLD = Path(__file__).resolve().parents[1] / "scaffold"
RENAMED = {"ci": ".ci", "gitignore.txt": ".gitignore", "__package__": "{{catalogue}}"}
"""Scaffold names that a package could not ship as they are (dot files) or that take the catalogue's name."""
_SKIPPED = {"__pycache__", ".pytest_cache"}
_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")


def values_for(directory: Path, catalogue: str | None, origin: Origin | None = None) -> dict[str, str]:
    name = directory.resolve().name.lower()
    if not _NAME.match(name):
        raise UsageError(f"{directory.name!r} cannot name a project: use lower-case letters, digits, '-' and '_'")
    package = catalogue or name.replace("-", "_")
    if not package.isidentifier():
        raise UsageError(f"{package!r} is not a Python package name: pass --catalogue")
    return {
        "name": name,
        "catalogue": package,
        "toggle_key": "hello.greeting",
        "toggle_resource": "GreetingToggle",
        "requirement": (origin or installed()).requirement,
    }


def render(text: str, values: dict[str, str]) -> str:
    for key, value in values.items():
        text = text.replace("{{" + key + "}}", value)
    return text


def scaffold(directory: Path, catalogue: str | None = None, origin: Origin | None = None) -> list[Path]:
    """Write the new project into `directory` (new or empty) and link it to converge's application; returns the
    files written (the link, `.converge/application`, is not one). `origin`: the converge it pins (default: this
    environment's)."""
    if directory.exists() and any(directory.iterdir()):
        raise UsageError(f"{directory} is not empty: `converge init` only creates a new project")
    values = values_for(directory, catalogue, origin)
    written = []
    for source in sorted(SCAFFOLD.rglob("*")):
        relative = source.relative_to(SCAFFOLD)
        if source.is_dir() or _SKIPPED.intersection(relative.parts) or source.suffix == ".pyc":
            continue
        parts = [render(RENAMED.get(part, part), values) for part in relative.parts]
        target = directory.joinpath(*parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(render(source.read_text(), values))
        target.chmod(source.stat().st_mode & 0o777)
        written.append(target)
    link(directory)
    return written


@fails_cleanly
def init(
    directory: Annotated[Path, typer.Argument(help="Where to create the project (new or empty).")],
    catalogue: Annotated[
        str | None, typer.Option("--package", help="The catalogue's package name (default: from DIR).")
    ] = None,
    converge_from: Annotated[
        str | None,
        typer.Option(
            "--converge",
            help="The converge the project pins: a version, a requirement, or a wheel or checkout on disk "
            "(default: where this environment's converge came from).",
        ),
    ] = None,
) -> None:
    """Create a new project: template.yaml, a catalogue with one example job, its tests, README, .ci/run."""
    try:
        origin = named(converge_from) if converge_from else installed()
    except BadOrigin as exc:
        raise UsageError(str(exc)) from None
    written = scaffold(directory, catalogue, origin)
    say(stdout(), styled("created", "bold green"), f" {directory} ({len(written)} files); next:")
    say(stdout(), f"  cd {directory}")
    say(stdout(), "  converge jobs list && converge demo && python -m pytest -q")
    say(stdout(), f"  (shared/requirements.txt pins {origin.requirement}, from {origin.source})")
    say(stdout(), f"  (converge's application is linked at {directory / '.converge' / 'application'}: `converge link`")
    say(stdout(), "   makes the link again in a fresh clone or a new virtual environment)")
