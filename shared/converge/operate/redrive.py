"""DLQ redrive: dead-lettered messages back to their source queue, filtered, paced and convergent.

This is the DLQ adapter; what happens to each message is decided in `converge.redrive_decision`
from plain values. SQS's own message-move task cannot filter and knows nothing of operations, so
this moves messages one by one: receive, decide from the stored operation, send, delete. The order
is the design: the operation is reopened *before* its message is sent (a worker that met the
message first would find it still FAILED and drop it), and the message is sent *before* it is
deleted (a crash in between leaves a copy in the DLQ, never nothing; the next run finds the
operation settled and deletes that copy, or sends a duplicate that the lease absorbs). Until a
worker takes it, a redriven operation is listed under STUCK (kind "reopened"), so one whose message
never arrives is never invisible; the reconciler sends such a one again after a while.

What is sent is the operation's stored request (checked against its state's fingerprint), through
the one dispatch function every re-dispatch uses.

Messages that stay (filtered out, disabled, UNKNOWN, REJECTED, malformed) are hidden while the run
lasts, so each is examined once, and made visible again at the end.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from converge.flow.dispatch import Dispatcher
from converge.flow.registry import Queue, Registry
from converge.flow.toggles import Toggles
from converge.model.clock import Clock, SystemClock
from converge.model.envelope import Envelope
from converge.model.errors import (
    ConfigurationError,
    ConvergeError,
    InvalidMessage,
    NotRunnable,
    SendFailed,
    UnknownJobType,
)
from converge.model.records import Operation
from converge.model.states import OperationState, StuckKind
from converge.observability import count, logger
from converge.operate.deadletters import DlqRoute, receive, release
from converge.operate.redrive_decision import (
    Action,
    RedriveRequest,
    RedriveSummary,
    decide,
    matches,
    resent_attributes,
)
from converge.screening.message import describe_validation_error, read_envelope
from converge.store.operations import OperationStore

TIME_MARGIN_MS = 10_000


@dataclass
class _Run:
    request: RedriveRequest
    summary: RedriveSummary
    release: list[tuple[str, str]] = field(default_factory=list)  # (dlq url, receipt handle) to make visible
    seen: set[str] = field(default_factory=set)
    matched: int = 0
    next_send_at: float = 0.0
    enabled: dict[str, bool] = field(default_factory=dict)  # each job's kill switch, read once a run


class Redrive:
    def __init__(
        self,
        sqs_client: Any,
        operations: OperationStore,
        toggles: Toggles,
        registry: Registry,
        routes: Mapping[Queue, DlqRoute],
        dispatcher: Dispatcher,
        clock: Clock | None = None,
        sleep: Callable[[float], None] = time.sleep,
        after_send: Callable[[dict[str, Any]], None] | None = None,
        wait_seconds: int = 1,
        actor: str | None = None,
    ) -> None:
        """`after_send(message)` runs between send and delete (a seam for crash tests); `actor` is who
        a reopened operation's history names when the request names nobody."""
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
        self._actor = actor

    # -- entry points ----------------------------------------------------------------------------------------

    def handle(self, event: Any, context: Any = None) -> dict[str, Any]:
        """The redrive function's contract: a JSON request in, a JSON summary (or {"error": ...}) out, within the
        invocation's time (`context`: the Lambda context; None: no deadline)."""
        remaining_ms = context.get_remaining_time_in_millis if context is not None else None
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
        route: DlqRoute,
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

    def _one(self, route: DlqRoute, message: dict[str, Any], run: _Run) -> dict[str, Any] | None:
        summary = run.summary
        base = {"queue": route.queue.value, "message_id": message["MessageId"]}
        try:
            envelope = read_envelope(message.get("Body", ""))
        except InvalidMessage as exc:
            return self._stay(run, route, message, base, "error", f"malformed message: {exc}")
        base |= {"operation_id": envelope.operation_id, "job_type": envelope.job_type}
        if not matches(run.request, envelope, message, self._clock.now()):
            summary.not_matched += 1
            run.release.append((route.dlq_url, message["ReceiptHandle"]))
            return None
        run.matched += 1
        operation = self._operations.get(envelope.operation_id)
        if operation is not None:
            base["state"] = operation.state.value
        binding = self._registry.get(envelope.job_type) if envelope.job_type in self._registry else None
        enabled = self._enabled(run, envelope.job_type) if binding is not None else None
        decision = decide(operation, envelope, binding, enabled, self._clock.now())
        if decision.action in (Action.DELETE, Action.SUPERSEDED):
            stale = decision.action is Action.DELETE
            if stale:
                summary.skipped_converged += 1
            else:
                summary.superseded += 1
            if run.request.dry_run:
                run.release.append((route.dlq_url, message["ReceiptHandle"]))
                return self._detail(run, base, "would delete", decision.reason)
            self._delete(route, message)
            if not stale:
                logger.info("an early copy deleted: its operation's own delivery is still to come", **base)
            return self._detail(run, base, "converged" if stale else "superseded", f"{decision.reason}; deleted")
        if decision.action is not Action.MOVE:
            return self._stay(run, route, message, base, decision.action.value, decision.reason)
        assert operation is not None
        if run.request.dry_run:
            summary.moved += 1
            run.release.append((route.dlq_url, message["ReceiptHandle"]))
            return self._detail(run, base, "would move", f"{operation.state.value} -> back to its queue")
        return self._move(route, message, run, base, operation, envelope)

    def _move(
        self,
        route: DlqRoute,
        message: dict[str, Any],
        run: _Run,
        base: dict[str, Any],
        operation: Operation,
        envelope: Envelope,
    ) -> dict[str, Any]:
        # Reopen first: a worker meeting the message while the operation is still FAILED would drop it.
        # Until a worker takes it, the operation is listed under STUCK, so one whose message never
        # arrives (a crash before the send) stays visible.
        if not self._reopen(operation, run.request.actor or self._actor):
            return self._stay(run, route, message, base, "left", "operation changed during the redrive; run again")
        # The stored request, unless it was overwritten: the message itself was checked against the operation.
        with contextlib.suppress(NotRunnable):
            envelope = self._dispatcher.envelope_for(operation)
        self._pace(run)
        try:
            self._dispatcher.send_one(self._dispatcher.outgoing(envelope, attributes=resent_attributes(message)))
        except SendFailed as exc:
            return self._stay(run, route, message, base, "error", f"could not send: {exc}")
        if self._after_send is not None:
            self._after_send(message)
        # Delete only after the send: a crash in between leaves a copy here, which converges next time.
        self._delete(route, message)
        run.summary.moved += 1
        return self._detail(run, base, "moved", f"{operation.state.value} -> ACCEPTED, sent to its queue")

    def _reopen(self, operation: Operation, actor: str | None) -> bool:
        by = f"redriven from the DLQ by {actor or 'the redrive function'}"
        why = f"{by}; listed here until a worker takes it"
        if operation.state is OperationState.FAILED:
            return self._operations.state.transition(
                operation,
                OperationState.ACCEPTED,
                by,
                count_redrive=True,
                stuck=(StuckKind.REOPENED, why),
            )
        # Still open (its message burned its receives): nothing to move, only to send again.
        return self._operations.state.mark_stuck(operation.state_record, StuckKind.REOPENED, why, count_redrive=True)

    def _enabled(self, run: _Run, job_type: str) -> bool:
        if job_type not in run.enabled:
            binding = self._registry.get(job_type)
            run.enabled[job_type] = self._toggles.is_enabled(binding.toggle_key, binding.default_enabled)
        return run.enabled[job_type]

    def _stay(
        self, run: _Run, route: DlqRoute, message: dict[str, Any], base: dict[str, Any], action: str, reason: str
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

    def _delete(self, route: DlqRoute, message: dict[str, Any]) -> None:
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

    def route(self, queue: Queue) -> DlqRoute:
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
