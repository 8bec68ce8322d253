"""A deployment's DLQs, as the operator's commands reach them: the operator and the redrive, wired to its outputs."""

from __future__ import annotations

from converge.operate.actions import Operator
from converge.operate.deadletters import DlqUrls
from converge.operate.redrive import Redrive
from converge_cli.ops_actions import actor
from converge_cli.target import Target


def operator_at(deployment: Target) -> Operator:
    """The operator actions wired to the target's stack outputs (its DLQs), in the CLI user's name."""
    outputs = deployment.outputs
    urls = DlqUrls.model_validate(
        {
            "CRITICAL_DLQ_URL": outputs.get("CriticalDlqUrl"),
            "DEFAULT_DLQ_URL": outputs.get("DefaultDlqUrl"),
            "BULK_DLQ_URL": outputs.get("BulkDlqUrl"),
        }
    )
    return deployment.converge.operator(actor(), dlq_urls=urls)


def redrive_for(deployment: Target) -> Redrive:
    """The same Redrive the Lambda runs, wired to the target's stack outputs."""
    return operator_at(deployment).redriver()
