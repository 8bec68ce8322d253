"""The demo's approval (converge_cli.commands.demo_approval) on its own: it holds on the reference application, and
its checks fail, naming the operation, when an effect is missing or made twice."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from catalogue.local import approval
from catalogue.records import partner_key
from converge.local_hooks import Scenario
from converge_cli.commands import demo_approval
from converge_cli.commands.demo_run import Check, Demo
from converge_cli.main import app
from localcloud import LocalCloud, effects
from localcloud.server import catalogue_seeder


@pytest.fixture
def cloud() -> Iterator[LocalCloud]:
    with LocalCloud.start(seeders=[catalogue_seeder]) as local:
        effects.instrument(local)
        yield local


def run(cloud: LocalCloud, command: Any = app) -> Demo:
    demo = Demo(cloud, lambda text: None, Scenario(planned=[], approval=approval()), cli=command)
    demo.report.events["approval_emails"] = demo_approval.run(demo, Check)
    return demo


@pytest.mark.parametrize("command", [app, None], ids=["converge signal", "Converge.signal, without the command"])
def test_the_approval_holds_and_says_what_became_of_each(cloud: LocalCloud, command: Any) -> None:
    # Given the reference application's approval step / When the demo runs it, its decisions sent with the command
    # (or, built without it, with the call the command makes)
    demo = run(cloud, command)
    # Then every check holds, and its lines name each path and what it made
    assert [check.name for check in demo.report.checks if not check.ok] == []
    assert len(demo.report.checks) == 6
    assert demo.report.events["approval_emails"] == 3
    assert "waited SCHEDULED for the signal 'approval' until " in demo.report.approvals[0]


def test_a_missing_e_mail_fails_the_demo_naming_the_operation(cloud: LocalCloud) -> None:
    # Given the partner has no address any more (so no partner is told)
    cloud.client("dynamodb").update_item(
        TableName=cloud.outputs["AppTableName"],
        Key={"pk": {"S": partner_key(approval().payload["partner_id"])}},
        UpdateExpression="REMOVE email",
    )
    # When the demo runs its approval
    demo = run(cloud)
    # Then each path's check fails, saying what was made
    failed = {check.name.split(":")[0]: check.detail for check in demo.report.checks if not check.ok}
    assert set(failed) == set(demo_approval.PATHS)
    assert failed[demo_approval.APPROVED].endswith("made {'ledger': 1}")
    assert failed[demo_approval.REJECTED].endswith("made nothing")


def test_a_credit_made_twice_fails_the_demo(cloud: LocalCloud) -> None:
    # Given a second ledger row already carries the approved credit's key (a credit made twice)
    cloud.client("dynamodb").put_item(
        TableName=cloud.outputs["LedgerTableName"],
        Item={
            "pk": {"S": "entry#stray"},
            "idempotency_key": {"S": demo_approval.APPROVED},
            "amount_cents": {"N": "250000"},
        },
    )
    # When the demo runs its approval
    demo = run(cloud)
    # Then the approved path's check fails, the two rows counted (and the wait's: it had made something already)
    failed = {check.name.split(":")[0]: check.detail for check in demo.report.checks if not check.ok}
    assert set(failed) == {
        demo_approval.APPROVED,
        f"three {approval().job_type} wait SCHEDULED for 'approval', listed until their timeout, making nothing",
    }
    assert "'ledger': 2" in failed[demo_approval.APPROVED]
