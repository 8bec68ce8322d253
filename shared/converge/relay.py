"""The outbox relay: DynamoDB stream records of new or re-dispatched operations, to SQS by queue.

Each record is validated (a raw producer may write anything): an unknown job type or an invalid
payload makes the operation REJECTED with its reason, visible and never retried forever. Valid
records go out with SendMessageBatch, ten a call; every entry SQS reports as failed becomes a
batch item failure, so the stream retries it rather than dropping it.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from converge.admission import normalized_payload
from converge.config import Settings
from converge.errors import InvalidMessage, UnknownJobType
from converge.limits import check_request_item
from converge.message import Envelope, check_identifier
from converge.observability import count, logger
from converge.operations import Operation, OperationState, OperationStore
from converge.registry import Registry

SQS_BATCH = 10


@dataclass(frozen=True)
class Outgoing:
    sequence_number: str
    queue_url: str
    envelope: Envelope


class Relay:
    def __init__(self, settings: Settings, registry: Registry, operations: OperationStore, sqs_client: Any) -> None:
        self._settings = settings
        self._registry = registry
        self._operations = operations
        self._sqs = sqs_client

    def handle(self, event: dict[str, Any]) -> dict[str, Any]:
        failed: list[str] = []
        outgoing: list[Outgoing] = []
        for record in event.get("Records", []):
            sequence = record.get("dynamodb", {}).get("SequenceNumber", "")
            try:
                item = self._outgoing(record)
            except Exception:
                logger.exception("relay could not handle a stream record", sequence_number=sequence)
                count("relay_record_error")
                failed.append(sequence)
                continue
            if item is not None:
                outgoing.append(item)
        failed += self._send(outgoing)
        return {"batchItemFailures": [{"itemIdentifier": sequence} for sequence in failed]}

    def _outgoing(self, record: dict[str, Any]) -> Outgoing | None:
        if record.get("eventName") not in ("INSERT", "MODIFY"):
            return None
        image = record.get("dynamodb", {}).get("NewImage")
        if not image or "operation_id" not in image:
            return None
        operation = Operation.from_item(image)
        if operation.state is not OperationState.ACCEPTED:
            return None
        try:
            envelope = self._validated(operation, image)
        except (InvalidMessage, UnknownJobType) as exc:
            self._reject(operation, f"{exc.__class__.__name__}: {exc}")
            return None
        binding = self._registry.get(envelope.job_type)
        if binding.queue is None:
            self._reject(
                operation, f"{binding.job_type} is a recurring job; it runs on its schedule, not from the queue"
            )
            return None
        sequence = record["dynamodb"]["SequenceNumber"]
        return Outgoing(sequence, self._settings.queue_url_for(binding.queue), envelope)

    def _validated(self, operation: Operation, image: dict[str, Any]) -> Envelope:
        check_request_item(image)  # size first: a raw item sized to make a validator slow is refused here
        check_identifier("operation_id", operation.operation_id)
        if "payload" in image and "M" not in image["payload"]:
            raise InvalidMessage("payload must be a map of primitive values")
        if operation.correlation_id is not None:
            check_identifier("correlation_id", operation.correlation_id)
        normalized_payload(self._registry, operation.job_type, operation.payload)
        return Envelope(
            operation_id=operation.operation_id,
            job_type=operation.job_type,
            payload=operation.payload,
            correlation_id=operation.correlation_id,
        )

    def _reject(self, operation: Operation, reason: str) -> None:
        logger.warning("operation rejected at relay", operation_id=operation.operation_id, reason=reason)
        count("rejected")
        self._operations.transition(operation, OperationState.REJECTED, reason, last_error=reason)

    def _send(self, outgoing: list[Outgoing]) -> list[str]:
        """Send ten a call per queue; return the sequence numbers of entries that did not go out."""
        by_queue: dict[str, list[Outgoing]] = defaultdict(list)
        for item in outgoing:
            by_queue[item.queue_url].append(item)
        failed: list[str] = []
        for queue_url, items in by_queue.items():
            for start in range(0, len(items), SQS_BATCH):
                chunk = items[start : start + SQS_BATCH]
                failed += self._send_chunk(queue_url, chunk)
        if outgoing:
            count("relayed", value=len(outgoing) - len(failed))
        return failed

    def _send_chunk(self, queue_url: str, chunk: list[Outgoing]) -> list[str]:
        entries = [
            {
                "Id": str(index),
                "MessageBody": item.envelope.to_body(),
                "MessageAttributes": {
                    "job_type": {"DataType": "String", "StringValue": item.envelope.job_type},
                    "operation_id": {"DataType": "String", "StringValue": item.envelope.operation_id},
                },
            }
            for index, item in enumerate(chunk)
        ]
        try:
            response = self._sqs.send_message_batch(QueueUrl=queue_url, Entries=entries)
        except Exception:
            logger.exception("SendMessageBatch failed; the stream will retry the whole chunk", queue_url=queue_url)
            return [item.sequence_number for item in chunk]
        failed = [chunk[int(entry["Id"])].sequence_number for entry in response.get("Failed", [])]
        if failed:
            logger.warning("SendMessageBatch reported failed entries; the stream will retry them", count=len(failed))
            count("relay_send_failed", value=len(failed))
        return failed
