"""A team's jobs beside the example greeting: an order confirmed in two steps (a row in the team's own table, then
an e-mail), its follow-up as a continuation (a message on the team's topic), and a batch of receipts (a row each)
whose callback tells accounting (a message on the team's queue). Copied into a project `converge init` made."""

from __future__ import annotations

from functools import cache
from typing import Any

import boto3

from converge import (
    BatchSummary,
    Identifier,
    JobBinding,
    JobContext,
    JobMessage,
    Policy,
    Queue,
    Then,
    catalogue_environment,
)


@cache
def client(service: str) -> Any:
    return boto3.client(service)  # built on first use, once per process


class ConfirmOrder(JobMessage):
    order_id: Identifier


class ConfirmOrderRunner:
    """Two effects, each a step: the order's row (keyed by the order: writing it again writes the same row), then
    the confirmation e-mail (duplicates over loss)."""

    def load(self, message: ConfirmOrder, ctx: JobContext) -> str:
        return message.order_id

    def run(self, message: ConfirmOrder, order_id: str, ctx: JobContext) -> None:
        settings = catalogue_environment()
        ctx.step("record", lambda key: self.record(settings["ORDERS_TABLE"], order_id), policy="keyed_effect")
        ctx.step("email", lambda key: self.email(settings["SENDER"], order_id), policy="effect_then_claim")

    def record(self, table: str, order_id: str) -> None:
        item = {"order_id": {"S": order_id}, "state": {"S": "confirmed"}}
        client("dynamodb").put_item(TableName=table, Item=item)

    def email(self, sender: str, order_id: str) -> None:
        content = {"Subject": {"Data": "Order confirmed"}, "Body": {"Text": {"Data": f"Order {order_id}: confirmed"}}}
        client("sesv2").send_email(
            FromEmailAddress=sender, Destination={"ToAddresses": [sender]}, Content={"Simple": content}
        )


class FollowUp(JobMessage):
    order_id: Identifier


class FollowUpRunner:
    def load(self, message: FollowUp, ctx: JobContext) -> str:
        return message.order_id

    def run(self, message: FollowUp, order_id: str, ctx: JobContext) -> None:
        client("sns").publish(TopicArn=catalogue_environment()["FOLLOW_UPS_TOPIC"], Message=f"follow up {order_id}")


class Receipt(JobMessage):
    order_id: Identifier


class ReceiptRunner:
    def load(self, message: Receipt, ctx: JobContext) -> str:
        return message.order_id

    def run(self, message: Receipt, order_id: str, ctx: JobContext) -> None:
        item = {"receipt_id": {"S": ctx.operation_id}, "order_id": {"S": order_id}}
        client("dynamodb").put_item(TableName=catalogue_environment()["RECEIPTS_TABLE"], Item=item)


class ReceiptsWritten(BatchSummary):
    """The batch's callback: converge fills in the counts (batch_id, batch_total, batch_succeeded, ...)."""


class ReceiptsWrittenRunner:
    def load(self, message: ReceiptsWritten, ctx: JobContext) -> ReceiptsWritten:
        return message

    def run(self, message: ReceiptsWritten, summary: ReceiptsWritten, ctx: JobContext) -> None:
        body = f"{summary.batch_id}: {summary.batch_succeeded} of {summary.batch_total} receipts written"
        client("sqs").send_message(QueueUrl=catalogue_environment()["ACCOUNTING_QUEUE"], MessageBody=body)


CONFIRM = JobBinding(
    job_type="orders.confirm.v1",
    message=ConfirmOrder,
    runner=ConfirmOrderRunner,
    queue=Queue.DEFAULT,
    policy=Policy.EFFECT_THEN_CLAIM,  # a job of steps: each step carries its own policy
    on_success=Then("orders.follow-up.v1", lambda message: {"order_id": message.order_id}),
    description="Confirm an order: its row, then its e-mail; then its follow-up.",
    example_payload={"order_id": "o-1"},
)
FOLLOW_UP = JobBinding(
    job_type="orders.follow-up.v1",
    message=FollowUp,
    runner=FollowUpRunner,
    queue=Queue.DEFAULT,
    policy=Policy.EFFECT_THEN_CLAIM,
    description="Publish an order's follow-up (the confirmation's continuation).",
    example_payload={"order_id": "o-1"},
)
RECEIPT = JobBinding(
    job_type="orders.receipt.v1",
    message=Receipt,
    runner=ReceiptRunner,
    queue=Queue.BULK,
    policy=Policy.KEYED_EFFECT,
    description="Write an order's receipt (a child of a receipts batch).",
    example_payload={"order_id": "o-1"},
)
RECEIPTS_WRITTEN = JobBinding(
    job_type="orders.receipts-written.v1",
    message=ReceiptsWritten,
    runner=ReceiptsWrittenRunner,
    queue=Queue.DEFAULT,
    policy=Policy.EFFECT_THEN_CLAIM,
    description="Tell accounting a receipts batch is done (its callback).",
    example_payload={"batch_id": "receipts-1", "batch_total": 1},
)
ORDERS = (CONFIRM, FOLLOW_UP, RECEIPT, RECEIPTS_WRITTEN)
