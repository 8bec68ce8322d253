"""A meter on every AWS call made in this process: capacity units, SQS requests, API counts, time.

`Meter` patches `botocore.client.BaseClient._make_api_call` for the duration of a `with` block, so it
sees the calls of clients that handlers build on their own. Item sizes are read from moto's backend
state before and after each DynamoDB write (never through the API, so measuring adds no calls), and
the time moto spends answering is clocked separately: what is left of a handler's time is what runs
inside the Lambda (our code, Powertools, botocore), which is what "overhead" means here.
"""

from __future__ import annotations

import json
import math
import time
from collections import Counter, defaultdict, deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from botocore.client import BaseClient
from botocore.exceptions import ClientError
from moto.core.botocore_stubber import BotocoreStubber
from moto.dynamodb.models import dynamodb_backends
from moto.dynamodb.models.dynamo_type import DynamoType

from converge_bench import capacity

ACCOUNT_ID = "123456789012"  # moto's default account, as the local cloud uses
SQS_CHUNK = 64 * 1024
"""SQS bills each started 64 KB of a request's payload as one request (a batch of ten small messages is one)."""

_DDB_WRITES = {"PutItem", "UpdateItem", "DeleteItem"}


@dataclass
class Tally:
    """Totals for one party (the application and its handlers, or the platform's pollers)."""

    write_units: float = 0.0
    """Table and global secondary index write units together (both are billed as WRU)."""
    index_write_units: float = 0.0
    """Of `write_units`, those spent on global secondary indexes."""
    read_units: float = 0.0
    sqs_requests: float = 0.0
    calls: Counter[str] = field(default_factory=Counter)
    service_seconds: float = 0.0
    """Time moto spent answering: on AWS this is network and service time, not Lambda CPU."""
    item_write_units: Counter[str] = field(default_factory=Counter)
    """Table write units by item ("<table> <key>"): how hot the hottest item runs (a partition takes about 1,000
    write units a second)."""

    def add(self, other: Tally) -> None:
        self.write_units += other.write_units
        self.index_write_units += other.index_write_units
        self.read_units += other.read_units
        self.sqs_requests += other.sqs_requests
        self.calls.update(other.calls)
        self.service_seconds += other.service_seconds
        self.item_write_units.update(other.item_write_units)

    def minus(self, other: Tally) -> Tally:
        return Tally(
            self.write_units - other.write_units,
            self.index_write_units - other.index_write_units,
            self.read_units - other.read_units,
            self.sqs_requests - other.sqs_requests,
            self.calls - other.calls,
            self.service_seconds - other.service_seconds,
            self.item_write_units - other.item_write_units,
        )

    def copy(self) -> Tally:
        copied = Tally()
        copied.add(self)
        return copied


@dataclass
class Snapshot:
    application: Tally
    platform: Tally
    idle_receives: int


class Meter:
    """Counts every botocore call while active. `platform_clients` are the local cloud's own pollers."""

    def __init__(self) -> None:
        self.application = Tally()
        self.platform = Tally()
        self.idle_receives = 0
        """ReceiveMessage calls that found nothing: the poller's idle cost, independent of the job count."""
        self._platform_ids: set[int] = set()
        self._service_clock = 0.0
        self._service_cpu = 0.0
        self._active = False
        self._recording: list[tuple[tuple[str, str, str], Any]] | None = None
        self._replaying: dict[tuple[str, str, str], deque[Any]] | None = None
        self.replay_mismatches = 0
        self.item_writes: list[tuple[str, float]] | None = None
        """When a list: every item write of the application, in order (item, write units), for per-item rates."""

    def mark_platform(self, *clients: Any) -> None:
        self._platform_ids.update(id(client) for client in clients)

    def snapshot(self) -> Snapshot:
        return Snapshot(self.application.copy(), self.platform.copy(), self.idle_receives)

    def since(self, before: Snapshot) -> Snapshot:
        return Snapshot(
            self.application.minus(before.application),
            self.platform.minus(before.platform),
            self.idle_receives - before.idle_receives,
        )

    @property
    def service_clock(self) -> float:
        """Seconds spent outside the caller's code so far: moto answering, and this meter's own bookkeeping."""
        return self._service_clock

    @property
    def service_cpu(self) -> float:
        """The same, as this thread's CPU time: unlike wall time, a busy neighbour does not inflate it."""
        return self._service_cpu

    @contextmanager
    def active(self) -> Iterator[Meter]:
        original_call = BaseClient._make_api_call
        original_process = BotocoreStubber.process_request
        meter = self

        def metered_call(client: BaseClient, operation: str, params: dict[str, Any]) -> Any:
            return meter._call(original_call, client, operation, params)

        def timed_process(stubber: BotocoreStubber, request: Any) -> Any:
            if meter._replaying is not None:
                recorded = meter._replayed(request)
                if recorded is not None:
                    return recorded
            started, started_cpu = time.perf_counter(), time.thread_time()
            try:
                response = original_process(stubber, request)
                if meter._recording is not None:
                    meter._recording.append((_request_key(request), response))
                return response
            finally:
                meter._service_clock += time.perf_counter() - started
                meter._service_cpu += time.thread_time() - started_cpu

        BaseClient._make_api_call = metered_call  # type: ignore[method-assign]
        BotocoreStubber.process_request = timed_process  # type: ignore[method-assign]
        try:
            yield self
        finally:
            BaseClient._make_api_call = original_call  # type: ignore[method-assign]
            BotocoreStubber.process_request = original_process  # type: ignore[method-assign]

    # -- one call ---------------------------------------------------------------------------------------------

    # -- record and replay --------------------------------------------------------------------------------------

    @contextmanager
    def recording(self) -> Iterator[list[tuple[tuple[str, str, str], Any]]]:
        """Keep every response the emulator gives inside the block (to replay the same invocation later)."""
        self._recording = []
        try:
            yield self._recording
        finally:
            self._recording = None

    @contextmanager
    def replaying(self, recorded: list[tuple[tuple[str, str, str], Any]]) -> Iterator[None]:
        """Answer requests inside the block from `recorded` (by service and operation, in order), not from the
        emulator, and count nothing: botocore's whole client side runs, the emulator does not. A request with
        no recorded answer goes to the emulator if it is a read, else counts as a mismatch."""
        queues: dict[tuple[str, str, str], deque[Any]] = defaultdict(deque)
        for key, response in recorded:
            queues[key].append(response)
        self._replaying = queues
        try:
            yield
        finally:
            self._replaying = None

    def _replayed(self, request: Any) -> Any:
        assert self._replaying is not None
        key = _request_key(request)
        if self._replaying[key]:
            return self._replaying[key].popleft()
        if not key[2].split(".")[-1].startswith(_READS):
            self.replay_mismatches += 1
        return None

    def _call(self, original: Callable[..., Any], client: BaseClient, operation: str, params: dict[str, Any]) -> Any:
        if self._replaying is not None:
            return original(client, operation, params)  # a replay is measured, not counted
        bookkeeping, bookkeeping_cpu = time.perf_counter(), time.thread_time()
        service = client.meta.service_model.service_name
        region = client.meta.region_name or "us-east-1"
        tally = self.platform if id(client) in self._platform_ids else self.application
        tally.calls[f"{service}:{operation}"] += 1
        before = self._dynamodb_before(region, operation, params) if service == "dynamodb" else None
        # the meter's own work is not the handler's
        self._service_clock += time.perf_counter() - bookkeeping
        self._service_cpu += time.thread_time() - bookkeeping_cpu
        service_before = self._service_clock
        try:
            response = original(client, operation, params)
        except ClientError:
            if service == "dynamodb":
                tally.write_units += self._failed_write_units(operation, before)
            raise
        finally:
            tally.service_seconds += self._service_clock - service_before
        bookkeeping, bookkeeping_cpu = time.perf_counter(), time.thread_time()
        if service == "dynamodb":
            self._dynamodb_units(tally, region, operation, params, before, response)
        elif service == "sqs":
            self._sqs_requests(tally, operation, params, response)
        self._service_clock += time.perf_counter() - bookkeeping
        self._service_cpu += time.thread_time() - bookkeeping_cpu
        return response

    # -- DynamoDB -----------------------------------------------------------------------------------------------

    def _dynamodb_before(self, region: str, operation: str, params: dict[str, Any]) -> Any:
        if operation in _DDB_WRITES:
            return self._stored_item(
                region, params["TableName"], _key_of(self._table(region, params["TableName"]), params)
            )
        if operation == "TransactWriteItems":
            sizes = []
            for entry in params["TransactItems"]:
                ((kind, request),) = entry.items()
                table = self._table(region, request["TableName"])
                key = request.get("Key") or _key_from_item(table, request.get("Item", {}))
                sizes.append((kind, request["TableName"], key, self._stored_item(region, request["TableName"], key)))
            return sizes
        if operation == "BatchWriteItem":
            sizes = []
            for table_name, requests in params["RequestItems"].items():
                table = self._table(region, table_name)
                for request in requests:
                    if "PutRequest" in request:
                        key = _key_from_item(table, request["PutRequest"]["Item"])
                    else:
                        key = request["DeleteRequest"]["Key"]
                    sizes.append((table_name, key, self._stored_item(region, table_name, key)))
            return sizes
        return None

    def _dynamodb_units(
        self, tally: Tally, region: str, operation: str, params: dict[str, Any], before: Any, response: dict[str, Any]
    ) -> None:
        if operation in _DDB_WRITES:
            table = self._table(region, params["TableName"])
            key = _key_of(table, params)
            after = self._stored_item(region, params["TableName"], key)
            self._write(tally, table, before, after, key=key)
        elif operation == "TransactWriteItems":
            for _kind, table_name, key, item_before in before:
                after = self._stored_item(region, table_name, key)
                self._write(tally, self._table(region, table_name), item_before, after, transactional=True, key=key)
        elif operation == "BatchWriteItem":
            for table_name, key, item_before in before:
                table = self._table(region, table_name)
                self._write(tally, table, item_before, self._stored_item(region, table_name, key), key=key)
        elif operation == "GetItem":
            size = self._stored_size(region, params["TableName"], params["Key"])
            tally.read_units += capacity.read_units(size, consistent=bool(params.get("ConsistentRead")))
        elif operation == "BatchGetItem":
            for table_name, request in params["RequestItems"].items():
                for key in request["Keys"]:
                    size = self._stored_size(region, table_name, key)
                    tally.read_units += capacity.read_units(size, consistent=bool(request.get("ConsistentRead")))
        elif operation == "TransactGetItems":
            for entry in params["TransactItems"]:
                request = entry["Get"]
                size = self._stored_size(region, request["TableName"], request["Key"])
                tally.read_units += capacity.read_units(size, transactional=True)
        elif operation in ("Query", "Scan"):
            tally.read_units += self._query_units(region, params, response)

    def _query_units(self, region: str, params: dict[str, Any], response: dict[str, Any]) -> float:
        """Items read, summed: index entries as returned (their projection), base items from the table."""
        items = response.get("Items", [])
        consistent = bool(params.get("ConsistentRead"))
        if "IndexName" in params or ("ProjectionExpression" not in params and params.get("Select") != "COUNT"):
            sizes = [capacity.item_size(item) for item in items]
        else:
            table = self._table(region, params["TableName"])
            sizes = [self._stored_size(region, params["TableName"], _key_from_item(table, item)) for item in items]
        scanned = int(response.get("ScannedCount", len(items)))
        if scanned > len(items) and sizes:  # a filter dropped items that were still read
            sizes.append(int(sum(sizes) / len(sizes) * (scanned - len(items))))
        return capacity.query_read_units(sizes, consistent)

    def _write(
        self,
        tally: Tally,
        table: Any,
        before: dict[str, Any] | None,
        after: dict[str, Any] | None,
        transactional: bool = False,
        key: dict[str, Any] | None = None,
    ) -> None:
        """The table's units for one item write, plus what it costs its global secondary indexes."""
        units = capacity.write_units(capacity.item_size(before), capacity.item_size(after), transactional=transactional)
        tally.write_units += units
        if key is not None:
            item = f"{table.name} {json.dumps(key, sort_keys=True)}"
            tally.item_write_units[item] += units
            if self.item_writes is not None and tally is self.application:
                self.item_writes.append((item, units))
        indexes = [([key["AttributeName"] for key in index.schema], index.projection) for index in table.global_indexes]
        keys = [table.hash_key_attr] + ([table.range_key_attr] if table.range_key_attr else [])
        units = capacity.index_write_units(indexes, keys, before, after) * (2 if transactional else 1)
        tally.write_units += units
        tally.index_write_units += units

    def _failed_write_units(self, operation: str, before: Any) -> float:
        """A failed condition still consumes: sized by the item as it stands, at least 1 (2x in a transaction)."""
        if operation in _DDB_WRITES and not isinstance(before, list):
            size = capacity.item_size(before)
            return capacity.write_units(size, size)
        if operation == "TransactWriteItems" and before:
            return sum(
                capacity.write_units(capacity.item_size(item), capacity.item_size(item), transactional=True)
                for *_rest, item in before
            )
        return 0.0

    @staticmethod
    def _table(region: str, table_name: str) -> Any:
        return dynamodb_backends[ACCOUNT_ID][region].get_table(table_name)

    def _stored_size(self, region: str, table_name: str, key: dict[str, Any]) -> int:
        return capacity.item_size(self._stored_item(region, table_name, key))

    def _stored_item(self, region: str, table_name: str, key: dict[str, Any]) -> dict[str, Any] | None:
        table = self._table(region, table_name)
        hash_key = DynamoType(key[table.hash_key_attr])
        range_key = DynamoType(key[table.range_key_attr]) if table.range_key_attr else None
        item = table.get_item(hash_key, range_key)
        return item.to_json()["Attributes"] if item is not None else None

    # -- SQS ----------------------------------------------------------------------------------------------------

    def _sqs_requests(self, tally: Tally, operation: str, params: dict[str, Any], response: dict[str, Any]) -> None:
        if operation == "SendMessageBatch":
            size = sum(_message_size(entry) for entry in params.get("Entries", []))
        elif operation == "SendMessage":
            size = _message_size(params)
        elif operation == "ReceiveMessage":
            messages = response.get("Messages", [])
            if not messages:
                self.idle_receives += 1
                return
            size = sum(_message_size(message) for message in messages)
        else:
            size = 0
        tally.sqs_requests += max(1, math.ceil(size / SQS_CHUNK))


_READS = ("Get", "Describe", "List", "Query", "Scan", "Receive")


def _request_key(request: Any) -> tuple[str, str, str]:
    """What identifies a request's kind: method, host and the JSON protocol's target (or the query action)."""
    headers = request.headers
    target = headers.get("X-Amz-Target", b"") if hasattr(headers, "get") else b""
    if isinstance(target, bytes):
        target = target.decode()
    if not target:
        body = request.body.decode() if isinstance(request.body, bytes) else str(request.body or "")
        target = next((part[7:] for part in body.split("&") if part.startswith("Action=")), "")
    return request.method, request.url.split("/")[2], str(target)


def _key_of(table: Any, params: dict[str, Any]) -> dict[str, Any]:
    return params.get("Key") or _key_from_item(table, params["Item"])


def _key_from_item(table: Any, item: dict[str, Any]) -> dict[str, Any]:
    names = [table.hash_key_attr] + ([table.range_key_attr] if table.range_key_attr else [])
    return {name: item[name] for name in names}


def _message_size(message: dict[str, Any]) -> int:
    """Payload bytes SQS bills: the body plus each attribute's name, type and value."""
    size = len(str(message.get("MessageBody", message.get("Body", ""))).encode("utf-8"))
    for name, attribute in (message.get("MessageAttributes") or {}).items():
        value = attribute.get("StringValue", attribute.get("BinaryValue", b""))
        encoded = value.encode("utf-8") if isinstance(value, str) else bytes(value)
        size += len(name.encode("utf-8")) + len(attribute.get("DataType", "").encode("utf-8")) + len(encoded)
    return size
