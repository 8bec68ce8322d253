"""Started work never ends CANCELLED or EXPIRED: a fault, then a toggle flip, then a cancel or an expiry.

"Started" is read from what happened (a lease was ever taken), never from the state: an operation that
crashed after its effect, or whose effect's answer was lost, and was then paused by its kill switch,
stands PAUSED like one that never ran. A cancel of it is refused as too late, expiry does not end it, and
when its toggle comes back on it carries on as a retry of started work. Effects are counted in the
emulated services; receipts and listings are read back.
"""

from __future__ import annotations

from typer.testing import CliRunner

from catalogue import examples
from converge.model.clock import iso
from converge.model.states import OperationState
from converge_cli.main import app as cli
from localcloud.faults import FaultKind

from .conftest import Chaos, cli_listed

LEDGER = "ledger.partner-benefits.v1"
LEDGER_PAYLOAD = {"partner_id": examples.PARTNER, "amount_cents": 2500, "benefit": "referral"}
EMAIL = "email.partner-verification.v1"
EMAIL_PAYLOAD = {"user_id": examples.UNCONFIRMED_USER}
_S = OperationState


def run_until_paused(chaos: Chaos, job_type: str, operation_id: str) -> None:
    """The first attempt runs (the fault planned for it strikes); the job's toggle is turned off while its
    effect is under way, so the message's next delivery pauses the operation."""
    chaos.faults.during_effect(operation_id, lambda: chaos.set_toggle(job_type, "off"))
    chaos.settle()
    paused = chaos.operation(operation_id)
    assert (paused.state, paused.attempts) == (_S.PAUSED, 1), paused.history
    assert operation_id in cli_listed("PAUSED")


def test_a_credit_that_crashed_after_the_ledger_then_paused_is_too_late_to_cancel(chaos: Chaos) -> None:
    # Given a credit whose worker dies after the ledger applied it, before its terminal write,
    # and its toggle turned off before the message comes back (the redelivery pauses it)
    chaos.enqueue(LEDGER, "op-paid", LEDGER_PAYLOAD)
    chaos.faults.plan(FaultKind.CRASH_AFTER_EFFECT, "op-paid")
    run_until_paused(chaos, LEDGER, "op-paid")
    assert chaos.effects().ledger_rows["op-paid"] == 1
    # When an operator cancels it with the CLI
    result = CliRunner().invoke(cli, ["ops", "cancel", "op-paid", "--reason", "the partner withdrew"])
    # Then the cancel is refused as too late, saying it started and its effect may have happened
    assert result.exit_code == 2, result.output
    assert "not cancelled: too late: it started" in result.output
    assert "its effect may have happened" in result.output
    # And the receipt still says PAUSED (never CANCELLED), listed as such, with the credit once in the ledger
    assert chaos.operation("op-paid").state is _S.PAUSED
    assert "op-paid" not in cli_listed("CANCELLED")
    assert chaos.effects().ledger_rows["op-paid"] == 1
    # When its toggle is turned on again
    chaos.set_toggle(LEDGER, "on")
    chaos.settle()
    # Then it carries on as a retry of started work: the ledger is asked, nothing is paid twice
    operation = chaos.operation("op-paid")
    assert operation.state is _S.SUCCEEDED, operation.history
    assert "provider confirms it was applied" in operation.history[-1].reason
    assert chaos.effects().ledger_rows["op-paid"] == 1
    chaos.check(["op-paid"])


def test_an_email_whose_ses_answer_was_lost_then_paused_is_too_late_to_cancel(chaos: Chaos) -> None:
    # Given an e-mail SES accepted whose answer was lost (a retry pending), then its toggle turned off
    chaos.enqueue(EMAIL, "op-mailed", EMAIL_PAYLOAD)
    chaos.faults.plan(FaultKind.LOST_RESPONSE, "op-mailed")
    run_until_paused(chaos, EMAIL, "op-mailed")
    assert chaos.effects().emails["op-mailed"] == 1
    # When it is cancelled through the framework (as the API and the console do)
    result = chaos.workload.converge.cancel("op-mailed", "sent by hand instead", actor="api:caller")
    # Then it is not applied (the API answers 409), and the message says why
    assert (result.applied, result.before, result.after) == (False, "PAUSED", "PAUSED")
    assert result.message.startswith("too late: it started (attempt 1)")
    assert chaos.operation("op-mailed").state is _S.PAUSED
    # When its toggle is turned on again
    chaos.set_toggle(EMAIL, "on")
    chaos.settle()
    # Then it is retried to its end: SUCCEEDED, with the one duplicate the lost answer allows
    assert chaos.operation("op-mailed").state is _S.SUCCEEDED
    assert chaos.effects().emails["op-mailed"] == 2 == 1 + chaos.faults.window("op-mailed")
    chaos.check(["op-mailed"])


def test_a_credit_that_crashed_after_the_ledger_is_not_expired_at_its_expires_at(chaos: Chaos) -> None:
    # Given a credit that must start within ten minutes, whose worker dies after the ledger applied it,
    # and whose toggle is turned off before the message comes back (the redelivery pauses it)
    expires_at = iso(chaos.cloud.clock.now() + 600)
    chaos.workload.converge.enqueue(LEDGER, "op-late", LEDGER_PAYLOAD, expires_at=expires_at)
    chaos.faults.plan(FaultKind.CRASH_AFTER_EFFECT, "op-late")
    run_until_paused(chaos, LEDGER, "op-late")
    # When its expires_at passes, and then the toggle is turned on again (the resumer re-dispatches it)
    chaos.cloud.advance(1200)
    chaos.set_toggle(LEDGER, "on")
    chaos.settle()
    # Then it was never ended as "not started": it carried on, asked the ledger, and SUCCEEDED with one credit
    operation = chaos.operation("op-late")
    assert operation.state is _S.SUCCEEDED, operation.history
    assert not any(entry.state == _S.EXPIRED for entry in operation.history)
    assert "op-late" not in cli_listed("EXPIRED")
    assert chaos.effects().ledger_rows["op-late"] == 1
    chaos.check(["op-late"])


def test_a_credit_that_never_started_still_expires_and_is_never_paid(chaos: Chaos) -> None:
    # Given a credit paused before any attempt (its toggle was off when it arrived), due to start within ten minutes
    chaos.set_toggle(LEDGER, "off")
    expires_at = iso(chaos.cloud.clock.now() + 600)
    chaos.workload.converge.enqueue(LEDGER, "op-never", LEDGER_PAYLOAD, expires_at=expires_at)
    chaos.cloud.drain(max_fast_forward=0)
    assert (chaos.operation("op-never").state, chaos.operation("op-never").attempts) == (_S.PAUSED, 0)
    # When the expiry passes and the toggle is turned on again
    chaos.cloud.advance(1200)
    chaos.set_toggle(LEDGER, "on")
    chaos.settle()
    # Then it ends EXPIRED, listed, and nothing was paid
    assert chaos.operation("op-never").state is _S.EXPIRED
    assert "op-never" in cli_listed("EXPIRED")
    assert chaos.effects().ledger_rows["op-never"] == 0
    chaos.check(["op-never"])
