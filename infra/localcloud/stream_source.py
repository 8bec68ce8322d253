"""Emulate a Lambda DynamoDB-stream event source mapping over moto's dynamodbstreams API.

Per shard, records are read in order (describe_stream / get_shard_iterator / get_records) from the
StartingPosition, and processed one batch at a time, as Lambda does:
* FilterCriteria: records matching no filter are dropped before batching and never delivered;
* up to BatchSize matching records per invocation (in server mode a partial batch waits up to
  MaximumBatchingWindowInSeconds; `poll(flush=True)` does not wait);
* ReportBatchItemFailures: itemIdentifier is a SequenceNumber; the batch is retried from the lowest
  reported one (records before it are done); an empty or unknown identifier fails the whole batch;
* a failed invocation (exception, emulated timeout) is retried; with BisectBatchOnFunctionError the
  batch is split in two first, and splitting does not count towards MaximumRetryAttempts;
* after MaximumRetryAttempts retries, or once a record is older than MaximumRecordAgeInSeconds on the
  emulated clock, the records are skipped and an invocation record (requestContext, responseContext,
  DDBStreamBatchInfo) is sent to the on-failure destination (SQS queue or SNS topic).
"""

from __future__ import annotations

import base64
import contextlib
import uuid
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from moto.dynamodb.models import dynamodb_backends
from moto.dynamodb.models import table as moto_tables

from .clients import ACCOUNT_ID, Clients
from .clock import EmulatedClock
from .destinations import send_json, stream_invocation_record
from .functions import FunctionRuntime
from .patterns import matches_any
from .time_to_live import lambda_identity


@contextlib.contextmanager
def stamped_by(clock: EmulatedClock) -> Iterator[None]:
    """moto stamps DynamoDB's stream records (and tables) with the clock's real time rather than the system's while
    the block runs: a ticking clock's records then age as its readings do (naive UTC datetimes, as moto's own)."""
    saved = moto_tables.utcnow
    moto_tables.utcnow = lambda: datetime.fromtimestamp(clock.real(), tz=UTC).replace(tzinfo=None)
    try:
        yield
    finally:
        moto_tables.utcnow = saved


@dataclass(frozen=True)
class StreamMapping:
    logical_id: str
    function_id: str
    function_arn: str
    stream_arn: str
    batch_size: int = 100
    batching_window: float = 0
    starting_position: str = "TRIM_HORIZON"
    bisect_on_error: bool = False
    max_retry_attempts: int = -1  # -1: retry until the record expires, as on AWS
    max_record_age: int = -1
    report_batch_item_failures: bool = False
    filters: tuple[dict[str, Any], ...] = ()
    on_failure_arn: str | None = None
    enabled: bool = True


@dataclass
class _Batch:
    records: list[dict[str, Any]]
    retries: int = 0
    invocations: int = 0
    last_request_id: str | None = None
    last_error: str | None = None


@dataclass
class _Shard:
    shard_id: str
    read_position: str | None = None  # sequence number of the last record read from moto
    caught_up_at: int | None = None  # moto's record count for the shard when a read last reached its end
    pending: deque[_Batch] = field(default_factory=deque)
    waiting_since: float | None = None


@dataclass
class StreamPollResult:
    read: int = 0
    filtered: int = 0
    invocations: int = 0
    failed_invocations: int = 0
    skipped: int = 0  # records given up on (sent to the on-failure destination)

    @property
    def progressed(self) -> bool:
        return bool(self.read or self.invocations or self.skipped)


class StreamEventSource:
    def __init__(
        self, mapping: StreamMapping, clients: Clients, runtime: FunctionRuntime, clock: EmulatedClock
    ) -> None:
        self.mapping = mapping
        self._clients = clients
        self._streams = clients("dynamodbstreams")
        self._runtime = runtime
        self._clock = clock
        self._shards: dict[str, _Shard] = {}
        self._table_name = mapping.stream_arn.split(":", 6)[5].split("/")[1]  # .../table/<name>/stream/<label>

    def start(self) -> None:
        """Position every shard as the mapping's StartingPosition says (LATEST: after what exists now)."""
        for shard_id in self._shard_ids():
            if shard_id not in self._shards:
                self._new_shard(shard_id)

    def has_pending(self) -> bool:
        return any(shard.pending for shard in self._shards.values())

    def undelivered(self) -> list[dict[str, Any]]:
        """Records the function has not yet been done with: read and pending (in a batch being retried), or
        not read yet (written after the read position). Reads without moving anything."""
        found = [record for shard in self._shards.values() for batch in shard.pending for record in batch.records]
        for shard_id in self._shard_ids():
            shard = self._shards.get(shard_id)
            position = shard.read_position if shard else None
            kwargs = (
                {"ShardIteratorType": "AFTER_SEQUENCE_NUMBER", "SequenceNumber": position}
                if position is not None
                else {"ShardIteratorType": "TRIM_HORIZON"}
            )
            iterator = self._streams.get_shard_iterator(StreamArn=self.mapping.stream_arn, ShardId=shard_id, **kwargs)[
                "ShardIterator"
            ]
            while iterator:  # on along the shard's own next iterator until a read finds nothing
                page = self._streams.get_records(ShardIterator=iterator, Limit=1000)
                if not page["Records"]:
                    break
                found += [self._record(record) for record in page["Records"]]
                iterator = page.get("NextShardIterator")
        return found

    def skip_to_latest(self) -> None:
        """Drop the batches in flight and position every shard after its last record, as LATEST would
        (between runs of a test that empties the tables itself: nothing written so far is delivered)."""
        for shard_id in self._shard_ids():
            shard = self._shards.setdefault(shard_id, _Shard(shard_id))
            shard.pending.clear()
            shard.waiting_since = None
            self._read_to_end(shard)

    def poll(self, flush: bool = False) -> StreamPollResult:
        """Read new records and invoke the function with at most one batch per shard."""
        result = StreamPollResult()
        if not self.mapping.enabled:
            return result
        for shard_id in self._shard_ids():
            shard = self._shards.get(shard_id) or self._new_shard(shard_id)
            self._read(shard, result)
            if shard.pending and (flush or self._batch_is_due(shard)):
                self._process(shard, shard.pending[0], result)
        return result

    # --- reading ---
    def _new_shard(self, shard_id: str) -> _Shard:
        shard = self._shards[shard_id] = _Shard(shard_id)
        if self.mapping.starting_position == "LATEST":
            self._read_to_end(shard)
        return shard

    def _read_to_end(self, shard: _Shard) -> None:
        """Move the shard's read position after its last record, delivering nothing."""
        while True:
            if shard.read_position is None:
                kwargs = {"ShardIteratorType": "TRIM_HORIZON"}
            else:
                kwargs = {"ShardIteratorType": "AFTER_SEQUENCE_NUMBER", "SequenceNumber": shard.read_position}
            iterator = self._streams.get_shard_iterator(
                StreamArn=self.mapping.stream_arn, ShardId=shard.shard_id, **kwargs
            )["ShardIterator"]
            records = self._streams.get_records(ShardIterator=iterator, Limit=1000)["Records"]
            if not records:
                return
            shard.read_position = records[-1]["dynamodb"]["SequenceNumber"]

    def _shard_ids(self) -> list[str]:
        shard = self._moto_shard()
        if shard is not None:
            return [shard.id]  # what describe_stream would list: moto keeps one shard per stream
        description = self._streams.describe_stream(StreamArn=self.mapping.stream_arn)["StreamDescription"]
        return [shard["ShardId"] for shard in description["Shards"]]

    def _moto_shard(self) -> Any:
        """moto's shard behind the stream, read from its backend (as sqs_time reads its queues), or None: then
        the API is asked. Lambda's pollers are AWS's own; here they skip the round trips whose answer is known."""
        table = dynamodb_backends[ACCOUNT_ID][self._clients.region].tables.get(self._table_name)
        return None if table is None else table.stream_shard

    def _written(self, shard_id: str) -> int | None:
        """How many records moto holds for the shard (they only grow), or None when that is not known here."""
        shard = self._moto_shard()
        return len(shard.items) if shard is not None and shard.id == shard_id else None

    def _read(self, shard: _Shard, result: StreamPollResult) -> None:
        # One batch in flight per shard: later records wait, which keeps per-item order.
        if shard.pending and (shard.pending[0].invocations or len(shard.pending[0].records) >= self.mapping.batch_size):
            return
        written = self._written(shard.shard_id)
        if written is not None and written == shard.caught_up_at:
            return  # nothing written since a read reached the end: this one would return nothing
        if shard.read_position is None:
            kwargs = {"ShardIteratorType": "TRIM_HORIZON"}
        else:
            kwargs = {"ShardIteratorType": "AFTER_SEQUENCE_NUMBER", "SequenceNumber": shard.read_position}
        iterator = self._streams.get_shard_iterator(
            StreamArn=self.mapping.stream_arn, ShardId=shard.shard_id, **kwargs
        )["ShardIterator"]
        room = self.mapping.batch_size - (len(shard.pending[0].records) if shard.pending else 0)
        records = self._streams.get_records(ShardIterator=iterator, Limit=room)["Records"]
        # fewer than asked for: the read reached the end, past every record counted before it
        shard.caught_up_at = written if len(records) < room else None
        if not records:
            return
        result.read += len(records)
        shard.read_position = records[-1]["dynamodb"]["SequenceNumber"]
        events = [self._record(r) for r in records]
        kept = [e for e in events if not self.mapping.filters or matches_any(list(self.mapping.filters), e)]
        result.filtered += len(events) - len(kept)
        if not kept:
            return
        if shard.pending:
            shard.pending[0].records.extend(kept)
        else:
            shard.pending.append(_Batch(kept))

    def _batch_is_due(self, shard: _Shard) -> bool:
        if self.mapping.batching_window <= 0 or len(shard.pending[0].records) >= self.mapping.batch_size:
            return True
        if shard.pending[0].invocations:
            return True  # a retry does not wait for the window again
        now = self._clock.now()
        shard.waiting_since = shard.waiting_since or now
        if now - shard.waiting_since >= self.mapping.batching_window:
            shard.waiting_since = None
            return True
        return False

    # --- processing ---
    def _process(self, shard: _Shard, batch: _Batch, result: StreamPollResult) -> None:
        self._skip_expired(shard, batch, result)
        if not batch.records:
            shard.pending.popleft()
            return
        batch.invocations += 1
        batch.last_request_id = str(uuid.uuid4())
        result.invocations += 1
        try:
            response = self._runtime.invoke(
                self.mapping.function_id, {"Records": batch.records}, request_id=batch.last_request_id
            )
        except Exception as exc:
            batch.last_error = type(exc).__name__
            result.failed_invocations += 1
            self._whole_batch_failed(shard, batch, result)
            return
        failed_from = self._first_failed_index(response, batch.records)
        if failed_from is None:
            batch.last_error = "InvalidBatchItemFailures"
            result.failed_invocations += 1
            self._whole_batch_failed(shard, batch, result)
        elif failed_from >= len(batch.records):
            shard.pending.popleft()
        else:
            # Records before the first reported failure are done; retry from it.
            batch.records = batch.records[failed_from:]
            batch.last_error = "PartialBatchFailure"
            result.failed_invocations += 1
            self._count_retry(shard, batch, result)

    def _first_failed_index(self, response: Any, records: list[dict[str, Any]]) -> int | None:
        """Index of the first record to retry (len(records) if none), or None for a whole-batch failure."""
        if not self.mapping.report_batch_item_failures or not isinstance(response, dict):
            return len(records)
        failures = response.get("batchItemFailures")
        if failures is None:
            return len(records)
        if not isinstance(failures, list):
            return None
        positions = {r["dynamodb"]["SequenceNumber"]: i for i, r in enumerate(records)}
        indexes = []
        for failure in failures:
            identifier = failure.get("itemIdentifier") if isinstance(failure, dict) else None
            if not identifier or identifier not in positions:
                return None
            indexes.append(positions[identifier])
        return min(indexes, default=len(records))

    def _whole_batch_failed(self, shard: _Shard, batch: _Batch, result: StreamPollResult) -> None:
        if self.mapping.bisect_on_error and len(batch.records) > 1:
            middle = len(batch.records) // 2
            halves = [replace(batch, records=batch.records[:middle]), replace(batch, records=batch.records[middle:])]
            shard.pending.popleft()
            shard.pending.extendleft(reversed(halves))
            return
        self._count_retry(shard, batch, result)

    def _count_retry(self, shard: _Shard, batch: _Batch, result: StreamPollResult) -> None:
        batch.retries += 1
        limit = self.mapping.max_retry_attempts
        if limit >= 0 and batch.retries > limit:
            shard.pending.remove(batch)
            self._give_up(shard, batch, "RetryAttemptsExhausted", result)

    def _skip_expired(self, shard: _Shard, batch: _Batch, result: StreamPollResult) -> None:
        if self.mapping.max_record_age < 0:
            return
        now, max_age = self._clock.now(), self.mapping.max_record_age
        expired = [r for r in batch.records if now - r["dynamodb"]["ApproximateCreationDateTime"] > max_age]
        if expired:
            batch.records = [r for r in batch.records if now - r["dynamodb"]["ApproximateCreationDateTime"] <= max_age]
            skipped = replace(batch, records=expired)
            self._give_up(shard, skipped, "RecordAgeExceeded", result)

    def _give_up(self, shard: _Shard, batch: _Batch, condition: str, result: StreamPollResult) -> None:
        result.skipped += len(batch.records)
        if self.mapping.on_failure_arn:
            document = stream_invocation_record(
                records=batch.records,
                condition=condition,
                function_arn=self.mapping.function_arn,
                stream_arn=self.mapping.stream_arn,
                shard_id=shard.shard_id,
                request_id=batch.last_request_id,
                invocations=batch.invocations,
                function_error=batch.last_error,
                now=self._clock.now(),
            )
            send_json(self._clients, self.mapping.on_failure_arn, document)

    # --- shapes ---
    def _record(self, record: dict[str, Any]) -> dict[str, Any]:
        dynamodb = dict(record["dynamodb"])
        created = dynamodb.get("ApproximateCreationDateTime")
        if isinstance(created, datetime):
            # moto stamps records on the real clock (to the millisecond); ages are measured on the
            # emulated one, so add the offset that was in effect when the record was written.
            real = created.timestamp()
            dynamodb["ApproximateCreationDateTime"] = real + self._clock.offset_at(real)
        for image in ("Keys", "NewImage", "OldImage"):
            if image in dynamodb:
                dynamodb[image] = _json_safe(dynamodb[image])
        event = {
            "eventID": record["eventID"],
            "eventName": record["eventName"],
            "eventVersion": "1.1",
            "eventSource": "aws:dynamodb",
            "awsRegion": record.get("awsRegion") or self._clients.region,
            "dynamodb": dynamodb,
            "eventSourceARN": self.mapping.stream_arn,
        }
        identity = lambda_identity(record)
        if identity is not None:  # a deletion by the service (time to live): its FilterCriteria may match on it
            event["userIdentity"] = identity
        return event


def _json_safe(value: Any) -> Any:
    """boto3 decodes B/BS to bytes; Lambda events carry them base64-encoded."""
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode()
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_safe(v) for v in value]
    return value
