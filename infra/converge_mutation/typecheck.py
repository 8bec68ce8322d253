"""mypy over the mutated sources, for mutmut's type-check filter: a mutant mypy rejects needs no test run.

mypy is one of the project's gates, so a mutant it rejects could never be committed. Only errors
that a mutation can have caused are passed on (as mypy's JSON lines): those inside a mutant's own
copy of its function. Two kinds are dropped: errors anywhere else (they would be the original
code's, or mutmut's generated glue, and mutmut stops on an error it cannot place), and the
redefinitions mypy reports because an annotated attribute assignment (`self._seen: set[str] = set()`)
appears again in every copy of `__init__`.
Run by mutmut in the workspace's mutants/ directory, as `python -m converge_mutation.typecheck mypy`
(mutmut reads the output as mypy's because the command names it).
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from functools import cache
from pathlib import Path

_MUTANT = re.compile(r"__mutmut_\d+$")


@cache
def _mutant_spans(path: str) -> tuple[tuple[int, int], ...]:
    tree = ast.parse(Path(path).read_text())
    return tuple(
        (node.lineno, node.end_lineno or node.lineno)
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and _MUTANT.search(node.name)
    )


def caused_by_a_mutation(error: dict) -> bool:
    if error.get("code") == "no-redef" and "already defined" in error.get("message", ""):
        return False
    line = error.get("line", 0)
    return any(first <= line <= last for first, last in _mutant_spans(error["file"]))


def main() -> int:
    completed = subprocess.run(
        [sys.executable, "-m", "mypy", "src", "--output", "json", "--no-warn-unused-ignores", "--no-error-summary"],
        capture_output=True,
        encoding="utf-8",
    )
    if completed.returncode not in (0, 1):  # 2: mypy itself failed
        sys.stderr.write(completed.stderr)
        return completed.returncode
    for line in completed.stdout.splitlines():
        if line.strip():
            error = json.loads(line)
            if error.get("severity") == "error" and caused_by_a_mutation(error):
                print(json.dumps(error))
    return 0


if __name__ == "__main__":
    if not Path("src").is_dir():
        sys.exit("run from the mutation workspace's mutants/ directory")
    sys.exit(main())
