"""What each function of a template imports at cold start: its modules and how long the import takes.

Each function's handler module is imported in a fresh interpreter, as Lambda does: its code directory
and the template's layer directories on the path, the function's environment from the template (with
placeholder values for what the stack would resolve), tracing off. The functions of the nested applications
the template includes (converge's) count as its own, with the parameters it passes them.
`python -m converge_bench.imports` prints a table.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from localcloud.project import layer_dirs
from localcloud.template import application_templates

HEAVY = ("PIL", "fpdf", "fontTools")
"""The reference application's image and PDF libraries: only a runner that uses them may load them."""

_PROBE = """
import importlib.util, json, sys, time
started = time.perf_counter()
spec = importlib.util.spec_from_file_location("app", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
seconds = time.perf_counter() - started
print(json.dumps({"seconds": seconds, "modules": sorted(sys.modules)}))
"""


@dataclass(frozen=True)
class ColdImport:
    function: str
    seconds: float
    modules: frozenset[str]

    def loaded(self, package: str) -> bool:
        return any(name == package or name.startswith(package + ".") for name in self.modules)


def _parameter(sam: dict[str, Any], given: dict[str, Any], value: Any) -> Any:
    """A `Ref` to a parameter, as the parent passes it or as its default, when that is plain text."""
    if isinstance(value, dict) and set(value) == {"Ref"}:
        name = value["Ref"]
        passed = given.get(name, ((sam.get("Parameters") or {}).get(name) or {}).get("Default"))
        if isinstance(passed, str):
            return passed
    return value


def _environment(sam: dict[str, Any], properties: dict[str, Any], given: dict[str, Any]) -> dict[str, str]:
    merged: dict[str, Any] = {}
    for variables in (
        ((sam.get("Globals") or {}).get("Function") or {}).get("Environment", {}).get("Variables") or {},
        (properties.get("Environment") or {}).get("Variables") or {},
    ):
        merged.update({name: _parameter(sam, given, value) for name, value in variables.items()})
    # What the stack would resolve (a table name, a queue URL) is a placeholder: importing calls no AWS API.
    env = {name: value if isinstance(value, str) else f"placeholder-{name.lower()}" for name, value in merged.items()}
    env.setdefault("QUEUE_NAME", "default")
    if env.get("QUEUE_NAME") not in ("critical", "default", "bulk"):
        env["QUEUE_NAME"] = "default"
    for name in ("MAX_RECEIVE_COUNT", "IDEMPOTENCY_RETENTION_SECONDS"):
        if name in env and not env[name].isdigit():
            env[name] = "5" if name == "MAX_RECEIVE_COUNT" else "86400"
    return env


def cold_imports(template: Path) -> list[ColdImport]:
    """Import every function of `template` (and of its applications) in its own fresh interpreter; one result each."""
    parts = application_templates(template.resolve())
    layers = [str(directory) for part in parts for directory in layer_dirs(part.sam, part.path.parent)]
    results = []
    for part in parts:
        results += _cold_imports(part.path, part.sam, part.given, layers)
    return sorted(results, key=lambda result: result.function)


def _cold_imports(template: Path, sam: dict[str, Any], given: dict[str, Any], layers: list[str]) -> list[ColdImport]:
    results = []
    for logical_id, resource in sorted((sam.get("Resources") or {}).items()):
        if resource.get("Type") != "AWS::Serverless::Function":
            continue
        properties = resource.get("Properties") or {}
        code_dir = (template.parent / properties["CodeUri"]).resolve()
        handler = str(properties.get("Handler") or sam["Globals"]["Function"]["Handler"])
        handler_file = code_dir / (handler.rpartition(".")[0].replace(".", "/") + ".py")
        env = {
            **{k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "SYSTEMROOT")},
            "AWS_REGION": "us-east-1",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_ACCESS_KEY_ID": "none",
            "AWS_SECRET_ACCESS_KEY": "none",
            "POWERTOOLS_TRACE_DISABLED": "true",
            # As Lambda sets it (outside Lambda the X-Ray SDK builds a sampling client when imported).
            "LAMBDA_TASK_ROOT": str(code_dir),
            "PYTHONPATH": os.pathsep.join([str(code_dir), *layers]),
            **_environment(sam, properties, given),
        }
        done = subprocess.run(
            [sys.executable, "-c", _PROBE, str(handler_file)],
            env=env,
            capture_output=True,
            text=True,
            check=False,
            cwd=code_dir,
        )
        if done.returncode != 0:
            raise RuntimeError(f"{logical_id} does not import: {done.stderr.strip()[-2000:]}")
        measured = json.loads(done.stdout.strip().splitlines()[-1])
        results.append(ColdImport(logical_id, measured["seconds"], frozenset(measured["modules"])))
    return results


def main() -> None:
    template = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("template.yaml")
    for result in cold_imports(template):
        heavy = [package for package in HEAVY if result.loaded(package)]
        print(f"{result.function:<24} {result.seconds * 1000:7.0f} ms  {len(result.modules):5d} modules  {heavy or ''}")


if __name__ == "__main__":
    main()
