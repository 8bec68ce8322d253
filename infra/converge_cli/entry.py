"""The `converge` command's entry point: the command, or what to install when its extra is missing.

The script is installed with the package whatever its extras; without `cli` (typer, rich, PyYAML) the command says
so instead of failing on an import."""

from __future__ import annotations

import sys

CLI_MODULES = frozenset({"typer", "rich", "click", "yaml"})


def main() -> None:
    try:
        from converge_cli.main import app
    except ModuleNotFoundError as missing:
        if (missing.name or "").split(".")[0] not in CLI_MODULES:
            raise
        needs = f"converge: the command needs the `cli` extra ({missing.name} is missing)"
        sys.exit(f"{needs}: pip install 'converge-jobs[cli]'")
    app()
