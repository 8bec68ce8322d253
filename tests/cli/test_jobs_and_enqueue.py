"""`converge jobs list` and `converge enqueue`: the registry as users see it, and admission from a shell."""

from __future__ import annotations

import json
from typing import Annotated

import pytest
from typer.testing import CliRunner

from catalogue import BINDINGS
from converge.flow.registry import JobBinding, Policy, Queue, Registry
from converge.screening.identifiers import Allow, Identifier
from converge.screening.message import JobMessage, validate_payload
from converge_cli.commands import jobs as jobs_command
from converge_cli.main import app
from localcloud import LocalCloud
from tests.conftest import local_aws

runner = CliRunner()


def test_jobs_list_json_describes_every_registered_type():
    result = runner.invoke(app, ["jobs", "list", "--json", "--stage", "prod"])
    assert result.exit_code == 0, result.output
    rows = {row["job_type"]: row for row in json.loads(result.output)}
    assert set(rows) == {binding.job_type for binding in BINDINGS}
    ledger = rows["ledger.partner-benefits.v1"]
    assert ledger["queue"] == "critical"
    assert ledger["default_enabled"] is False
    assert ledger["policy"] == "claim_then_effect"
    assert ledger["toggle_parameter"] == "/converge/prod/toggles/ledger.partner-benefits"
    assert rows["sweep.boost-expiry.v1"]["queue"] is None
    # each queue's concurrency cap, as converge's application gives it to the worker's event source (its defaults)
    assert {(row["queue"], row["max_concurrency"]) for row in rows.values()} == {
        ("critical", 20),
        ("default", 10),
        ("bulk", 2),
        (None, None),
    }
    assert all(row["allowed_fields"] == {} for row in rows.values())  # the reference jobs need no allowance
    for binding in BINDINGS:
        # every example is a valid payload for its own model
        validate_payload(binding.message_class(), rows[binding.job_type]["example_payload"])


class Settlement(JobMessage):
    acquirer_ref: Annotated[Identifier, Allow("payment_card", "the acquirer's references pass the Luhn check")]


def test_jobs_list_shows_a_field_allowed_past_a_heuristic_with_its_reason(monkeypatch):
    # Given a registry with a job whose message allows one field to hold Luhn-valid references
    registry = Registry()
    registry.register(
        JobBinding("ledger.settlement.v1", Settlement, lambda: None, Queue.CRITICAL, Policy.CLAIM_THEN_EFFECT)
    )
    monkeypatch.setattr(jobs_command, "load_catalogue", lambda module: registry)
    monkeypatch.setenv("COLUMNS", "250")  # one line per row, whatever the terminal
    # When the jobs are listed, as JSON and as a table
    listed = runner.invoke(app, ["jobs", "list", "--json"])
    table = runner.invoke(app, ["jobs", "list"])
    # Then the field, the kind it may hold and the reason show in both
    [row] = json.loads(listed.output)
    reason = "the acquirer's references pass the Luhn check"
    assert row["allowed_fields"] == {"acquirer_ref": [{"kind": "payment_card", "reason": reason}]}
    assert f"acquirer_ref (payment_card): {reason}" in " ".join(table.output.split())


@pytest.fixture
def cloud(monkeypatch):
    local_aws(monkeypatch)
    with LocalCloud.start() as local:
        yield local


def test_enqueue_admits_once_and_refuses_other_content(cloud):
    args = ["enqueue", "email.password-reset.v1", "--id", "cli-1", "--payload", '{"user_id": "u-1001"}', "--json"]
    first = runner.invoke(app, args)
    assert first.exit_code == 0, first.output
    assert json.loads(first.output) == {"operation_id": "cli-1", "created": True, "state": "ACCEPTED"}
    again = runner.invoke(app, args)
    assert json.loads(again.output)["created"] is False
    conflict = runner.invoke(app, [*args[:5], '{"user_id": "u-1002"}'])
    assert conflict.exit_code == 2
    assert "cli-1" in conflict.output and "Traceback" not in conflict.output


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ("{not json", "not valid JSON"),
        ('{"user_id": "ana@example.com"}', "e-mail"),
        ('{"user_id": "u-1", "x": 1}', "x"),
    ],
)
def test_enqueue_reports_bad_payloads_in_one_line(cloud, payload, message):
    result = runner.invoke(app, ["enqueue", "email.password-reset.v1", "--id", "cli-bad", "--payload", payload])
    assert result.exit_code == 2
    assert message in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_enqueue_of_an_unknown_job_type_is_a_clear_error(cloud):
    result = runner.invoke(app, ["enqueue", "no.such.v1", "--id", "cli-x", "--payload", "{}"])
    assert result.exit_code == 2
    assert "unknown job type" in result.output


def test_a_chaos_run_of_no_jobs_is_refused_rather_than_reported_as_passing():
    result = runner.invoke(app, ["demo", "--chaos", "--jobs", "0"])
    assert result.exit_code == 2
    assert "--jobs" in result.output


def test_enqueue_of_a_job_type_without_its_version_suggests_the_registered_versions(monkeypatch):
    # Given a catalogue whose reminder job has two versions
    from converge_cli.support import target as target_module

    registry = Registry()
    for version in ("v1", "v2"):
        registry.register(
            JobBinding(f"invoice.send-reminder.{version}", Settlement, lambda: None, Queue.DEFAULT, Policy.KEYED_EFFECT)
        )
    monkeypatch.setattr(target_module.Target, "registry", property(lambda self: registry))
    # When a job is enqueued under the name without its version (nothing listens there: the name is checked first)
    result = runner.invoke(
        app,
        ["enqueue", "invoice.send-reminder", "--id", "r-1", "--payload", "{}", "--endpoint-url", "http://127.0.0.1:9"],
    )
    # Then it is refused, suggesting the versioned names, never the name it refused
    assert result.exit_code == 2, result.output
    assert result.stderr.strip() == (
        "error: unknown job type 'invoice.send-reminder'; did you mean 'invoice.send-reminder.v2' or "
        "'invoice.send-reminder.v1'? (`converge jobs list` shows the registered ones)"
    )
