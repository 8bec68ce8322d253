"""The project's local hooks, with the orders' storyline for `converge demo` and `demo --chaos`: each job a
producer starts, and a batch of 50 receipts with its callback."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from converge import BatchCallback, BatchChild, OperationState
from converge_testing import BatchStep, Planned, Scenario

RECEIPTS = 50


class Hooks:
    def seed(self, clients: Any, outputs: Mapping[str, str], now: float | None = None) -> None:
        """Nothing to seed: every job here writes what it needs."""

    def workload(self) -> list[tuple[str, dict[str, Any], int]]:
        return [
            ("hello.greeting.v1", {"user_id": "u-1"}, 2),
            ("orders.confirm.v1", {"order_id": "o-1"}, 3),
            ("orders.confirm.v1", {"order_id": "o-2"}, 3),
            ("orders.receipt.v1", {"order_id": "o-3"}, 2),
        ]

    def demo_scenario(self) -> Scenario:
        planned = [
            Planned("demo-greeting", "hello.greeting.v1", {"user_id": "u-1"}, OperationState.SUCCEEDED,
                    "a greeting", effects={"GreetingsBucket": 1}),
            Planned("demo-order", "orders.confirm.v1", {"order_id": "o-1"}, OperationState.SUCCEEDED,
                    "an order: its row, its e-mail, then its follow-up", effects={"OrdersTable": 1, "ses": 1}),
            Planned("demo-receipt", "orders.receipt.v1", {"order_id": "o-2"}, OperationState.SUCCEEDED,
                    "one receipt on its own", effects={"ReceiptsTable": 1}),
        ]  # fmt: skip
        children = [BatchChild(f"r{n}", "orders.receipt.v1", {"order_id": f"o-{n}"}) for n in range(RECEIPTS)]
        batch = BatchStep(
            "receipts-1",
            children,
            BatchCallback("orders.receipts-written.v1", {}),
            {child.key: OperationState.SUCCEEDED for child in children},
            f"{RECEIPTS} receipts, then accounting told once",
        )
        return Scenario(planned=planned, duplicates=3, replay_all=True, batch=batch)


hooks = Hooks()
