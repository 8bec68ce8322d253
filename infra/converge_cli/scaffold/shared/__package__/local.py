"""Local hooks: what `converge demo`, `converge demo --chaos`, `converge local up` and the tests ask of this
catalogue on the local cloud. All optional (docs/use-converge.md lists them).

No hook says where effects land: the local cloud counts every write to the template's own tables, buckets, topics
and queues, and every e-mail, by the operation that made it (converge_testing.Effects).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class Hooks:
    def seed(self, clients: Any, outputs: Mapping[str, str], now: float | None = None) -> None:
        """Demo data for `converge local up`, `converge demo` and the tests, written before any job runs.

        `clients("dynamodb")` is a boto3 client of the local cloud (any service), `outputs` the stack's outputs
        (`outputs["GreetingsBucketName"]`), `now` the emulated clock's epoch seconds. The example job needs none."""

    def workload(self) -> list[tuple[str, dict[str, Any], int]]:
        """(job type, payload, weight) rows for `converge demo --chaos`."""
        return [("{{toggle_key}}.v1", {"user_id": "u-1"}, 1), ("{{toggle_key}}.v1", {"user_id": "u-2"}, 1)]


hooks = Hooks()
