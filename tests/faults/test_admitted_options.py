"""An operation runs with the options it was admitted with, and a time enters only in one sane, stored form.

A producer's retried put with other times is an identity conflict (listed, the original kept), so a
re-dispatch sends what was admitted; a time before the Unix epoch is refused wherever it enters (enqueue,
the CLI, a raw item through the relay), and a stored time always has a four-digit year.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from typer.testing import CliRunner

from catalogue import examples
from converge.model.clock import iso
from converge.model.errors import InvalidTiming
from converge.model.states import OperationState
from converge_cli.main import app as cli

from .conftest import Chaos, cli_listed

LEDGER = "ledger.partner-benefits.v1"
LEDGER_PAYLOAD = {"partner_id": examples.PARTNER, "amount_cents": 2500, "benefit": "referral"}
RESET = "email.password-reset.v1"
PAYLOAD = {"user_id": examples.CONFIRMED_USER}
_S = OperationState


def show(operation_id: str) -> dict:
    result = CliRunner().invoke(cli, ["ops", "show", operation_id, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_a_retried_put_without_the_expiry_does_not_change_what_a_resumed_job_runs(chaos: Chaos) -> None:
    # Given a credit admitted with an expires_at ten minutes ahead, paused (its toggle is off) before any attempt
    chaos.set_toggle(LEDGER, "off")
    expires_at = iso(chaos.cloud.clock.now() + 600)
    chaos.workload.converge.enqueue(LEDGER, "op-timed", LEDGER_PAYLOAD, expires_at=expires_at)
    chaos.cloud.drain(max_fast_forward=0)
    assert chaos.operation("op-timed").state is _S.PAUSED
    # When its producer re-puts the item with the same payload and no expires_at (a plain PutItem)
    jobs, dynamodb = chaos.cloud.outputs["JobsTableName"], chaos.cloud.client("dynamodb")
    item = dynamodb.get_item(TableName=jobs, Key={"operation_id": {"S": "op-timed"}})["Item"]
    del item["expires_at"]
    dynamodb.put_item(TableName=jobs, Item=item)
    chaos.cloud.drain(max_fast_forward=0)
    # Then the rewrite is other content: recorded on the receipt, listed under CONFLICT, the original kept
    assert "op-timed" in cli_listed("CONFLICT")
    assert show("op-timed")["expires_at"] == expires_at
    # When the toggle comes on after the original expiry (the resumer re-dispatches it)
    chaos.cloud.advance(1200)
    chaos.set_toggle(LEDGER, "on")
    chaos.settle()
    # Then what was admitted is what ran: not started by its expires_at, it EXPIRED, and nothing was paid
    shown = show("op-timed")
    assert (shown["state"], shown["expires_at"]) == ("EXPIRED", expires_at)
    assert chaos.effects().ledger_rows["op-timed"] == 0


def test_a_time_before_the_epoch_is_refused_at_enqueue_and_by_the_cli(chaos: Chaos) -> None:
    converge = chaos.workload.converge
    # When a producer enqueues with a time before 1970 (a year below 1000 among them)
    for run_at, expires_at in (("0999-01-01T00:00:00Z", None), (None, "1969-12-31T23:59:59+00:00")):
        # Then enqueue refuses it with the reason, writing nothing
        with pytest.raises(InvalidTiming, match="the Unix epoch"):
            converge.enqueue(RESET, "old-time", PAYLOAD, run_at=run_at, expires_at=expires_at)
    assert converge.operations.get("old-time") is None
    # When the CLI is asked the same / Then it refuses it with the reason, and nothing is stored
    payload = json.dumps({"user_id": examples.CONFIRMED_USER})
    result = CliRunner().invoke(cli, ["enqueue", RESET, "--id", "old-cli", "--payload", payload,
                                      "--at", "0999-01-01T00:00:00Z"])  # fmt: skip
    assert result.exit_code != 0 and "the Unix epoch" in result.output
    assert converge.operations.get("old-cli") is None


def test_a_raw_item_with_a_time_before_the_epoch_is_rejected_by_the_relay_with_the_reason(chaos: Chaos) -> None:
    # Given a producer's raw item whose run_at is in the year 999
    chaos.workload.enqueue_raw(
        {
            "operation_id": {"S": "raw-old"},
            "job_type": {"S": RESET},
            "payload": {"M": {"user_id": {"S": examples.CONFIRMED_USER}}},
            "run_at": {"S": "0999-01-01T00:00:00Z"},
        }
    )
    # When the relay reads it
    chaos.settle()
    # Then it is REJECTED with the reason, listed, and nothing ran
    operation = chaos.operation("raw-old")
    assert operation.state is _S.REJECTED and "the Unix epoch" in (operation.last_error or "")
    assert "raw-old" in cli_listed("REJECTED")
    assert chaos.effects().emails["raw-old"] == 0


def test_a_stored_time_always_has_a_four_digit_year() -> None:
    # Given times in years below 1000 / Then their stored form is zero-padded ISO-8601 (sortable, parseable)
    assert iso(datetime(999, 1, 1, tzinfo=UTC).timestamp()) == "0999-01-01T00:00:00.000Z"
    assert iso(0.0) == "1970-01-01T00:00:00.000Z"
