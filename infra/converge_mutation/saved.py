"""The results of the runs so far, kept in the repository (docs/mutation-results.jsonl) so that a run can go on
from them on another machine: a fresh clone's `make mutate RESUME=1` tests only what they leave without a result.

mutmut keeps each mutant's result in its workspace (`.mutate/mutants/<file>.py.meta`), beside the hash of each
function it mutated, and clears the results of a function whose hash has changed when it generates the mutants
again. The kept file holds exactly that, one line per function: its module, its hash, and each of its mutants'
exit code and seconds. A new workspace gets it back as mutmut's own meta files before mutmut generates its
mutants, so mutmut's own hash comparison decides what still holds: a function changed since gets tested again.

The first line says which mutmut wrote it (its mutants' numbering is its own: results of another version are not
restored), holds the runs that made the results, which the report lists, and the tests that killed mutants, which a
result names by their place in that list: they go back to the kill log, which runs each mutant's likeliest killers
first (a run without it takes about twice as long).
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

from converge_mutation.ordering import read_kills, read_times
from converge_mutation.scope import REPO_ROOT, Scope

RESULTS = REPO_ROOT / "docs" / "mutation-results.jsonl"
FORMAT = 1
_MARK = "__mutmut_"


class SavedResultsError(ValueError):
    """The kept results cannot be read: a line that is not what `save` writes."""


def _meta(mutants: Path, module: str) -> Path:
    mutated = mutants / Path("src", *module.split(".")).with_suffix(".py")
    return mutated.with_name(mutated.name + ".meta")


def save(
    scope: Scope, mutants: Path, runs: list[dict], mutmut: str, kills: Path | None = None, into: Path | None = None
) -> int:
    """Write every result in the workspace to `into`, with the test that killed each mutant where the kill log
    (`kills`, converge_mutation.ordering) says; the number of mutants with a result.

    Functions in sorted order, one line each, so that a change to one function changes one line. A result is
    `[exit code, seconds]`, or `[exit code, seconds, killer]` with the killing test's place in the header's list."""
    into = RESULTS if into is None else into
    killer_of = dict(read_kills(kills)) if kills is not None else {}
    times = read_times(mutants.parent / "times.jsonl")
    tests: dict[str, int] = {}
    functions, kept = [], 0
    for module in scope.modules:
        meta = _meta(mutants, module)
        if not meta.exists():
            continue
        data = json.loads(meta.read_text())
        codes: dict[str, dict[str, list]] = defaultdict(dict)
        # mutmut's own timing where it has one; its fork server leaves 0, and the sessions' time log says instead.
        durations = {
            **times,
            **{name: seconds for name, seconds in data.get("durations_by_key", {}).items() if seconds},
        }
        for name, code in data.get("exit_code_by_key", {}).items():
            function, mark, number = name.removeprefix(f"{module}.").rpartition(_MARK)
            if code is None or not mark:
                continue
            result = [code, round(float(durations.get(name) or 0.0), 2)]
            if name in killer_of:
                result.append(tests.setdefault(killer_of[name], len(tests)))
            codes[function][number] = result
            kept += 1
        for function, digest in sorted((data.get("hash_by_function_name") or {}).items()):
            results = dict(sorted(codes[function].items(), key=lambda item: int(item[0])))
            line = {"module": module, "function": function, "hash": digest, "results": results}
            functions.append(json.dumps(line, sort_keys=True, ensure_ascii=False))
    header = {"format": FORMAT, "mutmut": mutmut, "runs": runs, "tests": list(tests)}
    into.write_text("\n".join([json.dumps(header, sort_keys=True), *functions]) + "\n", encoding="utf-8")
    return kept


def read(path: Path) -> tuple[dict, list[dict]]:
    """The kept file's header and its function lines (SavedResultsError naming the line that is not one)."""
    text = path.read_text(encoding="utf-8").splitlines()
    try:
        header, *functions = (json.loads(line) for line in text if line.strip())
    except (json.JSONDecodeError, ValueError) as error:
        raise SavedResultsError(f"{path.name}: not the results `make mutate` keeps ({error})") from error
    if header.get("format") != FORMAT or not isinstance(header.get("runs"), list):
        raise SavedResultsError(f"{path.name}: its first line is not a header of format {FORMAT}")
    for number, line in enumerate(functions, start=2):
        if not {"module", "function", "hash", "results"} <= set(line) or not isinstance(line["results"], dict):
            raise SavedResultsError(f"{path.name}, line {number}: not a function's results")
    return header, functions


def restore(
    scope: Scope, mutants: Path, mutmut: str, kills: Path | None = None, source: Path | None = None
) -> tuple[int, list[dict]]:
    """Write the kept results as mutmut's meta files in a workspace that has none, and their kills to the kill log
    (`kills`), which orders each mutant's tests; the number of mutants given a result back, and the runs that made
    them.

    Nothing is restored from another mutmut (its mutants may be numbered otherwise) or for a module now out of
    scope; a function whose code changed since is left to mutmut, which clears its results by hash."""
    source = RESULTS if source is None else source
    if not source.exists():
        return 0, []
    header, functions = read(source)
    if header.get("mutmut") != mutmut:
        print(
            f"converge_mutation: {source.name} was written by mutmut {header.get('mutmut')}, not {mutmut}: not restored"
        )
        return 0, []
    by_module: dict[str, list[dict]] = defaultdict(list)
    for line in functions:
        if line["module"] in scope.modules:
            by_module[line["module"]].append(line)
    tests = list(header.get("tests", []))
    restored, killed = 0, []
    for module, lines in by_module.items():
        codes, durations = {}, {}
        for line in lines:
            for number, (code, seconds, *killer) in line["results"].items():
                name = f"{module}.{line['function']}{_MARK}{number}"
                codes[name], durations[name] = code, seconds
                if killer and 0 <= killer[0] < len(tests):
                    killed.append(json.dumps({"mutant": name, "test": tests[killer[0]]}, ensure_ascii=False))
        meta = _meta(mutants, module)
        meta.parent.mkdir(parents=True, exist_ok=True)
        meta.write_text(
            json.dumps(
                {
                    "exit_code_by_key": codes,
                    "hash_by_function_name": {line["function"]: line["hash"] for line in lines},
                    "type_check_error_by_key": {},
                    "durations_by_key": durations,
                    "estimated_durations_by_key": {},
                },
                indent=4,
            )
        )
        restored += len(codes)
    if kills is not None and killed:
        with kills.open("a", encoding="utf-8") as log:
            log.write("".join(f"{line}\n" for line in killed))
    return restored, list(header["runs"])
