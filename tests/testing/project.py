"""A team's project for converge_testing's tests and the adoption trial: what `converge init` makes, with the
orders' jobs (tests/testing/orders) added as a team would add them: their modules in the catalogue, their resources
and grants in the template, their test beside the greeting's."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

ORDERS = Path(__file__).resolve().parent / "orders"
CONVERGE_MARK = "  # converge: its resources as one application"
GRANTS_MARK = '            Resource: !Sub "${GreetingsBucket.Arn}/greetings/*"\n'


def add_orders(project: Path) -> Path:
    """Add the orders' jobs to a project made by `converge init`; returns the project."""
    package = next(path.parent for path in (project / "shared").glob("*/__init__.py"))
    shutil.copy(ORDERS / "orders.py", package / "orders.py")
    shutil.copy(ORDERS / "local.py", package / "local.py")
    shutil.copy(ORDERS / "test_orders.py", project / "tests" / "test_orders.py")
    init = (package / "__init__.py").read_text()
    init = init.replace(
        "\nBINDINGS: tuple[JobBinding, ...] = (GREETING,)", "\nBINDINGS: tuple[JobBinding, ...] = (GREETING, *ORDERS)"
    )
    greeting = f"from {package.name}.greeting import GREETING\n"
    init = init.replace(greeting, f"{greeting}from {package.name}.orders import ORDERS\n")
    (package / "__init__.py").write_text(init)
    template = (project / "template.yaml").read_text()
    template = _insert(template, CONVERGE_MARK, (ORDERS / "resources.yaml").read_text(), before=True)
    template = _insert(template, GRANTS_MARK, (ORDERS / "grants.yaml").read_text(), before=False)
    settings = (
        '"ORDERS_TABLE": "${OrdersTable}", "RECEIPTS_TABLE": "${ReceiptsTable}", "SENDER": "orders@example.com", '
        '"FOLLOW_UPS_TOPIC": "${FollowUpsTopic}", "ACCOUNTING_QUEUE": "${AccountingQueue}"'
    )
    template = template.replace(
        '{"GREETINGS_BUCKET": "${GreetingsBucket}"}', '{"GREETINGS_BUCKET": "${GreetingsBucket}", ' + settings + "}"
    )
    template = _insert(template, "        DefaultRunnerPolicyArns: !Ref DefaultRunnerPolicy\n",
                       "        BulkRunnerPolicyArns: !Ref BulkRunnerPolicy\n", before=False)  # fmt: skip
    (project / "template.yaml").write_text(template)
    return project


def remove_grant(project: Path, sid: str) -> None:
    """Take one statement (by its Sid) out of the project's template: a grant the team forgot."""
    template = (project / "template.yaml").read_text()
    statement = re.compile(rf"^ +- Sid: {sid}\n(?: {{12,}}\S.*\n)+", re.MULTILINE)
    smaller, found = statement.subn("", template)
    assert found == 1, f"no statement {sid} in {project / 'template.yaml'}"
    (project / "template.yaml").write_text(smaller)


def _insert(text: str, mark: str, addition: str, before: bool) -> str:
    assert text.count(mark) == 1, f"the scaffold's template changed: {mark!r} is not there once"
    return text.replace(mark, addition + mark if before else mark + addition)


RECEIPT_KEY = '        item = {"receipt_id": {"S": ctx.operation_id}, "order_id": {"S": order_id}}\n'


def make_receipts_non_idempotent(project: Path) -> None:
    """The receipt's runner keyed by a fresh id on every run, its binding still promising keyed_effect (a run again
    overwrites the same row): a team's runner that breaks its policy's promise the moment it runs twice."""
    package = next(path.parent for path in (project / "shared").glob("*/orders.py"))
    source = (package / "orders.py").read_text()
    assert source.count(RECEIPT_KEY) == 1, "the receipt's runner changed: its row's key is not where it was"
    fresh = '        item = {"receipt_id": {"S": str(uuid.uuid4())}, "order_id": {"S": order_id}}\n'
    (package / "orders.py").write_text(
        source.replace(RECEIPT_KEY, fresh).replace("import boto3\n", "import uuid\n\nimport boto3\n")
    )
