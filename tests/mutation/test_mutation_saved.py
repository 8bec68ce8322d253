"""The mutation results kept in the repository: written from a workspace, given back to a new one as mutmut's
own meta files, and refused when they cannot be trusted (another mutmut, a line that is not one)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from converge_mutation import saved
from converge_mutation.scope import Scope


def scope_of(*modules: str) -> Scope:
    return Scope(patterns=modules, skip=(), tests=("tests/unit",), target=1.0, equivalents=(), modules=modules)


def write_meta(mutants: Path, module: str, codes: dict, hashes: dict, durations: dict | None = None) -> Path:
    meta = mutants / "src" / Path(*module.split(".")).with_suffix(".py.meta")
    meta.parent.mkdir(parents=True, exist_ok=True)
    meta.write_text(
        json.dumps(
            {
                "exit_code_by_key": codes,
                "hash_by_function_name": hashes,
                "type_check_error_by_key": {},
                "durations_by_key": durations or {},
                "estimated_durations_by_key": {},
            }
        )
    )
    return meta


RUNS = [{"modules": ["pkg.rules"], "full": True, "seconds": 12.5}]


@pytest.fixture
def kept(tmp_path) -> Path:
    # A workspace whose run killed two mutants of f (one in 1.25 s), left one of them without a result, and mypy
    # rejected g's only mutant; and a second module
    mutants = tmp_path / "run" / "mutants"
    write_meta(
        mutants,
        "pkg.rules",
        {
            "pkg.rules.x_f__mutmut_1": 1,
            "pkg.rules.x_f__mutmut_2": None,
            "pkg.rules.x_f__mutmut_10": 1,
            "pkg.rules.xǁStoreǁg__mutmut_1": 37,
        },
        {"x_f": "hash-f", "xǁStoreǁg": "hash-g"},
        {"pkg.rules.x_f__mutmut_10": 1.25},
    )
    write_meta(mutants, "pkg.other", {"pkg.other.x_h__mutmut_1": 0}, {"x_h": "hash-h"})
    # whose kill log says which test killed f's mutants (the first one's kill logged twice, by two runs)
    kills = tmp_path / "run" / "kills.jsonl"
    kills.write_text(
        "".join(
            json.dumps({"mutant": mutant, "test": test}) + "\n"
            for mutant, test in (
                ("pkg.rules.x_f__mutmut_1", "tests/unit/test_a.py::test_old"),
                ("pkg.rules.x_f__mutmut_10", "tests/unit/test_a.py::test_one"),
                ("pkg.rules.x_f__mutmut_1", "tests/unit/test_b.py::test_two"),
            )
        )
    )
    into = tmp_path / "mutation-results.jsonl"
    assert saved.save(scope_of("pkg.rules", "pkg.other"), mutants, RUNS, "3.8.1", kills=kills, into=into) == 4
    return into


def test_results_go_back_to_a_new_workspace_as_mutmuts_own_meta_files(tmp_path, kept):
    # When a new workspace is given the kept results
    mutants, kills = tmp_path / "new" / "mutants", tmp_path / "new" / "kills.jsonl"
    restored, runs = saved.restore(scope_of("pkg.rules", "pkg.other"), mutants, "3.8.1", kills=kills, source=kept)
    # Then every mutant with a result has it back, with its function's hash for mutmut to compare, and its time
    assert (restored, runs) == (4, RUNS)
    meta = json.loads((mutants / "src" / "pkg" / "rules.py.meta").read_text())
    assert meta["exit_code_by_key"] == {
        "pkg.rules.x_f__mutmut_1": 1,
        "pkg.rules.x_f__mutmut_10": 1,
        "pkg.rules.xǁStoreǁg__mutmut_1": 37,
    }
    assert meta["hash_by_function_name"] == {"x_f": "hash-f", "xǁStoreǁg": "hash-g"}
    assert meta["durations_by_key"]["pkg.rules.x_f__mutmut_10"] == 1.25
    # And in mutmut's format: the five keys its loader requires, no other
    assert set(meta) == {
        "exit_code_by_key",
        "hash_by_function_name",
        "type_check_error_by_key",
        "durations_by_key",
        "estimated_durations_by_key",
    }
    assert json.loads((mutants / "src" / "pkg" / "other.py.meta").read_text())["exit_code_by_key"] == {
        "pkg.other.x_h__mutmut_1": 0
    }
    # And the kill log holds each killed mutant's latest killer, so that a new run tries it first again
    assert [json.loads(line) for line in kills.read_text().splitlines()] == [
        {"mutant": "pkg.rules.x_f__mutmut_1", "test": "tests/unit/test_b.py::test_two"},
        {"mutant": "pkg.rules.x_f__mutmut_10", "test": "tests/unit/test_a.py::test_one"},
    ]


def test_one_line_per_function_so_that_a_change_to_one_changes_one_line(kept):
    header, *lines = kept.read_text().splitlines()
    # Each killing test once, in the header; a result names its killer by its place there
    assert json.loads(header) == {
        "format": 1,
        "mutmut": "3.8.1",
        "runs": RUNS,
        "tests": ["tests/unit/test_b.py::test_two", "tests/unit/test_a.py::test_one"],
    }
    functions = [(entry["module"], entry["function"]) for entry in map(json.loads, lines)]
    assert functions == [("pkg.rules", "x_f"), ("pkg.rules", "xǁStoreǁg"), ("pkg.other", "x_h")]
    # Mutants in their numbers' order, not their text's (10 after 1), a killed one with its killer
    assert json.loads(lines[0])["results"] == {"1": [1, 0.0, 0], "10": [1, 1.25, 1]}
    assert json.loads(lines[1])["results"] == {"1": [37, 0.0]}


def test_nothing_is_restored_for_a_module_out_of_scope_or_from_another_mutmut(tmp_path, kept):
    mutants = tmp_path / "new" / "mutants"
    assert saved.restore(scope_of("pkg.rules"), mutants, "3.8.1", source=kept)[0] == 3
    assert not (mutants / "src" / "pkg" / "other.py.meta").exists()
    elsewhere = tmp_path / "other-mutmut" / "mutants"
    assert saved.restore(scope_of("pkg.rules"), elsewhere, "3.9.0", source=kept) == (0, [])
    assert not elsewhere.exists()
    assert saved.restore(scope_of("pkg.rules"), elsewhere, "3.8.1", source=tmp_path / "none.jsonl") == (0, [])


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("not json\n", "not the results"),
        ('{"format": 2, "runs": []}\n', "header of format 1"),
        ('{"format": 1, "runs": [], "mutmut": "3.8.1"}\n{"module": "pkg.rules"}\n', "line 2: not a function"),
    ],
)
def test_a_file_that_is_not_kept_results_is_refused_naming_what_is_wrong(tmp_path, text, says):
    path = tmp_path / "mutation-results.jsonl"
    path.write_text(text)
    with pytest.raises(saved.SavedResultsError, match=says):
        saved.restore(scope_of("pkg.rules"), tmp_path / "mutants", "3.8.1", source=path)


def test_a_resumed_run_on_a_machine_without_a_workspace_starts_from_the_kept_results(tmp_path, kept, monkeypatch):
    from converge_mutation import workspace

    # Given no workspace, and the kept results
    sources, fresh = tmp_path / "shared", tmp_path / ".mutate"
    (sources / "pkg").mkdir(parents=True)
    (sources / "pkg" / "rules.py").write_text("def f():\n    return 1\n")
    for name, value in (("WORKSPACE", fresh), ("MUTANTS", fresh / "mutants"), ("_SNAPSHOT", fresh / "sources.sha256")):
        monkeypatch.setattr(workspace, name, value)
    monkeypatch.setattr(workspace, "RUNS", fresh / "runs.json")
    monkeypatch.setattr(workspace, "KILL_LOG", fresh / "kills.jsonl")
    monkeypatch.setattr(workspace, "SOURCE_ROOT", sources)
    monkeypatch.setattr(workspace, "_copy_tests", lambda scope: None)
    monkeypatch.setattr(workspace.metadata, "version", lambda distribution: "3.8.1")
    monkeypatch.setattr(saved, "RESULTS", kept)
    monkeypatch.setattr(Scope, "path_of", lambda self, module: sources / "pkg" / "rules.py")
    # When a run that is not a fresh one prepares it
    workspace.prepare(scope_of("pkg.rules"), fresh=False)
    # Then mutmut finds the kept results as its own, and the report the runs that made them
    meta = json.loads((fresh / "mutants" / "src" / "pkg" / "rules.py.meta").read_text())
    assert meta["exit_code_by_key"]["pkg.rules.x_f__mutmut_10"] == 1
    assert json.loads((fresh / "runs.json").read_text()) == RUNS
    assert "tests/unit/test_a.py::test_one" in (fresh / "kills.jsonl").read_text()
    # And a fresh run (every mutant again) does not start from them
    workspace.prepare(scope_of("pkg.rules"), fresh=True)
    assert not (fresh / "mutants").exists()
