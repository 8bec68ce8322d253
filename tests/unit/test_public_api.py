"""The public API: what a team imports is `converge`'s, listed in `converge.__all__` and loaded on first use."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import converge
from tests.conftest import ROOT

SUBMODULE_IMPORT = re.compile(r"^\s*(?:from|import)\s+converge\.(?!testing\b)[a-z_.]+", re.MULTILINE)
"""An import of one of converge's own modules (`from converge.flow.registry import ...`), not its public API
(`converge.__all__`, and `converge_testing` for a team's tests)."""


def test_every_public_name_resolves_from_converge_itself() -> None:
    # Given the public API's list / When each name is looked up on the package / Then it is there, once
    assert len(set(converge.__all__)) == len(converge.__all__) == len(set(dir(converge)))
    for name in converge.__all__:
        assert getattr(converge, name) is not None, name
    # ...and what a team names most is among it
    assert {"enqueue", "enqueue_put", "cancel", "JobMessage", "Identifier", "JobBinding", "JobContext"} <= set(
        converge.__all__
    )
    assert {"Confirmation", "ConvergeError", "TransientError", "PermanentError", "IdentityConflict"} <= set(
        converge.__all__
    )


def test_importing_converge_loads_nothing_else() -> None:
    # Given a fresh interpreter / When `import converge` runs
    probe = (
        "import sys, converge\nprint(sorted(m for m in sys.modules if m.startswith(('converge.', 'boto', 'pydantic'))))"
    )
    package_root = Path(converge.__file__).parent.parent  # the converge under test (the mutation run's own copy)
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=package_root)
    # Then neither boto3 nor pydantic is loaded until a name is used, and of converge's modules only the
    # submission's (the standard library alone), which gives `enqueue` and `enqueue_put` their parameters
    assert done.stdout.strip() == "['converge.model', 'converge.model.submission']"


def test_the_docs_the_readme_and_the_scaffold_import_only_the_public_api() -> None:
    # Given every Python example of the README and the docs, and the scaffold's Python files
    texts = {path: path.read_text() for path in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]}
    scaffold = ROOT / "infra" / "converge_cli" / "scaffold"
    texts |= {path: path.read_text() for path in sorted(scaffold.rglob("*.py"))}
    # Then none imports one of converge's own modules
    found = [
        f"{path.relative_to(ROOT)}: {match.group(0).strip()}"
        for path, text in texts.items()
        for match in SUBMODULE_IMPORT.finditer(text)
    ]
    assert found == []
