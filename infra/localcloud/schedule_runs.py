"""One-time EventBridge Scheduler schedules created at run time, fired on the emulated clock.

moto stores schedules (CreateSchedule, GetSchedule, DeleteSchedule) but never runs them. The local
cloud fires those in the template's schedule groups whose `at(...)` time has come, as the service
does: the templated SQS target sends the schedule's Input as the message body to the target queue,
and a schedule with ActionAfterCompletion DELETE is then deleted. A schedule with no such action
is kept and never fires again, as on AWS.

The target is sent with the schedule's RoleArn, and only if that role, as the template declares it,
trusts scheduler.amazonaws.com and allows sqs:SendMessage on the target queue; otherwise the firing
fails and is recorded, as it would on AWS, so a template that forgets the grant fails here too.

Scheduler delivers at least once: `fire_due(duplicates=n)` sends each firing's message n more
times, and `redeliver(firing)` sends one again later (a late or repeated firing, for fault tests).

A firing whose delivery fails is handled as the service does with the schedule's target settings: a
retryable failure is tried again per its `RetryPolicy` (exponential backoff on the emulated clock, until
`MaximumRetryAttempts` or `MaximumEventAgeInSeconds` runs out), a permission failure is not retried, and
then the dead-letter event goes to the target's `DeadLetterConfig` queue (sent with the schedule's role,
which must be allowed to) with Scheduler's message attributes (ERROR_CODE, ERROR_MESSAGE, EXECUTION_ID,
EXHAUSTED_RETRY_CONDITION, IS_PAYLOAD_TRUNCATED, RETRY_ATTEMPTS, SCHEDULED_TIME, SCHEDULE_ARN,
TARGET_ARN). Without a DLQ the event is dropped. Tests make a delivery fail with `fail_delivery`
(a predicate on the schedule's name; every failed attempt is a `Firing` with `ok=False`).

Two hooks let a fault injector decide per firing: `failing` (the error of a firing whose target
delivery fails, as `fail_delivery` makes it fail: retried per the policy, then dead-lettered) and
`duplicating` (sent once more).
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from moto.scheduler.models import scheduler_backends

from .clients import ACCOUNT_ID, Clients
from .clock import EmulatedClock
from .intrinsics import Resolver, is_deployed
from .stack import StackResources

SCHEDULER_PRINCIPAL = "scheduler.amazonaws.com"
DEFAULT_RETRY_POLICY = {"MaximumRetryAttempts": 185, "MaximumEventAgeInSeconds": 86400}
"""The service's policy for a target that names none."""
FIRST_RETRY_SECONDS = 60.0
"""The emulated backoff: 60 s, then doubling (the service documents exponential backoff, not its steps)."""
PERMISSION_ERROR = "AccessDenied"


@dataclass(frozen=True)
class Firing:
    group: str
    name: str
    target_arn: str
    body: str
    at: float
    ok: bool
    error: str | None = None
    attempt: int = 0
    """0 for the schedule's own firing, then 1, 2, ... for the retries of a failed one."""
    error_code: str | None = None
    dead_lettered: bool = False
    """This failed attempt was the last: its dead-letter event went to the DLQ (False: retried, or dropped)."""


@dataclass(order=True)
class _Retry:
    due: float
    first_at: float = field(compare=False)
    attempt: int = field(compare=False)
    detail: dict[str, Any] = field(compare=False)


def due_time(expression: str, timezone: str | None) -> float | None:
    """When an `at(yyyy-mm-ddThh:mm:ss)` expression fires (UTC only); None for rate/cron or another zone."""
    if not expression.startswith("at(") or timezone not in (None, "UTC", "Etc/UTC"):
        return None
    return datetime.fromisoformat(expression[3:-1]).replace(tzinfo=UTC).timestamp()


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def scheduler_grants(
    resources: dict[str, dict[str, Any]], resolver: Resolver, stack: StackResources
) -> dict[str, frozenset[str]]:
    """For each role of the template that scheduler.amazonaws.com may assume: the queues it may send to."""
    grants: dict[str, frozenset[str]] = {}
    for logical_id, resource in resources.items():
        if resource.get("Type") != "AWS::IAM::Role" or not is_deployed(resource, resolver):
            continue
        props = resolver.resolve(resource.get("Properties", {}))
        trust = (props.get("AssumeRolePolicyDocument") or {}).get("Statement") or []
        services = {
            service
            for statement in _as_list(trust)
            if statement.get("Effect") == "Allow"
            for service in _as_list((statement.get("Principal") or {}).get("Service") or [])
        }
        if SCHEDULER_PRINCIPAL not in services:
            continue
        queues: set[str] = set()
        for policy in props.get("Policies") or []:
            for statement in _as_list((policy.get("PolicyDocument") or {}).get("Statement") or []):
                actions = _as_list(statement.get("Action") or [])
                if statement.get("Effect") == "Allow" and ("sqs:SendMessage" in actions or "sqs:*" in actions):
                    queues.update(str(arn) for arn in _as_list(statement.get("Resource") or []))
        grants[stack.get_att(logical_id, "Arn")] = frozenset(queues)
    return grants


def schedule_groups(resources: dict[str, dict[str, Any]], resolver: Resolver, stack: StackResources) -> list[str]:
    return [
        stack.ref(logical_id)
        for logical_id, resource in resources.items()
        if resource.get("Type") == "AWS::Scheduler::ScheduleGroup" and is_deployed(resource, resolver)
    ]


class OneTimeSchedules:
    def __init__(
        self, clients: Clients, clock: EmulatedClock, groups: list[str], grants: dict[str, frozenset[str]]
    ) -> None:
        self._scheduler = clients("scheduler")
        self._sqs = clients("sqs")
        self._region = clients.region
        self._clock = clock
        self._groups = groups
        self._grants = grants
        self._details: dict[tuple[str, str], dict[str, Any]] = {}  # GetSchedule, once per schedule
        self._fired: set[tuple[str, str]] = set()  # kept after firing (no DELETE): never fire again
        self.firings: list[Firing] = []
        self.duplicate_rate = 0.0
        """Chance that a firing is delivered twice (at-least-once), for chaos runs."""
        self.rng = random.Random(0)
        self.fail_delivery: Callable[[str], bool] = lambda name: False
        """Which schedules' deliveries fail (by name): each attempt fails, is retried, then dead-lettered."""
        self._retries: list[_Retry] = []
        self.dead_letters: list[dict[str, Any]] = []
        """The dead-letter events sent, as SendMessage requests (for tests)."""
        self.failing: Callable[[dict[str, Any]], str | None] | None = None
        """Fault hook: the error of a firing's delivery attempt that fails (None: delivered)."""
        self.duplicating: Callable[[dict[str, Any]], bool] | None = None
        """Fault hook: whether a firing is delivered twice."""

    def pending(self) -> Iterator[tuple[float, dict[str, Any]]]:
        """(due time, schedule) for every enabled one-time schedule not fired yet."""
        for group in self._groups:
            for summary in self._list(group):
                key = (group, summary["Name"])
                if key in self._fired or summary.get("State") != "ENABLED":
                    continue
                if key not in self._details:
                    self._details[key] = self._scheduler.get_schedule(Name=summary["Name"], GroupName=group)
                detail = self._details[key]
                due = due_time(detail.get("ScheduleExpression", ""), detail.get("ScheduleExpressionTimezone"))
                if due is not None:
                    yield due, detail

    def next_due(self) -> float | None:
        retries = (retry.due for retry in self._retries)
        return min([*(due for due, _ in self.pending()), *retries], default=None)

    def reset(self) -> None:
        """Forget pending retries and the failure predicate (a clean slate for the next test)."""
        self._retries.clear()
        self.fail_delivery = lambda name: False

    def fire_due(self, now: float | None = None, duplicates: int = 0) -> list[Firing]:
        """Fire every schedule due at `now` (default: the emulated now); returns the firings. Each is sent
        `duplicates` more times, or once more with probability `duplicate_rate`."""
        moment = self._clock.now() if now is None else now
        fired: list[Firing] = []
        due_retries = [retry for retry in sorted(self._retries) if retry.due <= moment]
        self._retries = [retry for retry in self._retries if retry.due > moment]
        for retry in due_retries:
            fired.append(self._attempt(retry.detail, retry.attempt, retry.first_at))
        for due, detail in sorted(self.pending(), key=lambda pair: pair[0]):
            if due > moment:
                continue
            key = (detail["GroupName"], detail["Name"])
            extra = duplicates or int(self.duplicate_rate > 0 and self.rng.random() < self.duplicate_rate)
            extra = extra or int(self.duplicating is not None and self.duplicating(detail))
            for _ in range(1 + extra):
                fired.append(self._attempt(detail, 0, moment))
            self._details.pop(key, None)
            if detail.get("ActionAfterCompletion") == "DELETE":
                self._scheduler.delete_schedule(Name=detail["Name"], GroupName=detail["GroupName"])
            else:
                self._fired.add(key)
        self.firings.extend(fired)
        return fired

    def redeliver(self, firing: Firing) -> Firing:
        """Send a past firing's message again (Scheduler's at-least-once delivery, arriving late)."""
        again = self._send(
            {
                "GroupName": firing.group,
                "Name": firing.name,
                "Target": {"Arn": firing.target_arn, "Input": firing.body, "RoleArn": self._role_for(firing)},
            }
        )
        self.firings.append(again)
        return again

    def _role_for(self, firing: Firing) -> str:
        for role, queues in self._grants.items():
            if firing.target_arn in queues:
                return role
        return ""

    def _attempt(self, detail: dict[str, Any], attempt: int, first_at: float) -> Firing:
        """One delivery attempt of a firing; a failed one is retried per the policy, then dead-lettered."""
        firing = self._send(detail, attempt)
        if firing.ok:
            return firing
        policy = {**DEFAULT_RETRY_POLICY, **(detail["Target"].get("RetryPolicy") or {})}
        now = self._clock.now()
        retry_at = now + FIRST_RETRY_SECONDS * 2**attempt
        exhausted = None
        if firing.error_code == PERMISSION_ERROR:
            exhausted = ""  # not retried: the service sends it to the DLQ at once, with no retry condition
        elif attempt >= int(policy["MaximumRetryAttempts"]):
            exhausted = "MaximumRetryAttempts"
        elif retry_at - first_at > float(policy["MaximumEventAgeInSeconds"]):
            exhausted = "MaximumEventAgeInSeconds"
        if exhausted is None:
            self._retries.append(_Retry(retry_at, first_at, attempt + 1, detail))
            return firing
        return replace(firing, dead_lettered=self._dead_letter(detail, firing, exhausted, first_at))

    def _dead_letter(self, detail: dict[str, Any], firing: Firing, exhausted: str, first_at: float) -> bool:
        """Scheduler's dead-letter event, sent with the schedule's role; False when it had nowhere to go."""
        target = detail["Target"]
        dlq = (target.get("DeadLetterConfig") or {}).get("Arn")
        if not dlq or dlq not in self._grants.get(target.get("RoleArn", ""), frozenset()):
            return False  # no DLQ, or the role may not send to it: the event is dropped, as on AWS
        attributes = {
            "ERROR_CODE": firing.error_code or "Error",
            "ERROR_MESSAGE": firing.error or "",
            "EXECUTION_ID": uuid.UUID(int=self.rng.getrandbits(128)).hex,
            "IS_PAYLOAD_TRUNCATED": "false",
            "RETRY_ATTEMPTS": str(firing.attempt),
            "SCHEDULED_TIME": datetime.fromtimestamp(first_at, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "SCHEDULE_ARN": str(detail.get("Arn") or f"schedule/{detail['GroupName']}/{detail['Name']}"),
            "TARGET_ARN": firing.target_arn,
            **({"EXHAUSTED_RETRY_CONDITION": exhausted} if exhausted else {}),
        }
        request = {
            "QueueUrl": self._sqs.get_queue_url(QueueName=dlq.rsplit(":", 1)[-1])["QueueUrl"],
            "MessageBody": firing.body,
            "MessageAttributes": {
                name: {"DataType": "String", "StringValue": value} for name, value in attributes.items()
            },
        }
        self._sqs.send_message(**request)
        self.dead_letters.append(request)
        return True

    def _send(self, detail: dict[str, Any], attempt: int = 0) -> Firing:
        target = detail["Target"]
        arn, body, role = target["Arn"], target.get("Input") or "{}", target.get("RoleArn", "")
        fields = {"group": detail["GroupName"], "name": detail["Name"], "target_arn": arn, "body": body}
        at = self._clock.now()
        if arn not in self._grants.get(role, frozenset()):
            error = f"role {role or '(none)'} may not sqs:SendMessage to {arn} (per the template)"
            return Firing(**fields, at=at, ok=False, error=error, attempt=attempt, error_code=PERMISSION_ERROR)
        if arn.split(":")[2] != "sqs":
            return Firing(**fields, at=at, ok=False, error="only SQS targets are emulated", attempt=attempt)
        error = "injected: the target's delivery failed" if self.fail_delivery(detail["Name"]) else None
        if error is None and self.failing is not None:
            error = self.failing(detail)
        if error:
            return Firing(**fields, at=at, ok=False, error=error, attempt=attempt, error_code="ServiceUnavailable")
        url = self._sqs.get_queue_url(QueueName=arn.rsplit(":", 1)[-1])["QueueUrl"]
        self._sqs.send_message(QueueUrl=url, MessageBody=body)
        return Firing(**fields, at=at, ok=True, attempt=attempt)

    def _list(self, group: str) -> Iterator[dict[str, Any]]:
        if self._none_listed(group):
            return  # what the list would say, without the round trip (the scheduler's own poller is AWS's)
        token = None
        while True:
            request: dict[str, Any] = {"GroupName": group}
            if token:
                request["NextToken"] = token
            page = self._scheduler.list_schedules(**request)
            yield from page.get("Schedules", [])
            token = page.get("NextToken")
            if not token:
                return

    def _none_listed(self, group: str) -> bool:
        """True when moto holds no schedule that list_schedules(GroupName=group) would list, read from its
        backend; False when it may hold one (then the API is asked). moto matches a group whose name is
        contained in the one asked for, and so does this."""
        try:
            groups = list(scheduler_backends[ACCOUNT_ID][self._region].schedule_groups.values())
        except (KeyError, AttributeError):
            return False
        return not any(found.schedules for found in groups if found.name in group)
