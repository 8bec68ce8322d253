"""What is mutated and why a surviving mutant may stand: tests/mutation.toml, read and resolved.

The modules are named by pattern (`converge.transition*`), resolved against the files under
shared/ on every run, so a module that appears is picked up and one that is renamed is noticed:
a listed name with no file is reported as missing, and a module of the package in neither list
is reported as unclassified.
"""

from __future__ import annotations

import fnmatch
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
SCOPE_FILE = REPO_ROOT / "tests" / "mutation.toml"
SOURCE_ROOT = REPO_ROOT / "shared"


class ScopeError(ValueError):
    """tests/mutation.toml is malformed."""


@dataclass(frozen=True)
class Equivalent:
    """A reviewed claim that some surviving mutants change no behaviour.

    `change` names one mutation exactly ("before → after", whitespace-normalized); `within` names a
    class of them by the call they sit in (e.g. `logger.*`: the text of a log line is not a rule).
    """

    module: str
    reason: str
    function: str = "*"
    change: str | None = None
    within: str | None = None

    def matches(self, module: str, function: str, change: str, calls: tuple[str, ...]) -> bool:
        if not fnmatch.fnmatchcase(module, self.module) or not fnmatch.fnmatchcase(function, self.function):
            return False
        if self.change is not None:
            return normalize(self.change) == normalize(change)
        assert self.within is not None
        return any(fnmatch.fnmatchcase(call, self.within) for call in calls)

    @property
    def label(self) -> str:
        what = f"change {self.change!r}" if self.change is not None else f"within {self.within}"
        return f"{self.module} {self.function}: {what}"


@dataclass(frozen=True)
class Scope:
    patterns: tuple[str, ...]
    skip: tuple[str, ...]
    tests: tuple[str, ...]
    target: float
    equivalents: tuple[Equivalent, ...]
    not_mutated: tuple[str, ...] = ()  # callees whose call statements are left alone (log lines)
    exclude_tests: tuple[str, ...] = ()  # test files under `tests` that do not drive the run
    modules: tuple[str, ...] = ()  # the patterns resolved against the files under shared/
    missing: tuple[str, ...] = ()  # exact names with no file (renamed or removed?)
    unclassified: tuple[str, ...] = ()  # modules of the package in neither list (new?)
    package_modules: tuple[str, ...] = field(default=(), repr=False)

    @property
    def test_selection(self) -> list[str]:
        """pytest arguments that select the driving tests."""
        return [*self.tests, *(f"--ignore={path}" for path in self.exclude_tests)]

    def path_of(self, module: str) -> Path:
        return SOURCE_ROOT.joinpath(*module.split(".")).with_suffix(".py")


def normalize(text: str) -> str:
    return " ".join(text.split())


def load(path: Path = SCOPE_FILE, source_root: Path = SOURCE_ROOT) -> Scope:
    """Read the scope file and resolve its patterns against the modules that exist today."""
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise ScopeError(f"{path}: {exc}") from None
    scope = data.get("scope", {})
    patterns = tuple(_strings(scope, "mutate", path))
    skip = tuple(_strings(scope, "skip", path))
    tests = tuple(_strings(scope, "tests", path))
    if not patterns or not tests:
        raise ScopeError(f"{path}: [scope] needs non-empty 'mutate' and 'tests' lists")
    target = float(scope.get("target", 0.9))
    not_mutated = tuple(_strings(scope, "not_mutated", path))
    exclude_tests = tuple(_strings(scope, "exclude_tests", path))
    equivalents = tuple(_equivalent(entry, path) for entry in data.get("equivalent", []))
    return resolve(
        Scope(
            patterns=patterns,
            skip=skip,
            tests=tests,
            target=target,
            equivalents=equivalents,
            not_mutated=not_mutated,
            exclude_tests=exclude_tests,
        ),
        source_root,
    )


def resolve(scope: Scope, source_root: Path = SOURCE_ROOT) -> Scope:
    packages = {pattern.split(".", 1)[0] for pattern in scope.patterns}
    present = sorted(
        ".".join(file.relative_to(source_root).with_suffix("").parts)
        for package in packages
        for file in (source_root / package).rglob("*.py")
        if "__pycache__" not in file.parts
    )
    present = [module.removesuffix(".__init__") for module in present]
    chosen = [m for m in present if any(fnmatch.fnmatchcase(m, p) for p in scope.patterns)]
    missing = [p for p in scope.patterns if not _is_pattern(p) and p not in present]
    skipped = {m for m in present if any(fnmatch.fnmatchcase(m, p) for p in scope.skip)}
    unclassified = [m for m in present if m not in chosen and m not in skipped and m not in packages]
    return Scope(
        patterns=scope.patterns,
        skip=scope.skip,
        tests=scope.tests,
        target=scope.target,
        equivalents=scope.equivalents,
        not_mutated=scope.not_mutated,
        exclude_tests=scope.exclude_tests,
        modules=tuple(chosen),
        missing=tuple(missing),
        unclassified=tuple(unclassified),
        package_modules=tuple(present),
    )


def _is_pattern(name: str) -> bool:
    return any(ch in name for ch in "*?[")


def _strings(table: dict[str, Any], key: str, path: Path) -> list[str]:
    value = table.get(key, [])
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ScopeError(f"{path}: [scope] {key} must be a list of strings")
    return value


def _equivalent(entry: Any, path: Path) -> Equivalent:
    if not isinstance(entry, dict):
        raise ScopeError(f"{path}: every [[equivalent]] must be a table")
    unknown = set(entry) - {"module", "function", "change", "within", "reason"}
    if unknown:
        raise ScopeError(f"{path}: [[equivalent]] has unknown keys {sorted(unknown)}")
    module, reason = entry.get("module"), entry.get("reason")
    if not isinstance(module, str) or not isinstance(reason, str) or not reason.strip():
        raise ScopeError(f"{path}: every [[equivalent]] needs a module and a one-line reason ({entry!r})")
    if ("change" in entry) == ("within" in entry):
        raise ScopeError(f"{path}: [[equivalent]] for {module} needs exactly one of 'change' or 'within'")
    return Equivalent(
        module=module,
        reason=normalize(reason),
        function=str(entry.get("function", "*")),
        change=entry.get("change"),
        within=entry.get("within"),
    )
