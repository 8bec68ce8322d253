"""Each fault of docs/fault-injection.md, injected deterministically, then the effects, the receipt and what an
operator sees.

After every scenario: count the externally visible effects (from the emulated services), read the
stored receipt, and run every invariant (`Chaos.check`), including "UNKNOWN is listed by the CLI".
"""

from __future__ import annotations

import pytest

from catalogue import examples
from catalogue.ledger import LedgerMode
from converge.model.errors import IdentityConflict
from converge.model.states import OperationState
from localcloud.faults import FaultKind

from .conftest import Chaos, cli_listed

EMAIL = "email.partner-verification.v1"
EMAIL_PAYLOAD = {"user_id": examples.UNCONFIRMED_USER}
LEDGER = "ledger.partner-benefits.v1"
LEDGER_PAYLOAD = {"partner_id": examples.PARTNER, "amount_cents": 2500, "benefit": "referral"}
DOCS = "partner-docs.upload.v1"
DOCS_PAYLOAD = {"partner_id": examples.PARTNER, "upload_id": examples.UPLOAD}
CV = "pdf.cv.v1"
CV_PAYLOAD = {"profile_id": examples.PROFILE}


def test_a_crash_after_the_email_costs_one_duplicate_never_a_loss(chaos: Chaos) -> None:
    # Given an e-mail job whose worker dies after SES accepted the message, before the claim
    chaos.enqueue(EMAIL, "op-crash", EMAIL_PAYLOAD)
    chaos.faults.plan(FaultKind.CRASH_AFTER_EFFECT, "op-crash")
    # When the message comes back after its visibility timeout and the lease has expired
    chaos.settle()
    # Then the operation succeeded, with the one duplicate the crash window allows
    operation = chaos.operation("op-crash")
    assert operation.state is OperationState.SUCCEEDED and operation.attempts == 2
    assert chaos.effects().emails["op-crash"] == 2
    assert chaos.faults.window("op-crash") == 1
    chaos.check(["op-crash"])


def test_a_crash_after_the_credit_is_settled_by_asking_the_ledger(chaos: Chaos) -> None:
    # Given a credit whose worker dies after the ledger applied it (claim written first)
    chaos.enqueue(LEDGER, "op-credit-crash", LEDGER_PAYLOAD)
    chaos.faults.plan(FaultKind.CRASH_AFTER_EFFECT, "op-credit-crash")
    # When the next delivery takes the expired claim over
    chaos.settle()
    # Then it asks the ledger by the operation id instead of paying again
    operation = chaos.operation("op-credit-crash")
    assert operation.state is OperationState.SUCCEEDED
    assert "provider confirms it was applied" in operation.history[-1].reason
    assert chaos.effects().ledger_rows["op-credit-crash"] == 1
    # And the partner's notice, written with that SUCCEEDED as its continuation, was sent once
    notice = chaos.operation("op-credit-crash:next")
    assert notice.state is OperationState.SUCCEEDED and notice.parent_id == "op-credit-crash"
    assert chaos.effects().emails["op-credit-crash:next"] == 1
    chaos.check(["op-credit-crash"])


def test_a_crash_after_a_credit_the_ledger_cannot_confirm_becomes_unknown_and_listed(chaos: Chaos) -> None:
    # Given a ledger that neither deduplicates nor answers lookups, and a crash after the credit
    chaos.ledger_mode(LedgerMode.NONE)
    chaos.enqueue(LEDGER, "op-credit-unknown", LEDGER_PAYLOAD)
    chaos.faults.plan(FaultKind.CRASH_AFTER_EFFECT, "op-credit-unknown")
    # When the operation is retried
    chaos.settle()
    # Then it is UNKNOWN (never paid twice), and the operator's listing shows it
    assert chaos.operation("op-credit-unknown").state is OperationState.UNKNOWN
    assert chaos.effects().ledger_rows["op-credit-unknown"] == 1
    assert "op-credit-unknown" in cli_listed(OperationState.UNKNOWN)
    # And no partner is told of a credit nobody can confirm: the notice follows a SUCCEEDED only
    assert chaos.workload.converge.operations.get("op-credit-unknown:next") is None
    assert chaos.effects().emails["op-credit-unknown:next"] == 0
    chaos.check(["op-credit-unknown"])


def test_a_crash_after_a_keyed_write_rewrites_the_same_key(chaos: Chaos) -> None:
    chaos.enqueue(DOCS, "op-doc-crash", DOCS_PAYLOAD)
    chaos.faults.plan(FaultKind.CRASH_AFTER_EFFECT, "op-doc-crash")
    chaos.settle()
    counted = chaos.effects()
    assert chaos.operation("op-doc-crash").state is OperationState.SUCCEEDED
    assert counted.object_writes["op-doc-crash"] == 2 and len(counted.object_keys["op-doc-crash"]) == 1
    chaos.check(["op-doc-crash"])


@pytest.mark.parametrize("step", ["store", "record", "email"])
def test_a_crash_between_two_steps_repeats_no_step_recorded(chaos: Chaos, step: str) -> None:
    # Given the CV job (three steps: store the PDF, record it, e-mail the link), whose worker dies just after
    # one step's marker, before the next
    chaos.enqueue(CV, "op-cv-crash", CV_PAYLOAD)
    chaos.faults.plan(FaultKind.CRASH_BETWEEN_STEPS, "op-cv-crash", step=step)
    # When the message comes back after its visibility timeout and the lease has expired
    chaos.settle()
    # Then the retry ran only the steps after it: one PDF written, one e-mail, and no window fault counted
    operation = chaos.operation("op-cv-crash")
    assert operation.state is OperationState.SUCCEEDED and operation.attempts == 2
    assert chaos.faults.counts[FaultKind.CRASH_BETWEEN_STEPS] == 1
    counted = chaos.effects()
    assert counted.object_writes["op-cv-crash"] == 1 and counted.emails["op-cv-crash"] == 1
    assert chaos.faults.window("op-cv-crash") == 0
    # And the receipt lists the three steps done, those up to the crash by the first delivery's owner
    steps = chaos.workload.converge.operations.get("op-cv-crash", steps=True)
    assert steps is not None and [s.name for s in steps.steps or ()] == ["store", "record", "email"]
    owners = [s.owner for s in steps.steps or ()]
    first = ["store", "record", "email"].index(step) + 1
    assert len(set(owners[:first])) == 1 and set(owners[:first]).isdisjoint(owners[first:])
    chaos.check(["op-cv-crash"])


@pytest.mark.parametrize(
    ("job_type", "payload", "service"),
    [(EMAIL, EMAIL_PAYLOAD, "ses"), (LEDGER, LEDGER_PAYLOAD, "ledger"), (DOCS, DOCS_PAYLOAD, "s3")],
)
def test_a_second_receipt_during_the_effect_is_held_off_by_the_lease(
    chaos: Chaos, job_type: str, payload: dict, service: str
) -> None:
    # Given worker A in the middle of the effect, when the same message reaches a second worker
    chaos.enqueue(job_type, "op-twice", payload)
    chaos.faults.plan(FaultKind.CONCURRENT_DELIVERY, "op-twice")
    chaos.settle()
    # Then the second receipt finds the lease (or claim) held and hands the message back: one effect
    assert chaos.faults.operations["op-twice"].second_receipts == ["handed back"]
    assert chaos.operation("op-twice").state is OperationState.SUCCEEDED
    assert chaos.effects().for_operation("op-twice")[service] == 1
    chaos.check(["op-twice"])


def test_a_lost_ses_response_is_retried_and_costs_one_duplicate(chaos: Chaos) -> None:
    chaos.enqueue(EMAIL, "op-lost-mail", EMAIL_PAYLOAD)
    chaos.faults.plan(FaultKind.LOST_RESPONSE, "op-lost-mail")
    chaos.settle()
    assert chaos.operation("op-lost-mail").state is OperationState.SUCCEEDED
    assert chaos.effects().emails["op-lost-mail"] == 2 == 1 + chaos.faults.window("op-lost-mail")
    chaos.check(["op-lost-mail"])


def test_a_lost_ledger_response_is_settled_by_lookup_in_the_same_attempt(chaos: Chaos) -> None:
    chaos.enqueue(LEDGER, "op-lost-credit", LEDGER_PAYLOAD)
    chaos.faults.plan(FaultKind.LOST_RESPONSE, "op-lost-credit")
    chaos.settle()
    operation = chaos.operation("op-lost-credit")
    assert operation.state is OperationState.SUCCEEDED and operation.attempts == 1
    assert "ambiguous outcome" in operation.history[-1].reason
    assert chaos.effects().ledger_rows["op-lost-credit"] == 1
    chaos.check(["op-lost-credit"])


def test_a_lost_ledger_response_without_lookup_is_unknown_and_listed(chaos: Chaos) -> None:
    chaos.ledger_mode(LedgerMode.NONE)
    chaos.enqueue(LEDGER, "op-lost-none", LEDGER_PAYLOAD)
    chaos.faults.plan(FaultKind.LOST_RESPONSE, "op-lost-none")
    chaos.settle()
    operation = chaos.operation("op-lost-none")
    assert operation.state is OperationState.UNKNOWN and operation.last_error
    assert chaos.effects().ledger_rows["op-lost-none"] == 1
    assert "op-lost-none" in cli_listed(OperationState.UNKNOWN)
    chaos.check(["op-lost-none"])


def test_a_replayed_dispatch_is_absorbed_before_and_after_the_work(chaos: Chaos) -> None:
    # Given the relay sending the envelope twice (it died after the send, the stream retried)
    chaos.enqueue(EMAIL, "op-replay", EMAIL_PAYLOAD)
    chaos.faults.plan(FaultKind.DISPATCH_REPLAY, "op-replay")
    chaos.settle()
    # And once more, long after the operation succeeded
    chaos.faults.replay_dispatch("op-replay")
    chaos.settle()
    # Then one e-mail, and the receipt still says SUCCEEDED
    assert chaos.faults.counts[FaultKind.DISPATCH_REPLAY] == 2
    assert chaos.operation("op-replay").state is OperationState.SUCCEEDED
    assert chaos.effects().emails["op-replay"] == 1
    chaos.check(["op-replay"])


def test_the_same_identity_with_different_content_is_refused(chaos: Chaos) -> None:
    chaos.enqueue(LEDGER, "op-identity", LEDGER_PAYLOAD)
    with pytest.raises(IdentityConflict):
        chaos.enqueue(LEDGER, "op-identity", {**LEDGER_PAYLOAD, "amount_cents": 999_00})
    chaos.settle()
    assert chaos.operation("op-identity").payload["amount_cents"] == 2500
    assert chaos.effects().ledger_rows["op-identity"] == 1
    chaos.check(["op-identity"])


def test_ssm_unavailable_at_cold_start_pauses_money_and_runs_mail(chaos: Chaos) -> None:
    # Given fresh workers (no toggle value known) and SSM down for two minutes
    chaos.cloud.runtime.cold_start()
    chaos.faults.ssm_outage(120)
    chaos.enqueue(EMAIL, "op-ssm-mail", EMAIL_PAYLOAD)
    chaos.enqueue(LEDGER, "op-ssm-credit", LEDGER_PAYLOAD)
    # When the jobs run: defaults apply (mail on, money fail-closed)
    chaos.workload.drain()
    assert chaos.operation("op-ssm-mail").state is OperationState.SUCCEEDED
    assert chaos.operation("op-ssm-credit").state is OperationState.PAUSED
    assert chaos.faults.counts[FaultKind.SSM_UNAVAILABLE] == 1 and chaos.faults.ssm_calls_failed >= 2
    # Then, once SSM answers again, the resumer's schedule re-dispatches the paused credit
    chaos.settle()
    assert chaos.operation("op-ssm-credit").state is OperationState.SUCCEEDED
    assert chaos.effects().ledger_rows["op-ssm-credit"] == 1
    chaos.check(["op-ssm-mail", "op-ssm-credit"])


def test_ssm_unavailable_on_a_warm_worker_uses_the_last_known_value(chaos: Chaos) -> None:
    chaos.enqueue(LEDGER, "op-warm-1", LEDGER_PAYLOAD)
    chaos.workload.drain()
    chaos.faults.ssm_outage(600)
    # The cached value expires (Powertools ages its cache on real time, so drop it): the next read fails
    chaos.cloud.runtime.module("CriticalWorkerFunction").converge.toggles.forget()
    chaos.enqueue(LEDGER, "op-warm-2", LEDGER_PAYLOAD)
    chaos.workload.drain()
    assert chaos.faults.ssm_calls_failed >= 1
    assert chaos.operation("op-warm-2").state is OperationState.SUCCEEDED
    chaos.check(["op-warm-1", "op-warm-2"])


@pytest.mark.parametrize("times", [1, 3])
def test_dynamodb_throttling_is_retried_until_it_passes(chaos: Chaos, times: int) -> None:
    chaos.enqueue(LEDGER, "op-throttled", LEDGER_PAYLOAD)
    chaos.enqueue(EMAIL, "op-throttled-mail", EMAIL_PAYLOAD)
    chaos.faults.plan(FaultKind.DYNAMODB_THROTTLE, "op-throttled", times=times)
    chaos.faults.plan(FaultKind.DYNAMODB_THROTTLE, "op-throttled-mail", times=times)
    chaos.settle()
    assert chaos.faults.counts[FaultKind.DYNAMODB_THROTTLE] == 2 * times
    assert chaos.operation("op-throttled").state is OperationState.SUCCEEDED
    assert chaos.effects().ledger_rows["op-throttled"] == 1
    chaos.check(["op-throttled", "op-throttled-mail"])


def test_failed_send_batch_entries_are_retried_by_the_stream(chaos: Chaos) -> None:
    ids = [chaos.enqueue(EMAIL, f"op-batch-{n}", EMAIL_PAYLOAD) for n in range(4)]
    chaos.faults.plan(FaultKind.SEND_BATCH_PARTIAL, "op-batch-1")
    chaos.faults.plan(FaultKind.SEND_BATCH_PARTIAL, "op-batch-2", times=2)
    chaos.settle()
    assert chaos.faults.counts[FaultKind.SEND_BATCH_PARTIAL] == 3
    counted = chaos.effects()
    for operation_id in ids:
        assert chaos.operation(operation_id).state is OperationState.SUCCEEDED
        assert counted.emails[operation_id] == 1
    chaos.check(ids)


@pytest.mark.parametrize("hard", [False, True])
def test_a_lambda_timing_out_mid_batch_hands_the_rest_back(chaos: Chaos, hard: bool) -> None:
    # Given a batch of e-mails, and the Lambda running out of time after the first record
    ids = [chaos.enqueue("email.password-reset.v1", f"op-timeout-{n}", EMAIL_PAYLOAD) for n in range(6)]
    chaos.faults.plan(FaultKind.LAMBDA_TIMEOUT, hard=hard)
    chaos.settle()
    # Then every operation still ends SUCCEEDED with exactly one e-mail
    assert chaos.faults.counts[FaultKind.LAMBDA_TIMEOUT] == 1
    counted = chaos.effects()
    assert all(chaos.operation(operation_id).state is OperationState.SUCCEEDED for operation_id in ids)
    assert [counted.emails[operation_id] for operation_id in ids] == [1] * 6
    chaos.check(ids)


@pytest.mark.parametrize(
    ("job_type", "payload", "service", "expected"),
    [(EMAIL, EMAIL_PAYLOAD, "ses", 2), (LEDGER, LEDGER_PAYLOAD, "ledger", 1), (DOCS, DOCS_PAYLOAD, "s3", 1)],
)
def test_a_lease_expiring_under_its_holder_is_taken_over(
    chaos: Chaos, job_type: str, payload: dict, service: str, expected: int
) -> None:
    # Given the holder's lease running out after its effect, before its claim, and a second receipt
    chaos.enqueue(job_type, "op-lease", payload)
    chaos.faults.plan(FaultKind.LEASE_EXPIRY, "op-lease")
    chaos.settle()
    # Then the second receipt takes over: e-mail may be sent twice (a window fault), money and keys never
    assert chaos.faults.operations["op-lease"].second_receipts == ["acknowledged"]
    assert chaos.operation("op-lease").state is OperationState.SUCCEEDED
    assert chaos.effects().for_operation("op-lease")[service] == expected
    assert chaos.faults.window("op-lease") == 1
    chaos.check(["op-lease"])
