"""Local hooks (see localcloud.hooks): what the local cloud needs from this catalogue. All optional."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from localcloud.hooks import EffectSources


class Hooks:
    # Where the example job's effect lands, so `converge demo` and the tests count it in the emulated S3: one
    # object per operation under greetings/ in the bucket the template outputs as GreetingsBucketName.
    effects = EffectSources(bucket_output="GreetingsBucketName", object_prefixes=("greetings/",))

    def seed(self, clients: Any, outputs: Mapping[str, str], now: float | None = None) -> None:
        """Demo data for `converge local up` and `converge demo`; the example job needs none."""

    def workload(self) -> list[tuple[str, dict[str, Any], int]]:
        """(job type, payload, weight) rows for `converge demo --chaos`."""
        return [("{{toggle_key}}.v1", {"user_id": "u-1"}, 1), ("{{toggle_key}}.v1", {"user_id": "u-2"}, 1)]


hooks = Hooks()
