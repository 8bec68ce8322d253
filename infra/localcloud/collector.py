"""Python's cyclic garbage collector, set for a process that runs local clouds.

A local cloud keeps a great many objects alive for as long as its process runs: moto's backends and models,
the service models botocore has parsed, the SAM translator, the functions' modules; a worker of the test suite
ends with over a million. Python's defaults (700, 10, 10) start a young collection every 700 allocations and a
full one, which walks every tracked object, every hundred of those: on the test suite's workers the collector
took a fifth of their CPU (125 s of 650 in one run), most of it in full collections of about a second each.

`collect_less_often` collects young objects every 10,000 allocations instead of 700 (garbage is still found,
later); `freeze_survivors` collects once, then moves every object alive at that moment out of the collector's
reach (`gc.freeze`): they are never walked again, and reference counting still frees them. Call it once the
process has imported and deployed what it keeps, not while a short-lived cloud is up (its cycles would then
outlive it). The test suite, `converge local up` and `converge bench` call both; `converge demo --chaos` only
`collect_less_often` (it may run inside a test process, whose objects are not its to freeze). Nothing else
changes the collector, and a team's own tests keep Python's defaults unless they call these too.
"""

from __future__ import annotations

import gc

THRESHOLDS = (10_000, 10, 10)


def collect_less_often() -> None:
    """Young collections every 10,000 allocations, not 700 (process-wide)."""
    gc.set_threshold(*THRESHOLDS)


def freeze_survivors() -> None:
    """Collect what is garbage now, then keep every surviving object out of later collections."""
    gc.collect()
    gc.freeze()
