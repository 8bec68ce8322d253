"""A producer's own writes, through the whole local cloud: whatever it writes ends with one effect at most and a
visible outcome. Effects are counted in the emulated services, receipts read back, every invariant checked.

| producer write                                    | when               | outcome                                    |
|---------------------------------------------------|--------------------|--------------------------------------------|
| the same item again (a retried PutItem)           | before the job ran | a no-op: one effect, SUCCEEDED             |
| the same item again                               | after it succeeded | a no-op: no new effect, receipt untouched  |
| other content under the same id                   | while the job runs | CONFLICT recorded, listed; original runs   |
| other content under the same id                   | after it succeeded | CONFLICT recorded, listed; nothing runs    |
| the item with every attribute converge owns       | at admission       | ignored: the job runs once                 |
| a batch with unusable items among good ones       | at admission       | good ones run, bad ones REJECTED, no retry |
| the original message, redelivered after overwrite | after it succeeded | a duplicate: no second effect              |
"""

from __future__ import annotations

from typing import Any

from catalogue import examples
from converge.model.request import JobRequest, fingerprint
from converge.model.states import OperationState
from converge.store.codecs import request_item
from localcloud.faults import FaultKind

from .conftest import Chaos, cli_listed

EMAIL = "email.password-reset.v1"
EMAIL_PAYLOAD = {"user_id": examples.CONFIRMED_USER}
LEDGER = "ledger.partner-benefits.v1"
LEDGER_PAYLOAD = {"partner_id": examples.PARTNER, "amount_cents": 2500, "benefit": "referral"}


def put(chaos: Chaos, operation_id: str, job_type: str, payload: dict[str, Any], **owned: Any) -> dict[str, Any]:
    """A producer's plain PutItem of the documented item shape (plus anything else it adds)."""
    item = {**request_item(JobRequest(operation_id, job_type, payload)), **owned}
    chaos.workload.enqueue_raw(item)
    return item


def test_the_same_item_written_again_before_the_job_ran_is_a_no_op(chaos: Chaos) -> None:
    # Given a producer that writes its item, times out, and writes it again before anything ran
    put(chaos, "op-twice", EMAIL, EMAIL_PAYLOAD)
    put(chaos, "op-twice", EMAIL, EMAIL_PAYLOAD)
    # When the cloud drains
    chaos.settle()
    # Then one e-mail, one receipt, nothing listed
    operation = chaos.operation("op-twice")
    assert (operation.state, operation.attempts, operation.conflicts) == (OperationState.SUCCEEDED, 1, ())
    assert chaos.effects().emails["op-twice"] == 1
    assert "op-twice" not in cli_listed("CONFLICT")
    chaos.check(["op-twice"])


def test_the_same_item_written_again_after_success_loses_nothing_and_sends_nothing(chaos: Chaos) -> None:
    # Given an operation that succeeded
    put(chaos, "op-after", EMAIL, EMAIL_PAYLOAD)
    chaos.settle()
    before = chaos.operation("op-after")
    # When its producer retries the PutItem with the same content (and a fresh correlation id)
    chaos.workload.enqueue_raw(
        {**request_item(JobRequest("op-after", EMAIL, EMAIL_PAYLOAD)), "correlation_id": {"S": "retry-2"}}
    )
    chaos.settle()
    # Then the receipt is exactly as it was: not wiped, not reopened; and no second e-mail
    after = chaos.operation("op-after")
    assert after.state is OperationState.SUCCEEDED
    assert after.history == before.history and after.attempts == before.attempts == 1
    assert chaos.effects().emails["op-after"] == 1
    chaos.check(["op-after"])


def test_other_content_written_while_the_job_runs_is_a_conflict_and_the_original_runs(chaos: Chaos) -> None:
    # Given a credit whose producer writes other content (another amount) under its id while it is running
    put(chaos, "op-running", LEDGER, LEDGER_PAYLOAD)
    other = {**LEDGER_PAYLOAD, "amount_cents": 999_00}
    chaos.faults.during_effect("op-running", lambda: put(chaos, "op-running", LEDGER, other))
    # When everything drains
    chaos.settle()
    # Then the original ran, once, with the original amount; the conflict is on the receipt and listed
    operation = chaos.operation("op-running")
    assert operation.state is OperationState.SUCCEEDED
    assert operation.fingerprint == fingerprint(LEDGER, LEDGER_PAYLOAD)
    assert chaos.effects().ledger_amounts["op-running"] == [2500]
    [conflict] = operation.conflicts
    assert conflict.fingerprint == fingerprint(LEDGER, other)
    assert "op-running" in cli_listed("CONFLICT")
    # And a later re-dispatch would still send the original, not what the jobs table now holds
    assert operation.runnable().payload == LEDGER_PAYLOAD
    chaos.check(["op-running"])


def test_other_content_written_after_success_is_a_conflict_and_nothing_runs_again(chaos: Chaos) -> None:
    # Given a credit that succeeded
    put(chaos, "op-reused", LEDGER, LEDGER_PAYLOAD)
    chaos.settle()
    # When a producer reuses its id for another credit
    put(chaos, "op-reused", LEDGER, {**LEDGER_PAYLOAD, "amount_cents": 1})
    chaos.settle()
    # Then nothing more is credited; the operation stays SUCCEEDED, with the conflict recorded and listed
    operation = chaos.operation("op-reused")
    assert operation.state is OperationState.SUCCEEDED and len(operation.conflicts) == 1
    assert chaos.effects().ledger_amounts["op-reused"] == [2500]
    assert "op-reused" in cli_listed("CONFLICT")
    chaos.check(["op-reused"])


def test_every_attribute_converge_owns_written_by_a_producer_is_ignored(chaos: Chaos) -> None:
    # Given an item carrying each attribute converge owns, with wrong types and values
    owned = {
        "state": {"S": "SUCCEEDED"},
        "attempts": {"S": "many"},
        "history": {"N": "7"},
        "fingerprint": {"S": "0" * 32},
        "lease_owner": {"S": "someone"},
        "lease_until": {"N": "99999999999"},
        "last_error": {"BOOL": True},
        "redrives": {"L": []},
        "attention": {"S": "FAILED"},
        "conflicts": {"S": "none"},
        "stuck": {"N": "1"},
    }
    put(chaos, "op-owned", EMAIL, EMAIL_PAYLOAD, **owned)
    # When it is relayed and run
    chaos.settle()
    # Then the job ran once and the receipt is converge's own
    operation = chaos.operation("op-owned")
    assert (operation.state, operation.attempts, operation.last_error) == (OperationState.SUCCEEDED, 1, None)
    assert operation.request.ignored == tuple(sorted(owned))
    assert chaos.effects().emails["op-owned"] == 1
    assert "op-owned" not in cli_listed("FAILED")
    chaos.check(["op-owned"])


def test_a_stream_batch_with_unusable_items_runs_the_good_ones_and_is_never_retried(chaos: Chaos) -> None:
    # Given good items and items converge cannot use, written together (one stream batch)
    put(chaos, "op-good-1", EMAIL, EMAIL_PAYLOAD)
    chaos.workload.enqueue_raw(
        {**request_item(JobRequest("op-binary", EMAIL, {})), "payload": {"M": {"user_id": {"B": b"\x00"}}}}
    )
    chaos.workload.enqueue_raw({"operation_id": {"S": "op-typed"}, "job_type": {"L": []}, "payload": {"M": {}}})
    put(chaos, "op-good-2", EMAIL, {"user_id": examples.SECOND_UNCONFIRMED_USER})
    # When the cloud drains
    stats = chaos.workload.drain()
    # Then the relay never failed (no retries, nothing to its failure destination) ...
    assert stats.failed_invocations["OutboxRelayFunction"] == 0 and stats.stream_records_skipped == 0
    # ... the good ones ran once each, and the unusable ones are REJECTED with their reasons
    counted = chaos.effects()
    assert counted.emails["op-good-1"] == counted.emails["op-good-2"] == 1
    assert "binary" in chaos.operation("op-binary").last_error
    assert "job_type must be a string" in chaos.operation("op-typed").last_error
    assert {"op-binary", "op-typed"} <= cli_listed("REJECTED")
    chaos.check()


def test_the_original_message_redelivered_after_an_overwrite_is_a_duplicate(chaos: Chaos) -> None:
    # Given an e-mail that succeeded, whose request a producer then overwrote with other content
    put(chaos, "op-over", EMAIL, EMAIL_PAYLOAD)
    chaos.settle()
    put(chaos, "op-over", EMAIL, {"user_id": examples.SECOND_UNCONFIRMED_USER})
    chaos.settle()
    # When the original message is delivered again (a stream replay of the first record, an SQS redelivery)
    queue = chaos.cloud.outputs["CriticalQueueUrl"]
    body = JobRequest("op-over", EMAIL, EMAIL_PAYLOAD).envelope().to_body()
    chaos.cloud.client("sqs").send_message(QueueUrl=queue, MessageBody=body)
    chaos.settle()
    # Then it is a skipped duplicate: one e-mail in all, the state record decides, not the overwritten request
    assert chaos.effects().emails["op-over"] == 1
    assert chaos.operation("op-over").state is OperationState.SUCCEEDED
    chaos.check(["op-over"])


def test_the_producer_faults_are_injected_and_counted_by_rate(chaos: Chaos) -> None:
    # Given every producer fault at a high rate
    for kind in (FaultKind.PRODUCER_RETRY_SAME, FaultKind.PRODUCER_RETRY_OTHER, FaultKind.PRODUCER_OWNED_ATTRIBUTES):
        chaos.faults.rate(kind, 0.4)
    # When a small mix is enqueued by the faulty producer, run, and written again after it ran
    enqueued = chaos.workload.enqueue_mix(40, "prod", faults=chaos.faults)
    chaos.workload.drain()
    chaos.workload.rewrite_after(enqueued)
    chaos.settle()
    # Then each kind was injected, and every invariant holds, the producer's included
    assert {kind.value for kind in FaultKind if kind.value.startswith("producer_")} <= set(chaos.faults.counts)
    report = chaos.check(enqueued.operation_ids)
    assert report.check("producer_rewrites_refused").holds
