"""The benchmark's catalogue: importing it registers the benchmark job types.

Used as CONVERGE_CATALOGUE=converge_bench.catalogue.
"""

from __future__ import annotations

from converge_bench.jobs import register

register()
