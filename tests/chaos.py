"""The chaos harness shared by the fault tests and the explorer: one local cloud, reset between examples.

`Chaos` is the cloud, a workload to enqueue with, the fault injector, `reset()` for each
property-test example, toggles that warm workers read again at once, `settle()` and `check()` for
the invariants. `running_cloud()` starts the cloud as both suites use it (dummy credentials, fast
DynamoDB responses, the workload prepared).
"""

from __future__ import annotations

import contextlib
import json
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from typer.testing import CliRunner

from catalogue.ledger import LedgerMode
from converge.flow.registry import toggle_key
from converge.model.records import Operation
from converge_cli.main import app as cli
from localcloud import LocalCloud, effects, invariants
from localcloud.faults import FaultInjector
from localcloud.speedups import fast_moto
from localcloud.workload import Workload, reset

LOCAL_ENVIRONMENT = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_REGION": "us-east-1",
    "AWS_DEFAULT_REGION": "us-east-1",
}


@dataclass
class Chaos:
    cloud: LocalCloud
    workload: Workload
    faults: FaultInjector
    toggles_changed: dict[str, str | None] = field(default_factory=dict)

    def reset(self, seed: int = 0) -> None:
        """A clean slate: no operations, effects, messages, faults; demo data reseeded, ledger deduplicating."""
        self.faults.reset(seed)
        reset(self.cloud, self.workload)
        self.workload.rng.seed(seed)

    def enqueue(self, job_type: str, operation_id: str, payload: dict[str, Any]) -> str:
        return self.workload.enqueue(job_type, operation_id, payload)

    def settle(self) -> None:
        self.workload.settle()

    def set_toggle(self, job_type: str, value: str) -> None:
        """Write a job's toggle and make the warm workers read it again (their cache ages on real time)."""
        name = f"{self.cloud.outputs['TogglePrefix']}/{toggle_key(job_type)}"
        ssm = self.cloud.client("ssm")
        if name not in self.toggles_changed:
            try:
                self.toggles_changed[name] = ssm.get_parameter(Name=name)["Parameter"]["Value"]
            except ssm.exceptions.ParameterNotFound:
                self.toggles_changed[name] = None
        ssm.put_parameter(Name=name, Value=value, Type="String", Overwrite=True)
        self.forget_toggles()

    def restore_toggles(self) -> None:
        ssm = self.cloud.client("ssm")
        for name, value in self.toggles_changed.items():
            if value is None:
                ssm.delete_parameter(Name=name)
            else:
                ssm.put_parameter(Name=name, Value=value, Type="String", Overwrite=True)
        self.toggles_changed.clear()
        self.forget_toggles(last_known=True)

    def forget_toggles(self, last_known: bool = False) -> None:
        """Every warm function's cached toggles forgotten (the workers', and the resumer's, which resumes what they
        paused), and this process's own: a toggle written now is read by the next delivery, and no cache outlives
        the history that filled it (the emulated clock runs on across histories, so a value cached at the end of one
        would still be fresh at the start of the next). `last_known`: their last known values too (what a function
        falls back on while SSM is unavailable), so that a history starts from nothing an earlier one switched."""
        warm = [getattr(module, "converge", None) for module in list(self.cloud.runtime._modules.values())]
        for converge in (*warm, self.workload.converge):
            if converge is not None and "toggles" in vars(converge):  # built: a function that never read one has none
                (converge.toggles.restored if last_known else converge.toggles.forget)()

    def ledger_mode(self, mode: LedgerMode) -> None:
        self.workload.provider_faults(mode is LedgerMode.NONE)

    def operation(self, operation_id: str) -> Operation:
        return self.workload.converge.operations.require(operation_id)

    def effects(self) -> effects.Effects:
        return effects.count(self.cloud)

    def check(self, expected: list[str] | None = None) -> invariants.InvariantReport:
        report = invariants.check(self.cloud, self.faults, expected, list_attention=cli_listed)
        assert report.holds, "\n".join(report.failures())
        return report

    def dlq_messages(self) -> list[dict[str, Any]]:
        """Every message in the three DLQs (read without consuming: the visibility timeout is zero)."""
        sqs, found = self.cloud.client("sqs"), []
        for output in ("CriticalDlqUrl", "DefaultDlqUrl", "BulkDlqUrl"):
            messages = sqs.receive_message(
                QueueUrl=self.cloud.outputs[output],
                MaxNumberOfMessages=10,
                MessageAttributeNames=["All"],
                VisibilityTimeout=0,
            ).get("Messages", [])
            found += messages
        return found


def cli_listed(state: str) -> set[str]:
    """`converge ops list --state <STATE> --json`, run as an operator would (one page is enough here)."""
    result = CliRunner().invoke(cli, ["ops", "list", "--state", str(state), "--limit", "1000", "--json"])
    assert result.exit_code == 0, result.output
    return {row["operation_id"] for row in json.loads(result.stdout)["operations"]}


@contextlib.contextmanager
def running_cloud(
    history_limit: int = 50, catalogue: str | None = None
) -> Iterator[tuple[LocalCloud, Workload, FaultInjector]]:
    """A local cloud with the demo data seeded, its workload and a fault injector (not installed); `catalogue`:
    the job catalogue its functions load (default: the template's, the reference application)."""
    with pytest.MonkeyPatch.context() as patch:
        for name, value in LOCAL_ENVIRONMENT.items():
            patch.setenv(name, value)
        for name in ("AWS_ENDPOINT_URL", "AWS_PROFILE", "CONVERGE_STACK"):
            patch.delenv(name, raising=False)
        with fast_moto(), LocalCloud.start(history_limit=history_limit, catalogue=catalogue) as cloud:
            workload = Workload(cloud, random.Random(0))
            workload.prepare()
            yield cloud, workload, FaultInjector(cloud)
