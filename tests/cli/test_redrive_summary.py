"""The redrive's summary names each count, on a wide terminal (a table) and on a narrow one (a block per row)."""

from __future__ import annotations

import pytest

from converge_cli.commands.dlq import _print_summary

SUMMARY = {"moved": 1, "skipped_converged": 2, "superseded": 0, "skipped_disabled": 0, "left": 3, "errors": 0}


@pytest.mark.parametrize("columns", ["200", "30"])
def test_each_count_is_labelled(columns: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    # Given a terminal of that width
    monkeypatch.setenv("COLUMNS", columns)
    # When a redrive's summary is printed
    _print_summary(SUMMARY)
    lines = [line.strip(" -│|") for line in capsys.readouterr().out.splitlines()]
    # Then no line is a bare count: each count stands beside, or under, the outcome it counts
    assert not [line for line in lines if line.isdigit()], lines
    text = "\n".join(lines)
    for label in ("moved", "converged (deleted)", "left", "not matched"):
        assert label in text
    if columns == "200":
        assert any(line.startswith("moved") and line.endswith("1") for line in lines), lines
