"""The external effects the demo expects of an operation, and those counted for it in the emulated services."""

from __future__ import annotations

from typing import Any

from converge.flow.registry import Policy
from converge.model.states import OperationState

POLICY_EFFECT = {Policy.EFFECT_THEN_CLAIM: "ses", Policy.CLAIM_THEN_EFFECT: "ledger", Policy.KEYED_EFFECT: "s3"}
"""The one effect a job of each policy makes in the reference application's services, as the ledger counts it."""


def made_by(counted: Any, operation_id: str) -> dict[str, int]:
    """The external effects counted for one operation, by service (the services it made none in left out)."""
    return {service: number for service, number in counted.for_operation(operation_id).items() if number}


def expected_effects(state: OperationState, policy: Policy, effects: dict[str, int] | None) -> dict[str, int]:
    """What an operation that ended `state` made: its scenario's effects (or its policy's one) when SUCCEEDED."""
    if state is not OperationState.SUCCEEDED:
        return {}
    return dict(effects) if effects is not None else {POLICY_EFFECT[policy]: 1}
