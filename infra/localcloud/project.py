"""The project a command works from: its SAM template, its job catalogue and its code directories.

A team's project keeps `template.yaml` at its root; the CLI and the local cloud find it from the
current directory upward (or take `--template` / `CONVERGE_TEMPLATE`). The catalogue is what the
template passes converge's application as `CatalogueModule` (or its functions set as `CONVERGE_CATALOGUE`; or
`--catalogue` / the same environment variable).
On Lambda the catalogue is importable because its layer is on the path; locally the template's layer
directories are put on `sys.path` the same way, so a catalogue needs no installing of its own.

Pure standard library plus PyYAML: the CLI uses it without the local cloud's extras installed.
"""

from __future__ import annotations

import importlib
import os
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

TEMPLATE_NAME = "template.yaml"
TEMPLATE_ENV = "CONVERGE_TEMPLATE"
CATALOGUE_ENV = "CONVERGE_CATALOGUE"


class ProjectError(Exception):
    """No template can be found, or it cannot be read; the message says what to do."""


class NoTemplate(ProjectError):
    """No template.yaml in the current directory or any directory above it (and none named)."""

    def __init__(self, where: str, advice: str) -> None:
        super().__init__(f"{where}: {advice}")
        self.where = where


class NoCatalogue(ProjectError):
    """No job catalogue is named anywhere a command looks; the message says where it looked and what to do."""


@dataclass(frozen=True)
class Project:
    template: Path
    catalogue: str | None
    code_dirs: tuple[Path, ...]
    """The template's layer directories: where a function finds the catalogue on Lambda (/opt/python)."""

    @property
    def root(self) -> Path:
        return self.template.parent

    def activate(self) -> Project:
        """Put the layer directories on `sys.path` (first, once), as Lambda puts a layer on a function's path."""
        for directory in reversed(self.code_dirs):
            if str(directory) not in sys.path:
                sys.path.insert(0, str(directory))
        importlib.invalidate_caches()
        return self


class _TemplateLoader(yaml.SafeLoader):
    """YAML with CloudFormation's short-form intrinsics (`!Ref`, `!Sub`, ...) read as plain values."""


def _intrinsic(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> Any:
    if isinstance(node, yaml.ScalarNode):
        value: Any = loader.construct_scalar(node)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)  # type: ignore[arg-type]
    return {f"!{suffix}": value}


_TemplateLoader.add_multi_constructor("!", _intrinsic)


def find_template(start: Path | None = None) -> Path:
    """`template.yaml` in `start` (default: the current directory) or the nearest directory above it."""
    here = (start or Path.cwd()).resolve()
    for directory in (here, *here.parents):
        candidate = directory / TEMPLATE_NAME
        if candidate.is_file():
            return candidate
    raise NoTemplate(
        f"no {TEMPLATE_NAME} in {here} or any directory above it",
        f"run the command from your project (`converge init DIR` creates one), or pass --template / set {TEMPLATE_ENV}",
    )


@cache
def _read(path: Path) -> dict[str, Any]:
    try:
        loaded = yaml.load(path.read_text(), Loader=_TemplateLoader)
    except (OSError, yaml.YAMLError) as exc:
        raise ProjectError(f"cannot read the template {path}: {exc}") from None
    if not isinstance(loaded, dict):
        raise ProjectError(f"the template {path} is not a mapping")
    return loaded


def catalogue_of(sam: dict[str, Any]) -> str | None:
    """What the template passes converge's application as its CatalogueModule, else what its functions set as
    CONVERGE_CATALOGUE: in Globals, else on the first function."""
    for resource in (sam.get("Resources") or {}).values():
        if resource.get("Type") == "AWS::Serverless::Application":
            module = ((resource.get("Properties") or {}).get("Parameters") or {}).get("CatalogueModule")
            if isinstance(module, str):
                return module
    variables = ((sam.get("Globals") or {}).get("Function") or {}).get("Environment", {}).get("Variables") or {}
    if isinstance(variables.get(CATALOGUE_ENV), str):
        return str(variables[CATALOGUE_ENV])
    for resource in (sam.get("Resources") or {}).values():
        own = ((resource.get("Properties") or {}).get("Environment") or {}).get("Variables") or {}
        if isinstance(own.get(CATALOGUE_ENV), str):
            return str(own[CATALOGUE_ENV])
    return None


def layer_dirs(sam: dict[str, Any], base: Path) -> tuple[Path, ...]:
    found = []
    for resource in (sam.get("Resources") or {}).values():
        uri = (resource.get("Properties") or {}).get("ContentUri")
        if resource.get("Type") == "AWS::Serverless::LayerVersion" and isinstance(uri, str) and "://" not in uri:
            directory = (base / uri).resolve()
            if directory.is_dir() and directory not in found:
                found.append(directory)
    return tuple(found)


def load_project(template: str | Path | None = None, catalogue: str | None = None) -> Project:
    """The project named by the arguments, else by the environment, else found from the current directory."""
    chosen = template or os.environ.get(TEMPLATE_ENV)
    path = Path(chosen).resolve() if chosen else find_template()
    if not path.is_file():
        raise ProjectError(f"the template {path} does not exist")
    sam = _read(path)
    name = catalogue or os.environ.get(CATALOGUE_ENV) or catalogue_of(sam)
    return Project(path, name or None, layer_dirs(sam, path.parent))


_selected: dict[str, str | None] = {"template": None, "catalogue": None}


def select(template: str | Path | None, catalogue: str | None) -> None:
    """Record the command line's --template / --catalogue; resolved only when a command needs the project."""
    _selected["template"] = str(template) if template else None
    _selected["catalogue"] = catalogue or None


def current() -> Project:
    """The project of this command (see `select`), with its code directories on the path."""
    return load_project(_selected["template"], _selected["catalogue"]).activate()


def current_catalogue() -> str:
    """The job catalogue's module of this command: --catalogue or CONVERGE_CATALOGUE, else what the project's
    template sets. Raises NoCatalogue saying where it looked and how to point at the project."""
    named = _selected["catalogue"] or os.environ.get(CATALOGUE_ENV) or None
    try:
        project = current()  # its code directories on the path, where the catalogue is found
    except NoTemplate as missing:
        if named:
            return named  # importable from the environment (installed, or on PYTHONPATH)
        raise NoCatalogue(
            f"no job catalogue found: no --catalogue or {CATALOGUE_ENV}, and {missing.where}. "
            f"cd into your project (the directory of its {TEMPLATE_NAME}), or pass --template PATH or "
            f"--catalogue MODULE (or set {TEMPLATE_ENV} or {CATALOGUE_ENV})"
        ) from None
    if project.catalogue:
        return project.catalogue
    raise NoCatalogue(
        f"no job catalogue found: no --catalogue or {CATALOGUE_ENV}, and the template {project.template} sets no "
        f"{CATALOGUE_ENV} for its functions (Globals.Function.Environment.Variables). Set it there, or pass "
        f"--catalogue MODULE (or set {CATALOGUE_ENV})"
    )
