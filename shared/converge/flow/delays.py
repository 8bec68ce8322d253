"""Delayed dispatch: how a SCHEDULED operation's message waits for its run_at, costing nothing meanwhile.

A wait within SQS's limit (900 s) rides the message's own DelaySeconds. A longer one is a one-time
EventBridge Scheduler schedule, `at(...)` in UTC, rounded up to the second so it never fires early,
deleted by the service after it fires (ActionAfterCompletion DELETE); its target sends the message
to the job's queue with the scheduler role, which may do only that. The schedule is named after the
operation, so a relay that retries after a crash finds it already there (ConflictException) and
never creates a second one. A schedule that fires twice, late, or after a cancel delivers a copy
the worker's lease turns into a no-op: a settled (or cancelled) operation is never started again.

A firing whose delivery fails is retried by Scheduler (`RETRY_POLICY`), then put on the schedules' DLQ
(`DeadLetterConfig`), which the reconciler reads: a dropped firing leaves a trace and is sent again.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from converge.flow.dispatch import Dispatcher, Outgoing
from converge.flow.registry import Queues
from converge.model.clock import Clock, SystemClock
from converge.model.errors import ConfigurationError, error_code
from converge.model.timing import SQS_MAX_DELAY_SECONDS
from converge.observability import count, logger

SCHEDULE_PREFIX = "converge-op-"
RETRY_POLICY = {"MaximumRetryAttempts": 5, "MaximumEventAgeInSeconds": 900}
"""How long Scheduler retries a firing it could not deliver before it dead-letters it. The target is one SQS
SendMessage: what a retry can fix (throttling, a passing SQS fault) is fixed within minutes, and what it
cannot (the role, a deleted queue) goes to the DLQ at once whatever the policy. The service's default (185
attempts over 24 h) would leave a due job silently late for a day; after 15 minutes the DLQ hands it to the
reconciler, which sends it again on its next run (`converge.operate.overdue.OVERDUE_GRACE_SECONDS` counts this)."""


class Route(StrEnum):
    NOW = "now"
    MESSAGE_DELAY = "message delay"
    SCHEDULE = "one-time schedule"


def route(run_at: float, now: float) -> Route:
    """How a request due at `run_at` waits (a pure function of the two times)."""
    delay = math.ceil(run_at - now)
    if delay <= 0:
        return Route.NOW
    return Route.MESSAGE_DELAY if delay <= SQS_MAX_DELAY_SECONDS else Route.SCHEDULE


def schedule_name(operation_id: str) -> str:
    """The one schedule an operation may have: a name derived from its id (within Scheduler's 64 characters)."""
    return SCHEDULE_PREFIX + hashlib.sha256(operation_id.encode()).hexdigest()[:40]


def at_expression(run_at: float) -> str:
    """Scheduler's one-time expression, rounded up to the second (it never fires before run_at)."""
    moment = datetime.fromtimestamp(math.ceil(run_at), tz=UTC)
    return f"at({moment.year:04d}" + moment.strftime("-%m-%dT%H:%M:%S") + ")"


@dataclass(frozen=True)
class Schedules:
    """Where a delayed operation's one-time schedule goes: its group, the role it sends with, its DLQ."""

    group: str | None = None
    role_arn: str | None = None
    dlq_arn: str | None = None


class DelayedDispatch:
    def __init__(
        self,
        schedules: Schedules,
        queues: Queues,
        dispatcher: Dispatcher,
        scheduler_client: Callable[[], Any],
        clock: Clock | None = None,
    ) -> None:
        self._schedules = schedules
        self._queues = queues
        self._dispatcher = dispatcher
        self._scheduler = scheduler_client  # built on first use: only a long delay or a cancel needs it
        self._clock = clock or SystemClock()

    def route(self, run_at: float) -> Route:
        return route(run_at, self._clock.now())

    def send(self, outgoing: Outgoing, run_at: float) -> Route:
        """Send now, with a message delay, or through a one-time schedule; raise if it did not go out."""
        now = self._clock.now()
        how = route(run_at, now)
        if how is Route.SCHEDULE:
            self._create_schedule(outgoing, run_at)
        else:
            delay = math.ceil(run_at - now) if how is Route.MESSAGE_DELAY else 0
            self._dispatcher.send_one(replace(outgoing, delay_seconds=delay))
        count("delayed", value=1)
        return how

    def _create_schedule(self, outgoing: Outgoing, run_at: float) -> None:
        group, role, dead_letters = self._schedules.group, self._schedules.role_arn, self._schedules.dlq_arn
        if not group or not role or not dead_letters or outgoing.queue is None:
            raise ConfigurationError(
                "a delay beyond 900 s needs SCHEDULE_GROUP, SCHEDULER_ROLE_ARN and SCHEDULE_DLQ_ARN"
            )
        name = schedule_name(outgoing.envelope.operation_id)
        try:
            self._scheduler().create_schedule(
                Name=name,
                GroupName=group,
                ScheduleExpression=at_expression(run_at),
                ScheduleExpressionTimezone="UTC",
                FlexibleTimeWindow={"Mode": "OFF"},
                ActionAfterCompletion="DELETE",
                State="ENABLED",
                Description=f"converge: dispatch {outgoing.envelope.job_type} at its run_at",
                Target={
                    "Arn": self._queues.arn(outgoing.queue),
                    "RoleArn": role,
                    "Input": outgoing.envelope.to_body(),
                    "RetryPolicy": dict(RETRY_POLICY),
                    "DeadLetterConfig": {"Arn": dead_letters},
                },
            )
        except Exception as exc:
            if error_code(exc) != "ConflictException":
                raise
            logger.info("the operation's schedule exists already (a retried dispatch)", schedule=name)

    def forget(self, operation_id: str) -> bool:
        """Delete an operation's schedule (a cancel); False when it has none (fired, or never made)."""
        if not self._schedules.group:
            return False
        try:
            self._scheduler().delete_schedule(Name=schedule_name(operation_id), GroupName=self._schedules.group)
        except Exception as exc:
            if error_code(exc) == "ResourceNotFoundException":
                return False
            raise
        return True
