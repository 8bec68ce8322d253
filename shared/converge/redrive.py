"""DLQ redrive: dead-lettered messages back to their source queue, filtered, paced and convergent.

SQS's own message-move task cannot filter and knows nothing of operations, so this moves messages
one by one: receive, decide from the stored operation, send, delete. The order is the design:
the operation is reopened *before* its message is sent (a worker that met the message first would
find it still FAILED and drop it), and the message is sent *before* it is deleted (a crash in
between leaves a copy in the DLQ, never nothing; the next run finds the operation settled and
deletes that copy, or sends a duplicate that the lease absorbs). Until a worker takes it, a
redriven operation is listed under STUCK (kind "reopened"), so one whose message never arrives is
never invisible; the reconciler sends such a one again after a while.

What is sent is the operation's stored request (checked against its state's fingerprint), through
the one dispatch function every re-dispatch uses.

Messages that stay (filtered out, disabled, UNKNOWN, REJECTED, malformed) are hidden while the run
lasts, so each is examined once, and made visible again at the end.

Messages SQS moved itself (maxReceiveCount) carry no `error_class` attribute; their error class is
`MaxReceiveCountExceeded` for the `error_classes` filter.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from converge.clock import Clock, SystemClock
from converge.config import ConfigurationError
from converge.deadletters import DlqUrls, Route, receive, release
from converge.dispatch import Dispatcher, NotRunnable, SendFailed
from converge.errors import ConvergeError, InvalidMessage, UnknownJobType
from converge.message import Envelope, describe_validation_error
from converge.observability import count, logger
from converge.operations import Operation, OperationState, OperationStore
from converge.registry import Queue, Registry, toggle_key
from converge.request import fingerprint
from converge.states import StuckKind
from converge.toggles import Toggles

if TYPE_CHECKING:
    from converge.runtime import Converge

SQS_REDRIVEN_ERROR_CLASS = "MaxReceiveCountExceeded"
"""The error class of a message SQS moved to the DLQ by itself (it has no `error_class` attribute)."""

CONVERGED = frozenset({OperationState.SUCCEEDED, OperationState.NOOP})
OPERATOR_STATES = frozenset({OperationState.UNKNOWN, OperationState.REJECTED})
TIME_MARGIN_MS = 10_000


class RedriveRequest(BaseModel):
    """What to move: a queue (or all), optional filters, and how many, how fast, for real or not."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # `converge dlq redrive` takes its defaults from here, so an empty test event means what the bare command means.
    queue: Literal["critical", "default", "bulk", "all"] = "all"
    job_types: list[str] | None = None
    error_classes: list[str] | None = None
    older_than_seconds: int | None = Field(default=None, ge=0)
    newer_than_seconds: int | None = Field(default=None, ge=0)
    operation_ids: list[str] | None = None
    max_messages: int = Field(default=100, ge=1, le=10_000)
    rate_per_second: float = Field(default=10.0, gt=0, le=1_000)
    dry_run: bool = False

    @property
    def queues(self) -> list[Queue]:
        return list(Queue) if self.queue == "all" else [Queue(self.queue)]


@dataclass
class RedriveSummary:
    dry_run: bool
    moved: int = 0
    skipped_converged: int = 0
    skipped_disabled: int = 0
    left: int = 0
    errors: int = 0
    not_matched: int = 0
    incomplete: bool = False
    details: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "moved": self.moved,
            "skipped_converged": self.skipped_converged,
            "skipped_disabled": self.skipped_disabled,
            "left": self.left,
            "errors": self.errors,
            "not_matched": self.not_matched,
            "incomplete": self.incomplete,
            "details": self.details,
        }


@dataclass
class _Run:
    request: RedriveRequest
    summary: RedriveSummary
    release: list[tuple[str, str]] = field(default_factory=list)  # (dlq url, receipt handle) to make visible
    seen: set[str] = field(default_factory=set)
    matched: int = 0
    next_send_at: float = 0.0


class Redrive:
    def __init__(
        self,
        sqs_client: Any,
        operations: OperationStore,
        toggles: Toggles,
        registry: Registry,
        routes: Mapping[Queue, Route],
        dispatcher: Dispatcher,
        clock: Clock | None = None,
        sleep: Callable[[float], None] = time.sleep,
        after_send: Callable[[dict[str, Any]], None] | None = None,
        wait_seconds: int = 1,
    ) -> None:
        """`after_send(message)` runs between send and delete (a seam for crash tests)."""
        self._sqs = sqs_client
        self._operations = operations
        self._toggles = toggles
        self._registry = registry
        self._routes = dict(routes)
        self._dispatcher = dispatcher
        self._clock = clock or SystemClock()
        self._sleep = sleep
        self._after_send = after_send
        self._wait_seconds = wait_seconds

    @classmethod
    def for_runtime(cls, converge: Converge, dlq_urls: DlqUrls, **options: Any) -> Redrive:
        """Wired from a deployment's runtime (its clients, stores, toggles, registry and clock)."""
        return cls(
            converge.clients.sqs,
            converge.operations,
            converge.toggles,
            converge.registry,
            dlq_urls.routes(converge.settings),
            converge.dispatcher,
            converge.clock,
            **options,
        )

    # -- entry points ----------------------------------------------------------------------------------------

    def handle(self, event: Any, remaining_ms: Callable[[], int] | None = None) -> dict[str, Any]:
        """The Lambda's contract: a JSON request in, a JSON summary (or {"error": ...}) out."""
        try:
            request = RedriveRequest.model_validate(event)
            return self.run(request, remaining_ms).to_json()
        except ValidationError as exc:
            return {"error": f"invalid redrive request: {describe_validation_error(exc)}"}
        except ConvergeError as exc:
            return {"error": str(exc)}

    def run(
        self,
        request: RedriveRequest,
        remaining_ms: Callable[[], int] | None = None,
        progress: Callable[[dict[str, Any]], None] | None = None,
    ) -> RedriveSummary:
        self._check(request)
        run = _Run(request, RedriveSummary(dry_run=request.dry_run))
        try:
            for queue in request.queues:
                self._drain(self._routes[queue], run, remaining_ms, progress)
        finally:
            self.release(run.release)
        logger.info("redrive finished", **{k: v for k, v in run.summary.to_json().items() if k != "details"})
        if run.summary.moved and not request.dry_run:
            count("redriven", value=run.summary.moved)
        return run.summary

    def _drain(
        self,
        route: Route,
        run: _Run,
        remaining_ms: Callable[[], int] | None,
        progress: Callable[[dict[str, Any]], None] | None,
    ) -> None:
        """Examine one DLQ's messages until it shows none, the request's cap, or the time margin."""
        while True:
            messages = self.receive(route.dlq_url, 10, self._hide_for(run.request))
            for position, message in enumerate(messages):
                out_of_time = remaining_ms is not None and remaining_ms() < TIME_MARGIN_MS
                if out_of_time or run.matched >= run.request.max_messages or message["MessageId"] in run.seen:
                    # Done (or wrapped around to messages already examined): hand the rest back untouched.
                    run.summary.incomplete = run.summary.incomplete or out_of_time
                    run.release += [(route.dlq_url, m["ReceiptHandle"]) for m in messages[position:]]
                    return
                run.seen.add(message["MessageId"])
                detail = self._one(route, message, run)
                if detail is not None and progress is not None:
                    progress(detail)
            if not messages:
                return

    def counts(self, queue: Queue) -> dict[str, int]:
        """Approximate visible and in-flight messages in a queue's DLQ."""
        attributes = self._sqs.get_queue_attributes(
            QueueUrl=self.route(queue).dlq_url,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        return {
            "visible": int(attributes.get("ApproximateNumberOfMessages", 0)),
            "in_flight": int(attributes.get("ApproximateNumberOfMessagesNotVisible", 0)),
        }

    # -- one message -----------------------------------------------------------------------------------------

    def _one(self, route: Route, message: dict[str, Any], run: _Run) -> dict[str, Any] | None:
        summary = run.summary
        base = {"queue": route.queue.value, "message_id": message["MessageId"]}
        try:
            envelope = Envelope.from_body(message.get("Body", ""))
        except InvalidMessage as exc:
            return self._stay(run, route, message, base, "error", f"malformed message: {exc}")
        base |= {"operation_id": envelope.operation_id, "job_type": envelope.job_type}
        if not self._matches(run.request, envelope, message):
            summary.not_matched += 1
            run.release.append((route.dlq_url, message["ReceiptHandle"]))
            return None
        run.matched += 1
        operation = self._operations.get(envelope.operation_id)
        if operation is not None:
            base["state"] = operation.state.value
        action, reason = verdict(operation, envelope, self._registry, self._enabled)
        if action == "delete":
            summary.skipped_converged += 1
            if run.request.dry_run:
                run.release.append((route.dlq_url, message["ReceiptHandle"]))
                return self._detail(run, base, "would delete", reason)
            self._delete(route, message)
            return self._detail(run, base, "converged", f"{reason}; deleted")
        if action != "move":
            return self._stay(run, route, message, base, action, reason)
        assert operation is not None
        if run.request.dry_run:
            summary.moved += 1
            run.release.append((route.dlq_url, message["ReceiptHandle"]))
            return self._detail(run, base, "would move", f"{operation.state.value} -> back to its queue")
        return self._move(route, message, run, base, operation, envelope)

    def _move(
        self,
        route: Route,
        message: dict[str, Any],
        run: _Run,
        base: dict[str, Any],
        operation: Operation,
        envelope: Envelope,
    ) -> dict[str, Any]:
        # Reopen first: a worker meeting the message while the operation is still FAILED would drop it.
        # Until a worker takes it, the operation is listed under STUCK, so one whose message never
        # arrives (a crash before the send) stays visible.
        if not self._reopen(operation):
            return self._stay(run, route, message, base, "left", "operation changed during the redrive; run again")
        # The stored request, unless it was overwritten: the message itself was checked against the operation.
        with contextlib.suppress(NotRunnable):
            envelope = self._dispatcher.envelope_for(operation)
        self._pace(run)
        try:
            self._dispatcher.send_one(self._dispatcher.outgoing(envelope, attributes=_resent_attributes(message)))
        except SendFailed as exc:
            return self._stay(run, route, message, base, "error", f"could not send: {exc}")
        if self._after_send is not None:
            self._after_send(message)
        # Delete only after the send: a crash in between leaves a copy here, which converges next time.
        self._delete(route, message)
        run.summary.moved += 1
        return self._detail(run, base, "moved", f"{operation.state.value} -> ACCEPTED, sent to its queue")

    def _reopen(self, operation: Operation) -> bool:
        why = "redriven from the DLQ; listed here until a worker takes it"
        if operation.state is OperationState.FAILED:
            return self._operations.transition(
                operation,
                OperationState.ACCEPTED,
                "redriven from the DLQ",
                count_redrive=True,
                stuck=(StuckKind.REOPENED, why),
            )
        # Still open (its message burned its receives): nothing to move, only to send again.
        return self._operations.mark_stuck(operation.state_record, StuckKind.REOPENED, why, count_redrive=True)

    def _enabled(self, job_type: str) -> bool:
        binding = self._registry.get(job_type)
        return self._toggles.is_enabled(binding.toggle_key, binding.default_enabled)

    def _matches(self, request: RedriveRequest, envelope: Envelope, message: dict[str, Any]) -> bool:
        if request.job_types and not (
            envelope.job_type in request.job_types or toggle_key(envelope.job_type) in request.job_types
        ):
            return False
        if request.error_classes and error_class(message) not in request.error_classes:
            return False
        if request.operation_ids and envelope.operation_id not in request.operation_ids:
            return False
        sent_ms = message.get("Attributes", {}).get("SentTimestamp")
        if sent_ms is not None and (request.older_than_seconds is not None or request.newer_than_seconds is not None):
            age = self._clock.now() - int(sent_ms) / 1000
            if request.older_than_seconds is not None and age < request.older_than_seconds:
                return False
            if request.newer_than_seconds is not None and age > request.newer_than_seconds:
                return False
        return True

    def _stay(
        self, run: _Run, route: Route, message: dict[str, Any], base: dict[str, Any], action: str, reason: str
    ) -> dict[str, Any]:
        run.release.append((route.dlq_url, message["ReceiptHandle"]))
        if action == "error":
            run.summary.errors += 1
        elif action == "disabled":
            run.summary.skipped_disabled += 1
        else:
            run.summary.left += 1
        return self._detail(run, base, action, reason)

    @staticmethod
    def _detail(run: _Run, base: dict[str, Any], action: str, reason: str) -> dict[str, Any]:
        detail = {**base, "action": action, "reason": reason}
        run.summary.details.append(detail)
        return detail

    # -- SQS -------------------------------------------------------------------------------------------------

    def receive(self, queue_url: str, count: int, hide_seconds: int) -> list[dict[str, Any]]:
        return receive(self._sqs, queue_url, count, hide_seconds, self._wait_seconds)

    def release(self, handles: list[tuple[str, str]]) -> None:
        release(self._sqs, handles)

    def _delete(self, route: Route, message: dict[str, Any]) -> None:
        self._sqs.delete_message(QueueUrl=route.dlq_url, ReceiptHandle=message["ReceiptHandle"])

    def _pace(self, run: _Run) -> None:
        """At most `rate_per_second` sends: wait (on the injected clock) until the next slot."""
        now = self._clock.now()
        if run.next_send_at > now:
            self._sleep(run.next_send_at - now)
            now = run.next_send_at
        run.next_send_at = now + 1 / run.request.rate_per_second

    @staticmethod
    def _hide_for(request: RedriveRequest) -> int:
        """Long enough that nothing received reappears during this run."""
        return min(43_200, 60 + math.ceil(request.max_messages / request.rate_per_second))

    def route(self, queue: Queue) -> Route:
        if queue not in self._routes:
            raise ConfigurationError(
                f"no DLQ URL configured for the {queue.value} queue ({queue.value.upper()}_DLQ_URL)"
            )
        return self._routes[queue]

    def _check(self, request: RedriveRequest) -> None:
        for queue in request.queues:
            self.route(queue)
        known = {binding.job_type for binding in self._registry} | {b.toggle_key for b in self._registry}
        for job_type in request.job_types or []:
            if job_type not in known:
                raise UnknownJobType(f"unknown job type {job_type!r}")


def verdict(
    operation: Operation | None, envelope: Envelope, registry: Registry, enabled: Callable[[str], bool]
) -> tuple[str, str]:
    """What redrive does with one dead letter: "move", "delete", or stay ("left", "error", "disabled"), and why."""
    if operation is None:
        return "error", "no such operation"
    if operation.state in CONVERGED:
        return "delete", f"operation already {operation.state.value}"
    if operation.state in OPERATOR_STATES:
        return "left", {
            OperationState.UNKNOWN: "outcome UNKNOWN: an operator resolves it (converge ops resolve)",
            OperationState.REJECTED: "input was REJECTED: it would fail again",
        }[operation.state]
    expected = operation.fingerprint or (operation.request.fingerprint if operation.request else None)
    if expected is not None and fingerprint(envelope.job_type, envelope.payload) != expected:
        return "error", "the message's content differs from its operation's (an identity conflict)"
    if envelope.job_type not in registry:
        return "error", f"unknown job type {envelope.job_type!r}"
    if not enabled(envelope.job_type):
        return "disabled", f"kill switch {registry.get(envelope.job_type).toggle_key} is off"
    return "move", f"{operation.state.value}: back to its queue"


def error_class(message: dict[str, Any]) -> str:
    """The worker's `error_class` attribute, or SQS_REDRIVEN_ERROR_CLASS for a message SQS moved itself."""
    attribute = message.get("MessageAttributes", {}).get("error_class", {})
    return str(attribute.get("StringValue") or SQS_REDRIVEN_ERROR_CLASS)


def _resent_attributes(message: dict[str, Any]) -> dict[str, dict[str, str]]:
    """The message's attributes as SendMessage takes them, with `redrive_count` incremented."""
    attributes: dict[str, dict[str, str]] = {}
    for name, attribute in message.get("MessageAttributes", {}).items():
        if "StringValue" in attribute:
            attributes[name] = {"DataType": attribute["DataType"], "StringValue": attribute["StringValue"]}
    previous = attributes.get("redrive_count", {}).get("StringValue", "0")
    redrives = int(previous) + 1 if previous.isdigit() else 1
    attributes["redrive_count"] = {"DataType": "Number", "StringValue": str(redrives)}
    return attributes
