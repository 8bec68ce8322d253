"""The explorer over this project's own catalogue: histories of its jobs under faults, kill switches, operators and
the clock, each step checked against converge's promise (docs: converge_testing's page, "The explorer").

`converge_explore` runs it on `converge_cloud`, bounded: a break fails the test with its kind, the shrunk history and
the seed that finds it again (`pytest --converge-seed N` replays it). `converge explore --budget 300` explores longer.
"""

from __future__ import annotations


def test_the_catalogue_keeps_its_promise_in_a_bounded_exploration(converge_explore) -> None:
    # Given every job of the catalogue, each held to its clean run (its example, once, no fault)
    # When the explorer runs a few histories of them (a few seconds)
    explored = converge_explore(histories=4, steps=12, budget=30)
    # Then the promise held in every one, and every job the explorer starts was held to its clean run
    assert explored.histories >= 4 and explored.steps > 0
    assert "{{toggle_key}}.v1" in explored.clean
