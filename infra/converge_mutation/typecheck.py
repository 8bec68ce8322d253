"""mypy over the mutated sources, for mutmut's type-check filter: a mutant mypy rejects needs no test run.

mypy is one of the project's gates, so a mutant it rejects could never be committed. mutmut copies
each function once per mutant; an annotated attribute assignment (`self._seen: set[str] = set()`)
then appears in every copy of `__init__`, and mypy reports the repeats as redefinitions. Those say
nothing about the mutation and are dropped; every other error is passed on as mypy's JSON lines.
Run by mutmut in the workspace's mutants/ directory, as `python -m converge_mutation.typecheck mypy`
(mutmut reads the output as mypy's because the command names it).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


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
        if not line.strip():
            continue
        error = json.loads(line)
        if error.get("code") == "no-redef" and "already defined" in error.get("message", ""):
            continue
        print(json.dumps(error))
    return 0


if __name__ == "__main__":
    if not Path("src").is_dir():
        sys.exit("run from the mutation workspace's mutants/ directory")
    sys.exit(main())
