"""Shortcuts for moto's slowest paths: response encoding, transaction rollback, action lookup, template parsing.

Encoding:

moto 5.2 encodes every response by walking the botocore shape of the output, member by member,
through a chain of alias lookups. For DynamoDB item operations and stream reads the result is
already the wire document (attribute values in DynamoDB JSON), so `json.dumps` gives the same JSON
for a fraction of the cost; on the chaos workload that is about a third of the local cloud's time
per job. Only the operations listed below take the shortcut; timestamps are written as moto writes
them (epoch seconds, truncated to the millisecond), and anything `json` cannot encode as is (binary
attributes) goes the slow way. `verify=True` encodes both ways and raises on any difference.

Transactions: moto backs up every table a TransactWriteItems touches with a deep copy of the whole
table (items, indexes, stream records) before applying it, so each credit of the ledger costs time
proportional to the ledger's size (0.3 s per credit after a few thousand). The shortcut backs up
only the items the transaction names and puts exactly those back when it is cancelled, and drops the
stream records the cancelled part wrote (moto's whole-table copy restores those too: a cancelled
transaction must leave nothing on a table's stream for the relay to dispatch).

Action lookup: for every request moto lists the response class's functions (`inspect.getmembers`, most of a
millisecond) to check that the action has a method; the shortcut lists each class once.

Error shapes: moto builds the table of a service's error shapes (some milliseconds) for every error it answers, since
it makes a new cache each time; the shortcut keeps one table per service.

Templates: moto parses every template body with PyYAML's pure-Python loader, though the local cloud sends
JSON (`json.dumps` of the translated template): about 0.2 s for converge's application, on each create and
update of its stack. JSON is read as JSON; anything else (or JSON that does not parse) goes to moto's YAML loader.
`verify=True` parses both ways and raises on any difference. The local cloud always deploys this way
(`json_templates`); `fast_moto` adds it to the other shortcuts.

The response encoding, transaction, action-lookup and error-shape shortcuts are opt-in (`fast_moto`: the test suite and
the chaos run use them).

Verified against moto 5.2 (the `local` extra pins that minor version): the shortcuts reach into
moto's internals, so a new minor version is verified (`verify=True`, tests/localcloud) before the pin moves.
"""

from __future__ import annotations

import calendar
import contextlib
import copy
import functools
import json
import types
from collections.abc import Iterator
from datetime import datetime
from typing import Any

from moto.cloudformation import models as cloudformation_models
from moto.core import errors as core_errors
from moto.core import responses as core_responses
from moto.dynamodb import models as dynamodb_models
from moto.dynamodb.models.dynamo_type import DynamoType

SHORTCUTS = {
    "dynamodb": frozenset({"GetItem", "PutItem", "UpdateItem", "Query", "Scan", "TransactWriteItems"}),
    "dynamodbstreams": frozenset({"GetRecords"}),
}
CONTENT_TYPE = "application/x-amz-json-1.0"


class EncodingMismatch(AssertionError):
    """The shortcut and moto's own serializer disagree on a response."""


class TemplateMismatch(AssertionError):
    """A template body read as JSON differs from moto's own reading of it."""


def _timestamp(value: Any) -> Any:
    if isinstance(value, datetime):
        seconds = calendar.timegm(value.utctimetuple())
        return seconds + (value.microsecond // 1000) / 1000.0 if value.microsecond else seconds
    raise TypeError(f"{type(value).__name__} is left to moto")


def _shortcut(original: Any, verify: bool) -> Any:
    def execute_result(self: Any, context: Any) -> Any:
        service = context.service_model.service_name
        if context.operation_model.name not in SHORTCUTS.get(service, ()) or not isinstance(self.result, dict):
            return original(self, context)
        try:
            body = json.dumps(self.result, default=_timestamp)
        except TypeError:  # binary attributes: leave their encoding to moto
            return original(self, context)
        if verify:
            status, _, expected = original(self, context)
            if status != 200 or json.loads(expected) != json.loads(body):
                raise EncodingMismatch(f"{context.operation_model.name}: {expected[:300]} != {body[:300]}")
        return 200, {"Content-Type": CONTENT_TYPE}, body

    return execute_result


def _no_table_copies(value: Any, memo: Any = None) -> Any:
    """`copy.deepcopy` for moto's transaction code: a Table is not copied (its items are backed up instead)."""
    return value if isinstance(value, dynamodb_models.Table) else copy.deepcopy(value, memo)


def _item_backups(backend: Any, transact_items: list[dict[str, Any]]) -> list[tuple[Any, Any, Any, Any]]:
    backups = []
    for entry in transact_items:
        _, op = next(iter(entry.items()))
        table = backend.tables.get(op.get("TableName"))
        key = op.get("Key") or op.get("Item")
        if table is None or not isinstance(key, dict) or table.hash_key_attr not in key:
            continue
        hash_value = DynamoType(key[table.hash_key_attr])
        range_value = DynamoType(key[table.range_key_attr]) if table.range_key_attr in key else None
        if table.has_range_key and range_value is None:
            continue
        current = table.get_item(hash_value, range_value)
        backups.append((table, hash_value, range_value, copy.deepcopy(current)))
    return backups


def _stream_lengths(backups: list[tuple[Any, Any, Any, Any]]) -> dict[int, tuple[Any, int]]:
    """How many records each touched table's stream held before the transaction (tables without one: none)."""
    streams = {}
    for table, *_ in backups:
        shard = getattr(table, "stream_shard", None)
        if shard is not None:
            streams[id(shard)] = (shard, len(shard.items))
    return streams


def _put_back(backups: list[tuple[Any, Any, Any, Any]]) -> None:
    for table, hash_value, range_value, item in reversed(backups):
        if table.has_range_key:
            if item is None:
                table.items[hash_value].pop(range_value, None)
            else:
                table.items[hash_value][range_value] = item
        elif item is None:
            table.items.pop(hash_value, None)
        else:
            table.items[hash_value] = item


def _transactions(original: Any) -> Any:
    def transact_write_items(self: Any, transact_items: list[dict[str, Any]]) -> None:
        backups = _item_backups(self, transact_items)
        streams = _stream_lengths(backups)
        try:
            original(self, transact_items)
        except BaseException:
            _put_back(backups)
            for shard, length in streams.values():
                del shard.items[length:]
            raise

    return transact_write_items


def _json_first(original: Any, verify: bool) -> Any:
    def parse_template(template: str) -> dict[str, Any]:
        if not isinstance(template, str) or not template.lstrip().startswith("{"):
            return original(template)  # type: ignore[no-any-return]
        try:
            parsed = json.loads(template)
        except ValueError:
            return original(template)  # type: ignore[no-any-return]
        if verify and original(template) != parsed:
            raise TemplateMismatch(f"a template reads differently as JSON: {template[:300]}")
        return parsed  # type: ignore[no-any-return]

    parse_template.json_first = True  # type: ignore[attr-defined]
    return parse_template


@contextlib.contextmanager
def json_templates(verify: bool = False) -> Iterator[None]:
    """moto reads a JSON template body as JSON (its YAML loader takes about 0.2 s for the largest). Inside a block
    that already does so, nothing changes: an outer `verify=True` stays in force for the deployments within it."""
    stack = cloudformation_models.Stack
    saved = stack.__dict__["parse_template"]
    if getattr(saved.__func__, "json_first", False):
        yield
        return
    stack.parse_template = staticmethod(_json_first(saved.__func__, verify))  # type: ignore[method-assign,assignment]
    try:
        yield
    finally:
        stack.parse_template = saved  # type: ignore[method-assign]


def _error_tables(original: Any) -> Any:
    tables: dict[str, Any] = {}

    def for_service(self: Any, service_model: Any) -> Any:
        service_id = service_model.metadata.get("serviceId")
        if service_id is None:
            return original(self, service_model)
        if service_id not in tables:
            tables[service_id] = original(self, service_model)
        return tables[service_id]

    return for_service


@contextlib.contextmanager
def fast_moto(verify: bool = False) -> Iterator[None]:
    """Every shortcut above at once (`verify=True`: the encoding and the templates checked against moto's own)."""
    saved_names, saved_tables = core_responses.method_names_from_class, core_errors.ErrorLookupFactory.for_service
    core_responses.method_names_from_class = functools.cache(saved_names)
    core_errors.ErrorLookupFactory.for_service = _error_tables(saved_tables)  # type: ignore[method-assign]
    try:
        with fast_dynamodb_responses(verify), json_templates(verify):
            yield
    finally:
        core_responses.method_names_from_class = saved_names
        core_errors.ErrorLookupFactory.for_service = saved_tables  # type: ignore[method-assign]


@contextlib.contextmanager
def fast_dynamodb_responses(verify: bool = False) -> Iterator[None]:
    result = core_responses.ActionResult  # DynamoDB's DynamoResult and the streams' results use its encoder
    backend = dynamodb_models.DynamoDBBackend
    saved, saved_transact, saved_copy = result.execute_result, backend.transact_write_items, dynamodb_models.copy
    result.execute_result = _shortcut(saved, verify)  # type: ignore[method-assign]
    backend.transact_write_items = _transactions(saved_transact)  # type: ignore[method-assign]
    dynamodb_models.copy = types.SimpleNamespace(deepcopy=_no_table_copies)  # type: ignore[assignment]
    try:
        yield
    finally:
        result.execute_result = saved  # type: ignore[method-assign]
        backend.transact_write_items = saved_transact  # type: ignore[method-assign]
        dynamodb_models.copy = saved_copy
