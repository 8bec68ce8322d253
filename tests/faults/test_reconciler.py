"""No invisible operation: the reconciler finds each kind of stuck operation, at the cost of what it finds.

| stuck kind                                              | the reconciler                                     |
|---------------------------------------------------------|----------------------------------------------------|
| accepted, never dispatched (the relay gave up a batch)  | re-reads the batch from the stream, dispatches it  |
| in progress past its lease and every retry (DLQ)        | lists it STUCK with the reason; redrive finishes it|
| a crashed batch's neighbours, never started (DLQ)       | lists them STUCK; redrive finishes them            |
| reopened by an operator, its message never sent         | dispatches it again once it has waited too long    |
| a relay failure whose records the stream no longer has  | leaves the failure in its queue (the alarm rings)  |
"""

from __future__ import annotations

import json
from typing import Any

from catalogue import examples
from converge.flow.dispatch import Dispatcher
from converge.model.request import JobRequest
from converge.model.states import Flag, OperationState
from converge.operate.deadletters import DlqUrls
from converge.operate.overdue import REDISPATCH_AFTER_SECONDS
from converge.operate.reconciler import Reconciler
from localcloud.faults import FaultKind
from tests.conftest import drive_to

from .conftest import Chaos, cli_listed

DOCS = "partner-docs.upload.v1"
DOCS_PAYLOAD = {"partner_id": examples.PARTNER, "upload_id": examples.UPLOAD}
LEDGER = "ledger.partner-benefits.v1"
LEDGER_PAYLOAD = {"partner_id": examples.PARTNER, "amount_cents": 2500, "benefit": "referral"}
EMAIL = "email.password-reset.v1"


def stuck_rows(chaos: Chaos) -> dict[str, dict[str, Any]]:
    store = chaos.workload.converge.operations
    return {str(row["operation_id"]): row for row in store.listings.iter_attention(Flag.STUCK)}


def queue_messages(chaos: Chaos, output: str) -> list[dict[str, Any]]:
    sqs, url = chaos.cloud.client("sqs"), chaos.cloud.outputs[output]
    return sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=0).get("Messages", [])


def test_a_batch_the_relay_gave_up_on_is_read_again_and_dispatched(chaos: Chaos) -> None:
    # Given twelve requests in one stream batch (two calls' worth for one queue), and SQS refusing the third
    # one's entry through every inline and stream retry
    ids = [f"op-r{n:02d}" for n in range(12)]
    for operation_id in ids:
        chaos.enqueue(DOCS, operation_id, DOCS_PAYLOAD)
    refusal = chaos.faults.plan(FaultKind.SEND_BATCH_PARTIAL, "op-r02", times=1_000)
    chaos.workload.drain()
    # Then everything else went out and ran (the retries resumed at op-r02, so what followed it went out with it)
    # and, once the stream's retries were spent, Lambda put the batch's range on the relay's failure destination
    states = {op: chaos.operation(op).state for op in ids}
    assert {op for op, state in states.items() if state is OperationState.ACCEPTED} == {"op-r02"}
    [failure] = queue_messages(chaos, "RelayFailureQueueUrl")
    assert "DDBStreamBatchInfo" in json.loads(failure["Body"])
    # When SQS recovers and the reconciler runs
    refusal.times = refusal.used
    summary = chaos.workload.reconcile()
    # Then it re-read those records, dispatched the one still open, skipped the settled, deleted the failure
    assert (summary["relay_failures"], summary["redispatched"], summary["already_moved"]) == (1, 1, 9)
    assert queue_messages(chaos, "RelayFailureQueueUrl") == []
    assert {chaos.operation(op).state for op in ids} == {OperationState.SUCCEEDED}
    assert all(len(chaos.effects().object_keys[op]) == 1 for op in ids)
    chaos.check(ids)


def test_an_operation_in_progress_past_its_lease_and_every_retry_is_listed_stuck_until_redriven(chaos: Chaos) -> None:
    # Given a job whose worker dies after its effect on every delivery, until SQS gives the message up
    chaos.enqueue(DOCS, "op-dead", DOCS_PAYLOAD)
    crash = chaos.faults.plan(FaultKind.CRASH_AFTER_EFFECT, "op-dead", times=1_000)
    # When the receives are spent and the reconciler runs
    chaos.settle()
    # Then the operation is still IN_PROGRESS, its message in the DLQ, and listed STUCK with the reason
    assert chaos.operation("op-dead").state is OperationState.IN_PROGRESS
    row = stuck_rows(chaos)["op-dead"]
    assert row["stuck_kind"] == "dead_lettered" and "default DLQ" in row["stuck_reason"]
    assert "converge dlq redrive" in row["stuck_reason"]
    assert "op-dead" in cli_listed("STUCK")
    # And the reconciler counted it for the dashboard, per job type (EMF, with the service dimension)
    emf = [json.loads(line) for line in chaos.cloud.runtime.logs["ReconcilerFunction"] if '"_aws"' in line]
    stuck = [line for line in emf if "stuck" in line and line.get("job_type") == DOCS]
    assert stuck and stuck[-1]["_aws"]["CloudWatchMetrics"][0]["Dimensions"] == [["job_type", "service"]]
    chaos.check(["op-dead"])
    # When the fault is gone and an operator redrives it, as the reason says
    crash.times = crash.used
    from converge.operate.redrive_decision import RedriveRequest

    urls = DlqUrls.model_validate({"DEFAULT_DLQ_URL": chaos.cloud.outputs["DefaultDlqUrl"]})
    redrive = chaos.workload.converge.redrive(urls, sleep=lambda seconds: None)
    assert redrive.run(RedriveRequest(queue="default", operation_ids=["op-dead"])).moved == 1
    chaos.settle()
    # Then it succeeded (the expired lease was taken over), with one object, and is no longer listed
    assert chaos.operation("op-dead").state is OperationState.SUCCEEDED
    assert len(chaos.effects().object_keys["op-dead"]) == 1
    assert "op-dead" not in stuck_rows(chaos)
    chaos.check(["op-dead"])


def test_a_crashed_batchs_neighbours_left_in_the_dlq_are_listed_stuck(chaos: Chaos) -> None:
    # Given a batch whose first job crashes its worker on every delivery: the records after it never start
    for n in range(4):
        chaos.enqueue(DOCS, f"op-n{n}", DOCS_PAYLOAD)
    chaos.faults.plan(FaultKind.CRASH_AFTER_EFFECT, times=1_000)
    # When every receive is spent and the reconciler runs
    chaos.settle()
    # Then every operation that did not end is open with its message in a DLQ, and listed STUCK with the reason
    ids = [f"op-n{n}" for n in range(4)]
    open_ones = [op for op in ids if chaos.operation(op).state in (OperationState.ACCEPTED, OperationState.IN_PROGRESS)]
    assert open_ones, "the crash left work open"
    listed = stuck_rows(chaos)
    assert set(open_ones) <= set(listed)
    assert all(listed[op]["stuck_kind"] == "dead_lettered" for op in open_ones)
    never_started = [op for op in open_ones if chaos.operation(op).state is OperationState.ACCEPTED]
    assert all(chaos.operation(op).history[0].state == "ACCEPTED" for op in never_started)
    chaos.check(ids)


def test_a_reopened_operation_whose_message_never_went_out_is_dispatched_again(chaos: Chaos) -> None:
    # Given an UNKNOWN credit an operator resolves as retry, while SQS refuses the send
    converge = chaos.workload.converge
    admitted = converge.operations.admit(JobRequest("op-reopened", LEDGER, LEDGER_PAYLOAD)).operation
    drive_to(converge.operations, admitted, OperationState.UNKNOWN)
    chaos.workload.drain()  # the admission's own message meets an UNKNOWN operation: a duplicate, dropped

    class RefusingSqs:
        def send_message_batch(self, **kwargs: Any) -> dict[str, Any]:
            return {"Failed": [{"Id": e["Id"], "SenderFault": False, "Code": "x"} for e in kwargs["Entries"]]}

    refusing = Dispatcher(converge.settings.queues, converge.registry, RefusingSqs(), sleep=lambda seconds: None)
    result = converge.operator("cli:test", dispatcher=refusing).resolve(
        "op-reopened", "retry", "the ledger has no such credit"
    )
    # The operator sees the send fail ...
    assert result.applied and "not sent (could not send op-reopened" in result.message
    # ... and the operation is not invisible: ACCEPTED, listed STUCK as reopened
    assert chaos.operation("op-reopened").state is OperationState.ACCEPTED
    assert stuck_rows(chaos)["op-reopened"]["stuck_kind"] == "reopened"
    # When the reconciler runs before it has waited long enough, nothing is sent; after, it is dispatched again
    assert chaos.workload.reconcile()["reopened_redispatched"] == 0
    chaos.cloud.advance(REDISPATCH_AFTER_SECONDS + 1)
    assert chaos.workload.reconcile()["reopened_redispatched"] == 1
    # Then it ran once: one ledger row, SUCCEEDED, no longer listed
    assert chaos.operation("op-reopened").state is OperationState.SUCCEEDED
    assert chaos.effects().ledger_rows["op-reopened"] == 1
    assert "op-reopened" not in stuck_rows(chaos)
    chaos.check(["op-reopened"])


def test_a_relay_failure_whose_records_are_gone_stays_in_its_queue(chaos: Chaos) -> None:
    # Given a failure record naming a sequence range the stream no longer holds
    stream = chaos.cloud.stream_sources[0].mapping
    document = {
        "DDBStreamBatchInfo": {
            "shardId": chaos.cloud.client("dynamodbstreams").describe_stream(StreamArn=stream.stream_arn)[
                "StreamDescription"
            ]["Shards"][0]["ShardId"],
            "startSequenceNumber": "99999999999999999999990",
            "endSequenceNumber": "99999999999999999999999",
            "streamArn": stream.stream_arn,
        }
    }
    url = chaos.cloud.outputs["RelayFailureQueueUrl"]
    chaos.cloud.client("sqs").send_message(QueueUrl=url, MessageBody=json.dumps(document))
    # When the reconciler runs / Then it cannot recover anything from it and leaves it for the alarm
    summary = chaos.workload.reconcile()
    assert (summary["relay_failures"], summary["relay_failures_left"]) == (0, 1)
    assert len(queue_messages(chaos, "RelayFailureQueueUrl")) == 1
    chaos.cloud.client("sqs").purge_queue(QueueUrl=url)


def test_a_run_costs_what_it_finds_never_a_table_scan(chaos: Chaos) -> None:
    # Given many settled operations and nothing stuck
    for n in range(30):
        chaos.enqueue(EMAIL, f"op-c{n}", {"user_id": examples.CONFIRMED_USER})
    chaos.settle()
    converge = chaos.workload.converge

    class Counting:
        def __init__(self, client: Any) -> None:
            self.client, self.calls = client, []

        def __getattr__(self, name: str) -> Any:
            self.calls.append(name)
            return getattr(self.client, name)

    dynamodb = Counting(converge.clients.dynamodb)
    from converge.store.operations import OperationStore
    from converge.store.streams import JobsStream

    store = OperationStore(
        converge.settings.jobs_table, converge.settings.state_table, dynamodb, clock=chaos.cloud.clock
    )
    urls = DlqUrls.model_validate(
        {f"{q.upper()}_DLQ_URL": chaos.cloud.outputs[f"{q}DlqUrl"] for q in ("Critical", "Default", "Bulk")}
    )
    reconciler = Reconciler(
        converge.relay,
        store,
        converge.dispatcher,
        converge.clients.sqs,
        JobsStream(chaos.cloud.client("dynamodbstreams")),
        chaos.cloud.outputs["RelayFailureQueueUrl"],
        urls.routes(converge.settings.queues),
        chaos.cloud.clock,
        wait_seconds=0,
    )
    # When it runs
    summary = reconciler.run().to_json()
    # Then it read no table: one key range of the schedule index (overdue SCHEDULED operations) and one query
    # of the (empty) STUCK listing, nothing else
    assert "scan" not in dynamodb.calls
    assert dynamodb.calls == ["query", "query"]
    assert summary["stuck_listed"] == summary["redispatched"] == 0
