"""localcloud.collector, in a fresh interpreter (freezing in a test worker would freeze the worker's own objects)."""

from __future__ import annotations

import json
import subprocess
import sys

PROBE = """
import gc, json, weakref
from localcloud.collector import THRESHOLDS, collect_less_often, freeze_survivors

class Node:
    pass

before = gc.get_threshold()
collect_less_often()
after = gc.get_threshold()

kept = Node(); kept.me = kept               # alive: frozen
dropped = Node(); dropped.me = dropped      # a cycle already garbage: collected, not frozen
gone = weakref.ref(dropped)
del dropped
frozen_before = gc.get_freeze_count()
freeze_survivors()
tracked = {id(o) for o in gc.get_objects()}
print(json.dumps({
    "default": before, "set": after, "thresholds": THRESHOLDS,
    "garbage_collected": gone() is None,
    "frozen_more": gc.get_freeze_count() > frozen_before,
    "kept_tracked": id(kept) in tracked,
}))
"""


def test_young_collections_are_rarer_garbage_is_collected_and_survivors_are_frozen() -> None:
    completed = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60, check=True)
    seen = json.loads(completed.stdout)
    assert seen["default"] == [700, 10, 10]  # Python's own, untouched by importing the module
    assert seen["set"] == seen["thresholds"] == [10_000, 10, 10]
    assert seen["garbage_collected"] is True
    assert seen["frozen_more"] is True
    assert seen["kept_tracked"] is False  # frozen objects are in no generation the collector walks
