"""What a team's own resources received: each write a function made to them that the service accepted, with the
operation whose record the function was running when it made it.

The resources are those the template itself declares (not a nested application's, so never converge's own tables
and queues): its DynamoDB tables, S3 buckets, SNS topics and SQS queues, named by logical id; and e-mail, every
message SES accepted ("ses"). A botocore handler, registered for every client as the IAM check's is (iam/check.py),
sees each call once the service answered it (`after-call`): what the service refused (a failed condition, a
cancelled transaction, a denied grant) is no effect, what it accepted is one, even when the caller never hears the
answer (a lost response). A call counts only while a function of the cloud runs (`EffectLog.invocation`, which
`FunctionRuntime.invoke` opens); the pipeline's `before_record` (this log is one of the cloud's extensions) says
which operation's record is running, so a call is the effect of that operation, or of none (a producer's own
function, a recurring sweep).

    log.effects            # every Effect, in the order the services accepted them
    log.tally()            # per operation and resource: distinct items, objects and messages, and writes

Straight from each call's parameters, so nothing is read back from the services: the counts cost no API call.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections import Counter, defaultdict
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from converge.flow.extensions import Extension

from .call_hooks import register_everywhere
from .clock import EmulatedClock

EMAIL = "ses"
"""The resource every e-mail is counted under (SES has no resource of the template's to name)."""

TABLE_TYPES = frozenset({"AWS::DynamoDB::Table", "AWS::DynamoDB::GlobalTable"})
_KINDS = {
    **dict.fromkeys(TABLE_TYPES, "item"),
    "AWS::S3::Bucket": "object",
    "AWS::SNS::Topic": "publish",
    "AWS::SQS::Queue": "send",
}
MESSAGES = frozenset({"email", "publish", "send"})
"""Kinds whose every accepted call is a new unit; the others (an item, an object) are counted by their key."""
_EMAIL_CALLS = frozenset({"SendEmail", "SendRawEmail", "SendTemplatedEmail", "SendBulkTemplatedEmail", "SendBulkEmail"})


@dataclass(frozen=True)
class Effect:
    """One write a service accepted: to which resource, of what, by which call, for which operation, when."""

    resource: str
    """The template's logical id of the table, bucket, topic or queue; "ses" for an e-mail."""
    kind: str
    """"item", "object", "email", "publish" or "send"."""
    key: str | None
    """The item's key (its key attributes as JSON) or the object's key; None for a message."""
    action: str
    operation_id: str | None
    function_id: str
    at: float


@dataclass
class Tally:
    """Effects added up: per operation (None: made outside any operation) and resource, the units (distinct items
    and objects; messages) and the writes (every accepted call)."""

    units: dict[str | None, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    writes: dict[str | None, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))

    def of(self, operation_id: str | None) -> dict[str, int]:
        return dict(self.units.get(operation_id, Counter()))

    def totals(self) -> dict[str, int]:
        total: Counter[str] = Counter()
        for units in self.units.values():
            total.update(units)
        return dict(total)


@dataclass
class _Scope:
    log: EffectLog
    function_id: str
    operation_id: str | None = None


_SCOPE: ContextVar[_Scope | None] = ContextVar("localcloud_effect_scope", default=None)
_CALL = "localcloud_effect_call"
"""Where a call's parameters wait in its request context, from before the call to its answer."""


class TeamResources:
    """The template's own tables, buckets, topics and queues: their physical names to (logical id, kind)."""

    def __init__(self, deployment: Any, clients: Any) -> None:
        self.by_name: dict[str, tuple[str, str]] = {}
        self.key_names: dict[str, list[str]] = {}
        """Each table's key attributes (hash, then range), by logical id, read once when the cloud is deployed."""
        for logical_id, resource in deployment.resources.items():
            kind = _KINDS.get(resource.get("Type", ""))
            if kind is None or logical_id not in deployment.stack:
                continue
            physical = str(deployment.stack.ref(logical_id))
            if kind == "send":  # a queue is named by its URL in every call
                physical = physical.rstrip("/").rsplit("/", 1)[-1]
            self.by_name[physical] = (logical_id, kind)
            if kind == "item":
                schema = clients("dynamodb").describe_table(TableName=physical)["Table"]["KeySchema"]
                self.key_names[logical_id] = [key["AttributeName"] for key in schema]

    def named(self, name: str | None) -> tuple[str, str] | None:
        if not name:
            return None
        return self.by_name.get(name) or self.by_name.get(str(name).rstrip("/").rsplit("/", 1)[-1])

    def logical_ids(self, kind: str | None = None) -> list[str]:
        return sorted(lid for lid, k in self.by_name.values() if kind in (None, k))

    def physical(self, logical_id: str) -> str:
        """The physical name (a queue's name, a topic's ARN) of a resource the template declares, by logical id."""
        for name, (found, _) in self.by_name.items():
            if found == logical_id:
                return name
        known = self.logical_ids()
        raise KeyError(f"{logical_id!r} is none of the template's tables, buckets, topics or queues: {known}")


class EffectLog(Extension):
    """One cloud's record of the effects its functions made on the team's resources (module docstring)."""

    def __init__(self, resources: TeamResources, clock: EmulatedClock) -> None:
        self.resources = resources
        self.effects: list[Effect] = []
        self._clock = clock
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def invocation(self, function_id: str) -> Iterator[None]:
        """The calls made inside this block are `function_id`'s (a nested invocation has its own scope)."""
        token = _SCOPE.set(_Scope(self, function_id))
        try:
            yield
        finally:
            _SCOPE.reset(token)

    def clear(self) -> None:
        with self._lock:
            self.effects.clear()

    def tally(self) -> Tally:
        tally = Tally()
        seen: set[tuple[str | None, str, str]] = set()
        for effect in list(self.effects):
            tally.writes[effect.operation_id][effect.resource] += 1
            if effect.kind in MESSAGES or effect.key is None:
                tally.units[effect.operation_id][effect.resource] += 1
                continue
            unit = (effect.operation_id, effect.resource, effect.key)
            if unit not in seen:
                seen.add(unit)
                tally.units[effect.operation_id][effect.resource] += 1
        return tally

    # -- the pipeline's extension hook: which operation's record runs ---------------------------------------------

    def before_record(self, pipeline: Any, body: str, delivery: Any) -> None:
        scope = _SCOPE.get()
        if scope is not None and scope.log is self:
            scope.operation_id = _operation_of(body)

    # -- which calls are effects ---------------------------------------------------------------------------------

    def is_effect(self, service: str, operation: str, params: Mapping[str, Any]) -> bool:
        """Whether a call writes to one of the team's resources (or sends an e-mail): what the log records."""
        return bool(self._effects_of(service, operation, params, None))

    def _record(self, scope: _Scope, service: str, operation: str, params: Mapping[str, Any], answer: Any) -> None:
        found = self._effects_of(service, operation, params, answer)
        if not found:
            return
        now = self._clock.now()
        made = [
            Effect(resource, kind, key, operation, scope.operation_id, scope.function_id, now)
            for resource, kind, key in found
        ]
        with self._lock:
            self.effects.extend(made)

    def _effects_of(
        self, service: str, operation: str, params: Mapping[str, Any], answer: Any
    ) -> list[tuple[str, str, str | None]]:
        """(resource, kind, key) of each unit a call writes; `answer` (when known) drops the entries it refused."""
        if service in ("ses", "sesv2") and operation in _EMAIL_CALLS:
            return [(EMAIL, "email", None)]
        if service == "dynamodb":
            return self._items(operation, params, answer)
        if service == "s3" and operation in ("PutObject", "CopyObject", "CompleteMultipartUpload"):
            bucket = self.resources.named(params.get("Bucket"))
            return [(bucket[0], "object", str(params.get("Key")))] if bucket else []
        if service == "sns" and operation in ("Publish", "PublishBatch"):
            topic = self.resources.named(params.get("TopicArn") or params.get("TargetArn"))
            if not topic:
                return []
            entries = params.get("PublishBatchRequestEntries") or [params]
            return [(topic[0], "publish", None) for entry in entries if _succeeded(answer, entry)]
        if service == "sqs" and operation in ("SendMessage", "SendMessageBatch"):
            queue = self.resources.named(params.get("QueueUrl"))
            if not queue:
                return []
            entries = params.get("Entries") or [params]
            return [(queue[0], "send", None) for entry in entries if _succeeded(answer, entry)]
        return []

    def _items(self, operation: str, params: Mapping[str, Any], answer: Any) -> list[tuple[str, str, str | None]]:
        writes: list[tuple[str | None, Mapping[str, Any]]] = []
        if operation == "PutItem":
            writes.append((params.get("TableName"), params.get("Item") or {}))
        elif operation in ("UpdateItem", "DeleteItem"):
            writes.append((params.get("TableName"), params.get("Key") or {}))
        elif operation == "TransactWriteItems":
            for entry in params.get("TransactItems") or []:
                for verb, part in entry.items():
                    if verb in ("Put", "Update", "Delete"):
                        writes.append((part.get("TableName"), part.get("Item") or part.get("Key") or {}))
        elif operation == "BatchWriteItem":
            unprocessed = (answer or {}).get("UnprocessedItems") or {} if isinstance(answer, dict) else {}
            for table, requests in (params.get("RequestItems") or {}).items():
                for request in requests:
                    if request in unprocessed.get(table, []):
                        continue
                    put, delete = request.get("PutRequest"), request.get("DeleteRequest")
                    writes.append((table, (put or {}).get("Item") or (delete or {}).get("Key") or {}))
        found = []
        for table, item in writes:
            resource = self.resources.named(table)
            if resource is not None:
                found.append((resource[0], "item", self._key(resource[0], item)))
        return found

    def _key(self, table: str, item: Mapping[str, Any]) -> str:
        """The item's key attributes (of the table with logical id `table`) as JSON: the unit an item is counted by."""
        names = self.resources.key_names.get(table) or sorted(item)
        return json.dumps({name: item.get(name) for name in names}, sort_keys=True, default=str)


def _succeeded(answer: Any, entry: Mapping[str, Any]) -> bool:
    """A batch entry the service accepted (a single call's answer is the call's: it got here, so accepted)."""
    if not isinstance(answer, dict) or "Successful" not in answer or "Id" not in entry:
        return True
    return any(done.get("Id") == entry["Id"] for done in answer.get("Successful") or [])


def _operation_of(body: str) -> str | None:
    try:
        value = json.loads(body).get("operation_id")
    except (ValueError, AttributeError, RecursionError):
        return None
    return value if isinstance(value, str) else None


# -- botocore event handlers (every client, as moto's stub and the IAM check are registered) ------------------------


def _before_parameter_build(params: dict[str, Any], model: Any, context: dict[str, Any], **_: Any) -> None:
    scope = _SCOPE.get()
    if scope is not None:
        # Kept as given (a high-level Table's untyped values included): only key names and values are read.
        context[_CALL] = (scope, model.service_model.service_name, model.name, dict(params))


def _after_call(http_response: Any, parsed: Any, model: Any, context: dict[str, Any], **_: Any) -> None:
    call = context.pop(_CALL, None)
    if call is None or http_response is None or not 200 <= int(getattr(http_response, "status_code", 500)) < 300:
        return
    scope, service, operation, params = call
    scope.log._record(scope, service, operation, params, parsed)


_HANDLERS = (("before-parameter-build", _before_parameter_build), ("after-call", _after_call))


register_everywhere(_HANDLERS, "localcloud-effects")
