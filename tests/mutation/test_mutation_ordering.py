"""The mutation run's order of tests: each mutant's likeliest killers first, from the kill log.

The order only decides how soon a killable mutant is killed; these pin that the log is read as written
(a torn line skipped), that a function's own killers come before its module's, and that a session of
no mutant (the clean and stats runs) keeps mutmut's order, unit tests first.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from converge_mutation import ordering


@dataclass
class Item:
    nodeid: str


def log(tmp_path, *entries: dict, torn: str = "") -> str:
    path = tmp_path / "kills.jsonl"
    path.write_text("".join(json.dumps(entry) + "\n" for entry in entries) + torn)
    return str(path)


SEND = "converge.flow.relay.xǁRelayǁ_send"
OTHER = "converge.flow.relay.x__seconds"


def test_a_mutant_names_its_function_and_its_module():
    assert ordering.function_of(f"{SEND}__mutmut_12") == SEND
    assert ordering.module_of(f"{SEND}__mutmut_12") == "converge.flow.relay"
    assert ordering.module_of("converge.model.records.x__clip__mutmut_3") == "converge.model.records"


def test_the_kill_log_is_read_as_written_and_a_torn_last_line_is_skipped(tmp_path):
    # Given a log of two kills, one session time, and a line a stopped worker left half written
    path = log(
        tmp_path,
        {"mutant": f"{SEND}__mutmut_1", "test": "tests/unit/a.py::t1"},
        {"mutant": f"{SEND}__mutmut_1", "seconds": 0.25},
        {"mutant": f"{OTHER}__mutmut_2", "test": "tests/unit/b.py::t2"},
        torn='{"mutant": "converge.relay.x__seconds__mutmut_3", "te',
    )
    # Then the kills and the times are read apart, and the torn line is neither
    assert ordering.read_kills(Path(path)) == [
        (f"{SEND}__mutmut_1", "tests/unit/a.py::t1"),
        (f"{OTHER}__mutmut_2", "tests/unit/b.py::t2"),
    ]
    assert ordering.read_times(Path(path)) == {f"{SEND}__mutmut_1": 0.25}
    assert ordering.read_kills(tmp_path / "absent.jsonl") == []


def test_a_functions_own_killers_come_first_then_its_modules_then_unit_before_integration(tmp_path, monkeypatch):
    # Given kills: t-own killed two mutants of this function, t-module one of another function of the module,
    # t-elsewhere one of another module
    path = log(
        tmp_path,
        {"mutant": f"{SEND}__mutmut_1", "test": "tests/unit/a.py::t-own"},
        {"mutant": f"{SEND}__mutmut_2", "test": "tests/unit/a.py::t-own"},
        {"mutant": f"{OTHER}__mutmut_1", "test": "tests/integration/b.py::t-module"},
        {"mutant": "converge.model.records.x__clip__mutmut_1", "test": "tests/unit/c.py::t-elsewhere"},
    )
    monkeypatch.setenv(ordering.KILLS, path)
    monkeypatch.setenv("MUTANT_UNDER_TEST", f"{SEND}__mutmut_7")
    items = [
        Item("tests/integration/z.py::t-slow"),
        Item("tests/unit/c.py::t-elsewhere"),
        Item("tests/integration/b.py::t-module"),
        Item("tests/unit/y.py::t-plain"),
        Item("tests/unit/a.py::t-own"),
    ]
    # When a session of another mutant of that function orders its tests
    ordering.pytest_collection_modifyitems(None, None, items)
    # Then: its function's killer, its module's, then the unit tests in their order, then integration
    assert [item.nodeid.split("::")[1] for item in items] == ["t-own", "t-module", "t-elsewhere", "t-plain", "t-slow"]


@pytest.mark.parametrize("session", ["", "stats", "fail"])
def test_a_session_of_no_mutant_keeps_mutmuts_order_with_unit_tests_first(tmp_path, monkeypatch, session):
    path = log(tmp_path, {"mutant": f"{SEND}__mutmut_1", "test": "tests/integration/b.py::t-killer"})
    monkeypatch.setenv(ordering.KILLS, path)
    monkeypatch.setenv("MUTANT_UNDER_TEST", session)
    items = [Item("tests/integration/b.py::t-killer"), Item("tests/unit/a.py::t2"), Item("tests/unit/a.py::t1")]
    ordering.pytest_collection_modifyitems(None, None, items)
    assert [item.nodeid for item in items] == [
        "tests/unit/a.py::t2",
        "tests/unit/a.py::t1",
        "tests/integration/b.py::t-killer",
    ]


@dataclass
class Report:
    nodeid: str
    failed: bool


def test_a_failing_test_under_a_mutant_is_logged_as_its_killer_and_a_passing_one_is_not(tmp_path, monkeypatch):
    path = tmp_path / "kills.jsonl"
    monkeypatch.setenv(ordering.KILLS, str(path))
    monkeypatch.setenv("MUTANT_UNDER_TEST", f"{SEND}__mutmut_4")
    ordering.pytest_runtest_logreport(Report("tests/unit/a.py::passes", failed=False))
    ordering.pytest_runtest_logreport(Report("tests/unit/a.py::fails", failed=True))
    monkeypatch.setenv("MUTANT_UNDER_TEST", "")  # the clean run: a failure there kills no mutant
    ordering.pytest_runtest_logreport(Report("tests/unit/a.py::flaky", failed=True))
    assert ordering.read_kills(path) == [(f"{SEND}__mutmut_4", "tests/unit/a.py::fails")]
