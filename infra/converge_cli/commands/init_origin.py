"""Where this environment's converge came from, as a new project pins it (`converge init`).

A project's `shared/requirements.txt` names converge for its layer (`sam build`) and its own environment
(`pip install -e '.[dev]'`). Installed from the package index, that is the version (`converge-jobs==X.Y.Z`);
installed from a wheel file or a checkout, it is that file or directory (`converge-jobs @ file:///...`, PEP 610's
record of a direct install), so the project installs and builds as its maker's environment did, before converge is
on any index. `--converge` names another: a version, a requirement, or a wheel or directory on disk.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

DISTRIBUTION = "converge-jobs"


class BadOrigin(ValueError):
    """`--converge` names nothing converge can be installed from."""


@dataclass(frozen=True)
class Origin:
    requirement: str
    """The requirement line (`converge-jobs==X.Y.Z`, `converge-jobs @ file:///...whl`)."""
    source: str
    """Where it came from, in words, for `converge init` to say."""


def installed() -> Origin:
    """The converge of this environment: a direct install's file or directory, else its version (from an index)."""
    # An editable install leaves its build's egg-info in the checkout too, which comes first on a path that holds
    # the checkout: the install's own record (its dist-info, with direct_url.json) is the one that says where from.
    found = list(metadata.distributions(name=DISTRIBUTION)) or [metadata.distribution(DISTRIBUTION)]
    distribution = next((d for d in found if d.read_text("direct_url.json")), found[0])
    version = distribution.version
    recorded = distribution.read_text("direct_url.json")
    if recorded:
        direct = json.loads(recorded)
        url = str(direct.get("url", ""))
        vcs = direct.get("vcs_info")
        if vcs:
            return Origin(f"{DISTRIBUTION} @ {vcs['vcs']}+{url}@{vcs.get('commit_id', '')}".rstrip("@"), "a repository")
        if url.startswith("file://"):
            kind = "a checkout" if "dir_info" in direct else "a wheel file"
            return Origin(f"{DISTRIBUTION} @ {url}", f"{kind} ({url.removeprefix('file://')})")
        if url:
            return Origin(f"{DISTRIBUTION} @ {url}", url)
    return Origin(f"{DISTRIBUTION}=={version}", "the package index")


def named(spec: str) -> Origin:
    """`--converge SPEC`: a version (`X.Y.Z`), a requirement (`converge-jobs==X.Y.Z`, `converge-jobs @ URL`), or a
    wheel or directory on disk."""
    text = spec.strip()
    path = Path(text).expanduser()
    if path.exists():
        if not (path.is_dir() or path.name.endswith(".whl")):
            raise BadOrigin(f"--converge {spec!r}: a path must be a wheel (.whl) or a checkout's directory")
        return Origin(f"{DISTRIBUTION} @ {path.resolve().as_uri()}", str(path.resolve()))
    if text.startswith(DISTRIBUTION):
        return Origin(text, "--converge")
    if text and text[0].isdigit():
        return Origin(f"{DISTRIBUTION}=={text}", "--converge")
    raise BadOrigin(
        f"--converge {spec!r} is neither a version, a {DISTRIBUTION} requirement, nor a wheel or directory on disk"
    )
