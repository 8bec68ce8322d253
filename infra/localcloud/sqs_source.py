"""Emulate a Lambda SQS event source mapping by polling moto and invoking the function in-process.

Semantics kept from AWS:
* batches of up to BatchSize messages (several ReceiveMessage calls of at most 10), each receive
  hiding the messages for the queue's visibility timeout and counting a receive;
* MaximumBatchingWindowInSeconds: in server mode a partial batch waits up to the window for more
  messages; `poll(flush=True)` (used by drain) takes what is visible now;
* ReportBatchItemFailures: listed itemIdentifiers stay on the queue (they reappear when their
  visibility timeout ends), the rest are deleted; an empty, missing or unknown itemIdentifier fails
  the whole batch, as does an exception (or an emulated timeout) from the handler;
* without ReportBatchItemFailures, a successful invocation deletes the whole batch;
* maxReceiveCount: moto itself moves a message to the queue's DLQ on the receive after its
  maxReceiveCount-th, as SQS does;
* FilterCriteria: messages that match no filter are deleted without invoking the function;
* fair queues: messages of several message groups on a standard queue are served quiet groups first
  (fair_queues.py), as SQS's fair queues approximately do;
* ScalingConfig.MaximumConcurrency: read into the mapping; the local cloud runs one invocation at a
  time, so the batches in flight per mapping (one) stay within any cap AWS accepts (2 to 1000).
"""

from __future__ import annotations

import base64
import contextlib
import json
from dataclasses import dataclass
from typing import Any

from . import sqs_time
from .clients import Clients
from .clock import EmulatedClock
from .fair_queues import serve_fairly
from .functions import FunctionRuntime
from .patterns import matches_any, parse_pattern


@dataclass(frozen=True)
class SqsMapping:
    logical_id: str
    function_id: str
    queue_url: str
    queue_arn: str
    batch_size: int = 10
    batching_window: float = 0
    report_batch_item_failures: bool = False
    filters: tuple[dict[str, Any], ...] = ()
    enabled: bool = True
    maximum_concurrency: int | None = None

    @property
    def queue_name(self) -> str:
        return self.queue_arn.rsplit(":", 1)[-1]


@dataclass
class SqsPollResult:
    received: int = 0
    deleted: int = 0
    failed: int = 0
    filtered: int = 0
    invoked: bool = False


class SqsEventSource:
    def __init__(self, mapping: SqsMapping, clients: Clients, runtime: FunctionRuntime, clock: EmulatedClock) -> None:
        self.mapping = mapping
        self._sqs = clients("sqs")
        self._region = clients.region
        self._runtime = runtime
        self._clock = clock
        self._waiting_since: float | None = None

    def poll(self, flush: bool = False) -> SqsPollResult:
        """Receive one batch and invoke the function with it; returns what happened."""
        if not self.mapping.enabled or (not flush and not self._batch_is_due()):
            return SqsPollResult()
        if sqs_time.has_visible(self._region, self.mapping.queue_name) is False:
            return SqsPollResult()  # as Lambda's poller finds an empty queue, without the empty receive
        serve_fairly(self._region, self.mapping.queue_name)
        messages = self._receive_batch()
        result = SqsPollResult(received=len(messages))
        if not messages:
            return result
        messages = self._drop_filtered(messages, result)
        if not messages:
            return result
        result.invoked = True
        try:
            response = self._runtime.invoke(self.mapping.function_id, {"Records": [self._record(m) for m in messages]})
        except Exception:
            result.failed = len(messages)  # whole batch returns to the queue after its visibility timeout
            return result
        failed_ids = self._failed_ids_for(response, {m["MessageId"] for m in messages})
        if failed_ids is None:
            result.failed = len(messages)
            return result
        succeeded = [m for m in messages if m["MessageId"] not in failed_ids]
        self._delete(succeeded)
        result.deleted, result.failed = len(succeeded), len(messages) - len(succeeded)
        return result

    def _batch_is_due(self) -> bool:
        """Server mode: wait for a full batch or for the batching window, as Lambda's poller does."""
        if self.mapping.batching_window <= 0:
            return True
        attributes = self._sqs.get_queue_attributes(
            QueueUrl=self.mapping.queue_url, AttributeNames=["ApproximateNumberOfMessages"]
        )["Attributes"]
        visible = int(attributes["ApproximateNumberOfMessages"])
        if visible == 0:
            self._waiting_since = None
            return False
        if visible >= self.mapping.batch_size:
            return True
        now = self._clock.now()
        if self._waiting_since is None:
            self._waiting_since = now
        if now - self._waiting_since >= self.mapping.batching_window:
            self._waiting_since = None
            return True
        return False

    def _receive_batch(self) -> list[dict[str, Any]]:
        batch: list[dict[str, Any]] = []
        while len(batch) < self.mapping.batch_size:
            response = self._sqs.receive_message(
                QueueUrl=self.mapping.queue_url,
                MaxNumberOfMessages=min(10, self.mapping.batch_size - len(batch)),
                AttributeNames=["All"],
                MessageAttributeNames=["All"],
                WaitTimeSeconds=0,
            )
            received = response.get("Messages", [])
            if not received:
                break
            batch.extend(received)
            if sqs_time.has_visible(self._region, self.mapping.queue_name) is False:
                break  # the batch is all there is: no receive that would come back empty
        return batch

    def _drop_filtered(self, messages: list[dict[str, Any]], result: SqsPollResult) -> list[dict[str, Any]]:
        if not self.mapping.filters:
            return messages
        kept, dropped = [], []
        for message in messages:
            record = self._record(message)
            with contextlib.suppress(ValueError, RecursionError):  # a plain-text body is matched as a string
                record["body"] = json.loads(record["body"])
            (kept if matches_any(list(self.mapping.filters), record) else dropped).append(message)
        self._delete(dropped)  # Lambda deletes messages that match no filter
        result.filtered = len(dropped)
        return kept

    @staticmethod
    def _failed_ids(response: Any, batch_ids: set[str]) -> set[str] | None:
        """The message ids to keep, or None when the response fails the whole batch."""
        if response is None or not isinstance(response, dict):
            return set()
        failures = response.get("batchItemFailures")
        if failures is None:
            return set()
        if not isinstance(failures, list):
            return None
        failed: set[str] = set()
        for failure in failures:
            identifier = failure.get("itemIdentifier") if isinstance(failure, dict) else None
            if not identifier or identifier not in batch_ids:
                return None
            failed.add(identifier)
        return failed

    def _failed_ids_for(self, response: Any, batch_ids: set[str]) -> set[str] | None:
        if not self.mapping.report_batch_item_failures:
            return set()
        return self._failed_ids(response, batch_ids)

    def _delete(self, messages: list[dict[str, Any]]) -> None:
        for start in range(0, len(messages), 10):
            chunk = messages[start : start + 10]
            self._sqs.delete_message_batch(
                QueueUrl=self.mapping.queue_url,
                Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(chunk)],
            )

    def _record(self, message: dict[str, Any]) -> dict[str, Any]:
        return {
            "messageId": message["MessageId"],
            "receiptHandle": message["ReceiptHandle"],
            "body": message["Body"],
            "attributes": dict(message.get("Attributes", {})),
            "messageAttributes": {
                name: _lambda_message_attribute(value) for name, value in message.get("MessageAttributes", {}).items()
            },
            "md5OfBody": message["MD5OfBody"],
            "eventSource": "aws:sqs",
            "eventSourceARN": self.mapping.queue_arn,
            "awsRegion": self._region,
        }


def _lambda_message_attribute(value: dict[str, Any]) -> dict[str, Any]:
    """SQS API attribute shape -> the camelCase shape Lambda puts in the event."""
    converted: dict[str, Any] = {"stringListValues": [], "binaryListValues": [], "dataType": value["DataType"]}
    if "StringValue" in value:
        converted["stringValue"] = value["StringValue"]
    if "BinaryValue" in value:
        converted["binaryValue"] = base64.b64encode(value["BinaryValue"]).decode()
    return converted


def parse_filters(filter_criteria: dict[str, Any] | None) -> tuple[dict[str, Any], ...]:
    return tuple(parse_pattern(f["Pattern"]) for f in (filter_criteria or {}).get("Filters", []))
