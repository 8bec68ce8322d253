"""The mutants of one run, read from mutmut's workspace: status and a stable description of each.

mutmut numbers the mutants of a function (`x_classify__mutmut_6`); the number changes whenever
the function does, so it cannot key a reviewed list. A mutant is described instead by its module,
its function and the change itself ("before → after", the changed lines only), which stay the
same when code moves around the function, and by the calls the change sits in.
"""

from __future__ import annotations

import ast
import difflib
import json
from dataclasses import dataclass
from pathlib import Path

from converge_mutation.ordering import read_times

# mutmut 3's exit codes (mutmut/stats.py), pinned together with its version in pyproject.toml.
_STATUS = {
    0: "survived",
    1: "killed",
    # "interrupted": the run was stopped while this mutant's tests ran, so it has no result; a resumed run
    # tests it again (workspace.INTERRUPTED)
    2: "not checked",
    3: "killed",
    5: "no tests",
    33: "no tests",
    34: "skipped",
    35: "suspicious",
    36: "timeout",
    37: "caught by type check",
    -24: "timeout",
    24: "timeout",
    152: "timeout",
    255: "timeout",
    -11: "segfault",
    -9: "segfault",
}
KILLED = frozenset({"killed", "timeout", "segfault"})
"""Statuses in which a test noticed the mutant (failed, hung or crashed)."""
REJECTED_BY_TYPES = "caught by type check"
"""mypy rejected the mutant before any test ran: it could never pass the project's own gate."""

_SEPARATOR = "ǁ"  # mutmut's mangling of methods: xǁClassǁmethod


@dataclass(frozen=True)
class Mutant:
    name: str  # mutmut's name, for `mutmut show NAME` (volatile)
    module: str
    function: str  # `classify`, or `Pipeline._failure` for a method
    status: str
    change: str  # "before → after"
    calls: tuple[str, ...]  # the callees of every call whose span holds the change (`logger.info`, ...)
    line: int  # where the change starts in the module's own source (approximate once code moves)
    seconds: float = 0.0  # how long its tests ran (wall time of the mutmut worker)

    @property
    def killed(self) -> bool:
        return self.status in KILLED

    @property
    def rejected_by_types(self) -> bool:
        return self.status == REJECTED_BY_TYPES


def status_of(exit_code: int | None) -> str:
    if exit_code is None:
        return "not checked"
    return _STATUS.get(exit_code, "suspicious")


def function_of(mangled: str) -> str:
    """`x_classify` -> `classify`; `xǁPipelineǁ_failure` -> `Pipeline._failure`."""
    if mangled.startswith("x" + _SEPARATOR):
        _, cls, method = mangled.split(_SEPARATOR, 2)
        return f"{cls}.{method}"
    return mangled.removeprefix("x_")


def read_module(
    mutants_root: Path, module: str, original: str | None = None, times: dict[str, float] | None = None
) -> list[Mutant]:
    """Every mutant of `module` in a mutmut workspace (`mutants/`), with its status and change; `times` are
    the sessions' times (read from the workspace's time log when not given)."""
    relative = Path("src", *module.split(".")).with_suffix(".py")
    mutated = mutants_root / relative
    meta = mutated.with_name(mutated.name + ".meta")
    if not meta.exists():
        return []
    data = json.loads(meta.read_text())
    exit_codes: dict[str, int | None] = data["exit_code_by_key"]
    # mutmut's own timing where it has one; its fork server leaves 0, and the session's time log says instead.
    durations: dict[str, float] = {
        **(read_times(mutants_root.parent / "times.jsonl") if times is None else times),
        **{name: seconds for name, seconds in data.get("durations_by_key", {}).items() if seconds},
    }
    variants = _variants(mutated.read_text())
    offsets = _offsets(original, variants) if original is not None else {}
    present = _functions(original) if original is not None else None
    mutants = []
    for name, exit_code in sorted(exit_codes.items(), key=lambda item: _order(item[0])):
        local = name[len(module) + 1 :]
        mangled, _, _number = local.rpartition("__mutmut_")
        if present is not None and mangled not in present:
            continue  # its function is no longer in the module (moved or removed): nothing of it to kill here
        if present is not None and not _same_code(variants.get(f"{mangled}__mutmut_orig"), present[mangled]):
            exit_code = None  # its function changed since the run: its result no longer says anything
        change, calls, line = _describe(variants, mangled, local)
        mutants.append(
            Mutant(
                name=name,
                module=module,
                function=function_of(mangled),
                status=status_of(exit_code),
                change=change,
                calls=calls,
                line=line + offsets.get(mangled, 0),
                seconds=float(durations.get(name) or 0.0),
            )
        )
    return mutants


def _order(name: str) -> tuple[str, int]:
    base, _, number = name.rpartition("__mutmut_")
    return base, int(number) if number.isdigit() else 0


def _variants(source: str) -> dict[str, tuple[ast.FunctionDef | ast.AsyncFunctionDef, list[str]]]:
    """Each generated function (original and mutants) by name, with its body's lines."""
    lines = source.splitlines()
    found: dict[str, tuple[ast.FunctionDef | ast.AsyncFunctionDef, list[str]]] = {}
    tree = ast.parse(source)
    nodes = [*tree.body, *(inner for node in tree.body if isinstance(node, ast.ClassDef) for inner in node.body)]
    for node in nodes:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and "__mutmut_" in node.name:
            # From the `def` line, so that a mutated default value shows, under one name for all variants.
            body = lines[node.lineno - 1 : node.end_lineno]
            body[0] = body[0].replace(f"def {node.name}(", "def (", 1)
            found[node.name] = (node, body)
    return found


def _describe(
    variants: dict[str, tuple[ast.FunctionDef | ast.AsyncFunctionDef, list[str]]], mangled: str, local: str
) -> tuple[str, tuple[str, ...], int]:
    original = variants.get(f"{mangled}__mutmut_orig")
    mutant = variants.get(local)
    if original is None or mutant is None:
        return "(source not found)", (), 0
    node, before_lines = original
    after_lines = mutant[1]
    before: list[str] = []
    after: list[str] = []
    first = last = None
    matcher = difflib.SequenceMatcher(a=before_lines, b=after_lines, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        before += [line.strip() for line in before_lines[i1:i2]]
        after += [line.strip() for line in after_lines[j1:j2]]
        first = i1 if first is None else first
        last = max(i1, i2 - 1)
    if first is None or last is None:
        return "(no textual change)", (), node.lineno
    start, end = node.lineno + first, node.lineno + last
    calls = tuple(
        sorted(
            {
                ast.unparse(call.func)
                for call in ast.walk(node)
                if isinstance(call, ast.Call) and call.lineno <= start and (call.end_lineno or call.lineno) >= end
            }
        )
    )
    return f"{' / '.join(before) or '(nothing)'} → {' / '.join(after) or '(nothing)'}", calls, start


def _offsets(
    original: str, variants: dict[str, tuple[ast.FunctionDef | ast.AsyncFunctionDef, list[str]]]
) -> dict[str, int]:
    """Line shift from each function's `__mutmut_orig` copy to the same function in the real module."""
    functions = _functions(original)
    offsets = {}
    for name, (node, _lines) in variants.items():
        mangled, _, suffix = name.rpartition("__mutmut_")
        if suffix == "orig" and mangled in functions:
            offsets[mangled] = functions[mangled].lineno - node.lineno
    return offsets


def _functions(original: str) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    """The module's functions and methods as mutmut names them (`x_name`, `xǁClassǁname`)."""
    found: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
    for node in ast.parse(original).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found[f"x_{node.name}"] = node
        elif isinstance(node, ast.ClassDef):
            for inner in node.body:
                if isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    found[f"x{_SEPARATOR}{node.name}{_SEPARATOR}{inner.name}"] = inner
    return found


def _same_code(
    variant: tuple[ast.FunctionDef | ast.AsyncFunctionDef, list[str]] | None,
    function: ast.FunctionDef | ast.AsyncFunctionDef,
) -> bool:
    """Whether the function the run mutated (its `__mutmut_orig` copy) is the function as it stands: same arguments
    and statements, wherever they sit (a function that only moved keeps its results)."""
    if variant is None:
        return True  # no copy to compare (an emulator's workspace): its results stand
    copy = variant[0]
    return ast.dump(copy.args) == ast.dump(function.args) and [ast.dump(s) for s in copy.body] == [
        ast.dump(s) for s in function.body
    ]
