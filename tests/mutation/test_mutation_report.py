"""The mutation report's own rules: what is in scope, how a mutant is described and matched, what is stale.

Each test builds a small source tree or mutmut workspace of its own, in mutmut's file formats.
"""

from __future__ import annotations

import ast
import json
import textwrap
from pathlib import Path

import pytest

from converge_mutation import recheck
from converge_mutation import report as reporting
from converge_mutation.pragmas import exclude_calls
from converge_mutation.results import read_module
from converge_mutation.scope import Equivalent, Scope, ScopeError, load, resolve


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


@pytest.fixture
def source(tmp_path):
    root = tmp_path / "shared"
    for name in ("__init__", "rules", "transitions", "plumbing", "fresh"):
        write(root / "pkg" / f"{name}.py", "")
    return root


def test_patterns_pick_up_new_modules_and_renamed_ones_are_reported(source):
    # Given a scope naming a module that no longer exists, a pattern, and one skipped module
    scope = Scope(
        patterns=("pkg.rules", "pkg.gone", "pkg.transition*"),
        skip=("pkg.plumbing",),
        tests=("tests/unit",),
        target=0.9,
        equivalents=(),
    )
    # When it is resolved against the files
    resolved = resolve(scope, source)
    # Then the pattern found its module, the missing name is reported, and the new module is unclassified
    assert resolved.modules == ("pkg.rules", "pkg.transitions")
    assert resolved.missing == ("pkg.gone",)
    assert resolved.unclassified == ("pkg.fresh",)


def test_the_scope_file_refuses_an_equivalent_without_a_reason(tmp_path, source):
    path = write(
        tmp_path / "mutation.toml",
        """
        [scope]
        mutate = ["pkg.rules"]
        tests = ["tests/unit"]
        [[equivalent]]
        module = "pkg.rules"
        change = "a → b"
        """,
    )
    with pytest.raises(ScopeError, match="one-line reason"):
        load(path, source)


def test_the_projects_scope_file_parses_and_names_the_rule_modules():
    # The real tests/mutation.toml against the real sources (a renamed or new module is reported by the
    # run itself, not failed here, so that a restructuring can land before its scope is updated)
    scope = load()
    assert {
        "converge.model.outcomes",
        "converge.flow.pipeline",
        "converge.flow.worker",
        "converge.model.states",
        "converge.store.state",
    } <= set(scope.modules)
    assert all(entry.reason for entry in scope.equivalents)


def test_log_calls_are_marked_unmutated_on_every_line_without_changing_the_code():
    # Given a function with a one-line and a multi-line log call beside real code
    source = textwrap.dedent(
        '''
        def f(x):
            logger.info("one line", x=x)
            logger.warning(
                "several lines",
                x=x,
            )
            text = """a string
        over two lines"""
            return x + 1
        '''
    )
    # When log calls are excluded
    marked, statements = exclude_calls(source, ("logger.*",))
    # Then each line of both calls carries the pragma, the code is unchanged, and nothing else is marked
    assert statements == 2
    lines = marked.splitlines()
    assert [n for n, line in enumerate(lines) if "pragma: no mutate" in line] == [2, 3, 4, 5, 6]
    assert ast.dump(ast.parse(marked)) == ast.dump(ast.parse(source))


MUTATED = """
def x_classify__mutmut_orig(exc, final_attempt):
    if final_attempt:
        logger.info("last", attempt=1)
        return "failed"
    return "retry"
def x_classify__mutmut_1(exc, final_attempt):
    if not final_attempt:
        logger.info("last", attempt=1)
        return "failed"
    return "retry"
def x_classify__mutmut_2(exc, final_attempt):
    if final_attempt:
        logger.info("last", attempt=2)
        return "failed"
    return "retry"
def x_classify__mutmut_3(exc, final_attempt):
    if final_attempt:
        logger.info("last", attempt=1)
        return "XXfailedXX"
    return "retry"
class Store:
    def xǁStoreǁget__mutmut_orig(self, key, consistent=True):
        return key
    def xǁStoreǁget__mutmut_1(self, key, consistent=False):
        return key
"""

ORIGINAL = '''"""A module."""


def classify(exc, final_attempt):
    if final_attempt:
        logger.info("last", attempt=1)
        return "failed"
    return "retry"


class Store:
    def get(self, key, consistent=True):
        return key
'''


@pytest.fixture
def workspace(tmp_path):
    mutants = tmp_path / "mutants"
    mutated = write(mutants / "src" / "pkg" / "rules.py", MUTATED)
    codes = {
        "pkg.rules.x_classify__mutmut_1": 1,  # killed
        "pkg.rules.x_classify__mutmut_2": 0,  # survived
        "pkg.rules.x_classify__mutmut_3": 0,  # survived
        "pkg.rules.xǁStoreǁget__mutmut_1": 37,  # rejected by the type checker
    }
    mutated.with_name("rules.py.meta").write_text(json.dumps({"exit_code_by_key": codes}))
    return mutants


def test_a_mutant_is_described_by_its_function_and_change_not_by_its_number(workspace):
    # When the workspace is read
    mutants = {m.name.rsplit(".", 1)[1]: m for m in read_module(workspace, "pkg.rules", ORIGINAL)}
    # Then each mutant names its function, the changed lines, the calls around them, and the real line
    first = mutants["x_classify__mutmut_1"]
    assert (first.function, first.status, first.change) == (
        "classify",
        "killed",
        "if final_attempt: → if not final_attempt:",
    )
    assert first.line == 5
    logged = mutants["x_classify__mutmut_2"]
    assert logged.change == 'logger.info("last", attempt=1) → logger.info("last", attempt=2)'
    assert logged.calls == ("logger.info",)
    method = mutants["xǁStoreǁget__mutmut_1"]
    assert method.function == "Store.get"
    assert method.change == "def (self, key, consistent=True): → def (self, key, consistent=False):"
    assert method.rejected_by_types and not method.killed


def scope_for(tmp_path, *equivalents: Equivalent) -> Scope:
    source = tmp_path / "shared"
    write(source / "pkg" / "__init__.py", "")
    write(source / "pkg" / "rules.py", ORIGINAL)
    scope = Scope(patterns=("pkg.rules",), skip=(), tests=("tests/unit",), target=0.9, equivalents=equivalents)
    resolved = resolve(scope, source)
    return resolved


def test_equivalents_match_by_change_or_by_the_call_they_sit_in_and_unused_ones_are_stale(
    tmp_path, workspace, monkeypatch
):
    # Given one equivalent naming a change exactly, one a class of changes, and one matching nothing
    by_change = Equivalent(
        module="pkg.rules", function="classify", change='return "failed"  →  return "XXfailedXX"', reason="r1"
    )
    by_call = Equivalent(module="pkg.*", within="logger.*", reason="r2")
    stale = Equivalent(module="pkg.rules", change="x → y", reason="r3")
    scope = scope_for(tmp_path, by_change, by_call, stale)
    monkeypatch.setattr(Scope, "path_of", lambda self, module: tmp_path / "shared" / "pkg" / "rules.py")
    # When the report is built
    built = reporting.build(scope, workspace, runs=[])
    # Then both survivors are explained, the unused entry is stale, and the rate counts what tests had to kill
    [result] = built.modules
    assert [(m.name.rsplit("_", 1)[1], e.reason) for m, e in result.equivalent] == [("2", "r2"), ("3", "r1")]
    assert result.surviving == []
    assert built.stale == [stale]
    assert (result.killed, result.typed_out, result.rate) == (1, 1, 1.0)
    assert built.passed
    text = reporting.render(built)
    assert "| `pkg.rules` | 4 | 1 | 1 | 2 | 0 | 100.0% ✓ | 0 s |" in text
    assert "change 'x → y'" in text


def test_an_unexplained_survivor_below_the_target_fails_the_report(tmp_path, workspace, monkeypatch):
    # Given no equivalents at all
    scope = scope_for(tmp_path)
    monkeypatch.setattr(Scope, "path_of", lambda self, module: tmp_path / "shared" / "pkg" / "rules.py")
    # When the report is built / Then the two survivors are listed and the module is below the target
    built = reporting.build(scope, workspace, runs=[])
    [result] = built.modules
    assert len(result.surviving) == 2
    assert result.rate == pytest.approx(1 / 3)
    assert not built.passed
    assert "33.3% ✗ below target" in reporting.render(built)


def test_a_recheck_tries_only_the_survivors_of_the_named_modules(tmp_path, monkeypatch):
    # Given a workspace with a survivor, a killed, an unchecked, an unreached (no test ran it) and an interrupted
    # mutant in one module, a survivor in another
    codes = {
        "pkg.rules.x_f__mutmut_1": 0,
        "pkg.rules.x_f__mutmut_2": 1,
        "pkg.rules.x_f__mutmut_3": None,
        "pkg.rules.x_f__mutmut_4": 33,
        "pkg.rules.x_f__mutmut_5": 2,
    }
    rules = write(tmp_path / "src" / "pkg" / "rules.py.meta", json.dumps({"exit_code_by_key": codes}))
    other_codes = {"pkg.other.x_g__mutmut_1": 0}
    other = write(tmp_path / "src" / "pkg" / "other.py.meta", json.dumps({"exit_code_by_key": other_codes}))
    monkeypatch.setattr(recheck, "MUTANTS", tmp_path)
    # When the survivors are listed, for one module and for all
    # Then only surviving mutants come back, those no test reached among them (never a killed or an unchecked one),
    # of that module or of all
    survivors = [(rules, "pkg.rules.x_f__mutmut_1"), (rules, "pkg.rules.x_f__mutmut_4")]
    assert recheck.survivors(["pkg.rules"]) == survivors
    assert recheck.survivors([]) == [(other, "pkg.other.x_g__mutmut_1"), *survivors]
    # And with the unchecked ones asked for too, those come back as well (the one whose tests were stopped with
    # its run among them), never the killed one
    assert recheck.survivors(["pkg.rules"], unchecked=True) == [
        (rules, "pkg.rules.x_f__mutmut_1"),
        (rules, "pkg.rules.x_f__mutmut_3"),
        (rules, "pkg.rules.x_f__mutmut_4"),
        (rules, "pkg.rules.x_f__mutmut_5"),
    ]


@pytest.mark.parametrize(
    ("options", "fresh", "names", "codes_after"),
    [
        # a full run: a fresh workspace, mutmut over everything
        ({}, True, [], {"m_1": 0, "m_2": 1, "m_3": None, "m_4": 2}),
        # --only: those modules named, so mutmut tests every one of their mutants again
        ({"only": ["pkg.rules"]}, False, ["pkg.rules.*"], {"m_1": 0, "m_2": 1, "m_3": None, "m_4": 2}),
        # --survivors: the survivor's and the interrupted one's results cleared, no name given, so mutmut tests
        # them and the unchecked one
        ({"survivors": True}, False, [], {"m_1": None, "m_2": 1, "m_3": None, "m_4": None}),
        # --resume: only the interrupted one's result cleared and no name given, so mutmut tests it and the
        # unchecked one
        ({"resume": True}, False, [], {"m_1": 0, "m_2": 1, "m_3": None, "m_4": None}),
    ],
)
def test_each_kind_of_run_hands_mutmut_what_it_should_test_again(
    tmp_path, monkeypatch, options, fresh, names, codes_after
):
    from converge_mutation import workspace

    # Given a workspace whose one module has a survivor, a killed and an unchecked mutant, and one whose tests were
    # stopped with the run before (mutmut's "interrupted")
    codes = {"pkg.rules.x_f__m_1": 0, "pkg.rules.x_f__m_2": 1, "pkg.rules.x_f__m_3": None, "pkg.rules.x_f__m_4": 2}
    meta = write(tmp_path / "mutants" / "src" / "pkg" / "rules.py.meta", json.dumps({"exit_code_by_key": codes}))
    monkeypatch.setattr(workspace, "MUTANTS", tmp_path / "mutants")
    monkeypatch.setattr(workspace, "RUNS", tmp_path / "runs.json")
    prepared, called = [], []
    monkeypatch.setattr(workspace, "prepare", lambda scope, fresh: prepared.append(fresh))
    monkeypatch.setattr(workspace, "_mutmut_command", lambda: ["mutmut"])
    monkeypatch.setattr(workspace.metadata, "version", lambda distribution: "3.8.1")

    class Completed:
        returncode = 0

    monkeypatch.setattr(workspace.subprocess, "run", lambda command, **kwargs: called.append(command) or Completed())
    scope = Scope(
        patterns=("pkg.rules",), skip=(), tests=("tests/unit",), target=1.0, equivalents=(), modules=("pkg.rules",)
    )
    # When a run of that kind is made
    record = workspace.run(
        scope, options.get("only", []), 2, options.get("survivors", False), options.get("resume", False)
    )
    # Then the workspace is made afresh only for a full run, and mutmut is named exactly the modules asked for
    assert prepared == [fresh]
    assert called == [["mutmut", "run", "--max-children", "2", *names]]
    # And only --survivors and --resume clear results, so mutmut (given no names) tests again just what has none
    stored = json.loads(meta.read_text())["exit_code_by_key"]
    assert {key.rsplit("__", 1)[1]: code for key, code in stored.items()} == codes_after
    # And the run is recorded as what it was
    assert (record.full, record.survivors, record.resumed) == (
        fresh,
        options.get("survivors", False),
        options.get("resume", False),
    )
    assert json.loads((tmp_path / "runs.json").read_text())[-1]["resumed"] == options.get("resume", False)


def test_a_kept_workspace_takes_the_changed_sources_and_keeps_its_results(tmp_path, monkeypatch):
    from converge_mutation import workspace

    # Given a workspace whose run left results, made from a package of two modules
    sources, kept = tmp_path / "shared", tmp_path / ".mutate"
    write(sources / "pkg" / "rules.py", "def f():\n    return 1\n")
    write(sources / "pkg" / "gone.py", "X = 1\n")
    stats = kept / "mutants" / "mutmut-stats.json"
    for name, value in (("WORKSPACE", kept), ("MUTANTS", kept / "mutants"), ("_SNAPSHOT", kept / "sources.sha256")):
        monkeypatch.setattr(workspace, name, value)
    monkeypatch.setattr(workspace, "STATS", stats)
    monkeypatch.setattr(workspace, "KILL_LOG", kept / "kills.jsonl")
    monkeypatch.setattr(workspace, "SOURCE_ROOT", sources)
    monkeypatch.setattr(workspace, "_copy_tests", lambda scope: None)
    monkeypatch.setattr(Scope, "path_of", lambda self, module: sources / "pkg" / "rules.py")
    scope = Scope(
        patterns=("pkg.rules",), skip=(), tests=("tests/unit",), target=1.0, equivalents=(), modules=("pkg.rules",)
    )
    workspace.prepare(scope, fresh=True)
    meta = write(kept / "mutants" / "src" / "pkg" / "rules.py.meta", json.dumps({"exit_code_by_key": {"m": 1}}))
    write(kept / "mutants" / "src" / "pkg" / "gone.py", "X = 1\n")
    write(stats, "{}")
    # When nothing changed, Then a run keeps mutmut's map of which tests reach which function
    workspace.prepare(scope, fresh=False)
    assert stats.exists()
    # When a module changes and the other is deleted, and a run that is not a fresh one prepares the workspace
    write(sources / "pkg" / "rules.py", "def f():\n    return 2\n")
    (sources / "pkg" / "gone.py").unlink()
    workspace.prepare(scope, fresh=False)
    # Then src/ holds the changed code, mutmut's results are kept for it to compare by function hash,
    # and the deleted module is gone from mutmut's copy too
    assert (kept / "src" / "pkg" / "rules.py").read_text() == "def f():\n    return 2\n"
    assert json.loads(meta.read_text()) == {"exit_code_by_key": {"m": 1}}
    assert not (kept / "mutants" / "src" / "pkg" / "gone.py").exists()
    assert not (kept / "src" / "pkg" / "gone.py").exists()
    # And mutmut traces every test again, so that an old test reaching the changed function is among its tests
    assert not stats.exists()
    # And a fresh run starts over
    workspace.prepare(scope, fresh=True)
    assert not meta.exists()


def test_a_recheck_names_each_test_file_once_saying_when_only_some_of_its_tests_ran():
    named = reporting._named_tests(["tests/unit/test_a.py::test_one", "tests/unit/test_a.py::test_two", "tests/b.py"])
    assert named == ["`test_a.py` (some of its tests)", "`b.py`"]


def test_the_mutants_of_a_function_moved_out_of_the_module_since_its_run_are_not_counted(workspace):
    # Given a workspace whose run mutated Store.get, and the module as it stands now, without it (moved elsewhere)
    moved = ORIGINAL[: ORIGINAL.index("class Store:")]
    # When the workspace is read against it
    names = [m.name.rsplit(".", 1)[1] for m in read_module(workspace, "pkg.rules", moved)]
    # Then only the functions still there count: nothing of the moved one survives or is killed here
    assert names == ["x_classify__mutmut_1", "x_classify__mutmut_2", "x_classify__mutmut_3"]


def test_the_mutants_of_a_function_changed_since_its_run_count_as_not_run_yet(workspace):
    # Given the module as it stands now, its classify changed since the run (another value returned), Store.get not
    changed = ORIGINAL.replace('return "retry"', 'return "retry later"')
    # When the workspace is read against it
    mutants = {m.name.rsplit(".", 1)[1]: m for m in read_module(workspace, "pkg.rules", changed)}
    # Then classify's results say nothing any more (not checked, to be run again); the unchanged method keeps its own
    assert [m.status for name, m in mutants.items() if name.startswith("x_classify")] == ["not checked"] * 3
    assert mutants["xǁStoreǁget__mutmut_1"].rejected_by_types


def test_a_mutant_whose_tests_were_stopped_with_its_run_has_no_result():
    from converge_mutation.results import status_of

    # Given mutmut's code for a mutant whose tests were interrupted (the run was stopped), beside a pass and a fail
    # Then it is not checked (counted as not run yet and tested again), neither a survivor nor a kill
    assert [status_of(code) for code in (2, 0, 1)] == ["not checked", "survived", "killed"]


def test_a_run_stopped_part_way_is_recorded_with_the_signal_and_how_long_it_ran(tmp_path, monkeypatch):
    from converge_mutation import workspace

    # Given a workspace, and mutmut stopped by SIGTERM to the run's process group part way
    monkeypatch.setattr(workspace, "MUTANTS", tmp_path / "mutants")
    monkeypatch.setattr(workspace, "RUNS", tmp_path / "runs.json")
    monkeypatch.setattr(workspace, "prepare", lambda scope, fresh: None)
    monkeypatch.setattr(workspace, "_mutmut_command", lambda: ["mutmut"])
    monkeypatch.setattr(workspace.metadata, "version", lambda distribution: "3.8.1")
    monkeypatch.setattr(workspace.subprocess, "run", lambda command, **kwargs: workspace._stop(15, None))
    scope = Scope(
        patterns=("pkg.rules",), skip=(), tests=("tests/unit",), target=1.0, equivalents=(), modules=("pkg.rules",)
    )
    # When the run is stopped
    record = workspace.run(scope, [], 2, resume=True)
    # Then it is recorded as stopped (the signal's exit code), so that the report lists it and its time
    assert record.exit_code == -15 and record.resumed
    assert json.loads((tmp_path / "runs.json").read_text())[-1]["exit_code"] == -15
