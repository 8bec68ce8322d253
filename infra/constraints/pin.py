"""Write the pins of the dev tools' and the scanner's environments (infra/constraints/*.txt).

The README's test command installs `.[dev]` and `.[scan]` under these constraints, so every run resolves to
the same releases and does no backtracking (uv installs them; pip would take the same ones). This script asks
pip, in a throwaway environment, what it would install today without them, and writes that down:
`make constraints`, then run the test command and commit the two files together with what they change.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
ENVIRONMENTS = {
    "dev": ["-e", ".[dev]", "-r", "shared/catalogue/requirements.txt"],
    "scan": ["-e", ".[scan]"],
}
OWN = {"converge-jobs"}


def resolve(arguments: list[str]) -> list[tuple[str, str]]:
    """(name, version) of every distribution pip would install for `arguments`, converge itself left out."""
    with tempfile.TemporaryDirectory() as scratch:
        venv.create(scratch, with_pip=True)
        report = Path(scratch) / "report.json"
        subprocess.run(
            [f"{scratch}/bin/pip", "install", "-q", "--dry-run", "--ignore-installed", "--report", report, *arguments],
            cwd=ROOT,
            check=True,
        )
        installs = json.loads(report.read_text())["install"]
    pins = {(item["metadata"]["name"].lower().replace("_", "-"), item["metadata"]["version"]) for item in installs}
    return sorted(pin for pin in pins if pin[0] not in OWN)


def main() -> int:
    python = ".".join(map(str, sys.version_info[:2]))
    for name, arguments in ENVIRONMENTS.items():
        pins = resolve(arguments)
        header = (
            f"# The releases `pip install {' '.join(arguments)}` took on Python {python}, written by\n"
            "# infra/constraints/pin.py (`make constraints`); the README's test command installs under them.\n"
        )
        (HERE / f"{name}.txt").write_text(header + "".join(f"{pin}=={version}\n" for pin, version in pins))
        print(f"infra/constraints/{name}.txt: {len(pins)} pins")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
