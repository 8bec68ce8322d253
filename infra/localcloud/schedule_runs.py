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
Two hooks let a fault injector decide per firing: `failing` (the error of a firing whose target
delivery fails: recorded as a failed `Firing`, nothing sent) and `duplicating` (sent once more).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from .clients import Clients
from .clock import EmulatedClock
from .intrinsics import Resolver
from .stack import StackResources
from .wiring import is_deployed

SCHEDULER_PRINCIPAL = "scheduler.amazonaws.com"


@dataclass(frozen=True)
class Firing:
    group: str
    name: str
    target_arn: str
    body: str
    at: float
    ok: bool
    error: str | None = None


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
        self._clock = clock
        self._groups = groups
        self._grants = grants
        self._details: dict[tuple[str, str], dict[str, Any]] = {}  # GetSchedule, once per schedule
        self._fired: set[tuple[str, str]] = set()  # kept after firing (no DELETE): never fire again
        self.firings: list[Firing] = []
        self.duplicate_rate = 0.0
        """Chance that a firing is delivered twice (at-least-once), for chaos runs."""
        self.rng = random.Random(0)
        self.failing: Callable[[dict[str, Any]], str | None] | None = None
        """Fault hook: the error of a firing whose target delivery fails (None: delivered)."""
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
        return min((due for due, _ in self.pending()), default=None)

    def fire_due(self, now: float | None = None, duplicates: int = 0) -> list[Firing]:
        """Fire every schedule due at `now` (default: the emulated now); returns the firings. Each is sent
        `duplicates` more times, or once more with probability `duplicate_rate`."""
        moment = self._clock.now() if now is None else now
        fired: list[Firing] = []
        for due, detail in sorted(self.pending(), key=lambda pair: pair[0]):
            if due > moment:
                continue
            key = (detail["GroupName"], detail["Name"])
            extra = duplicates or int(self.duplicate_rate > 0 and self.rng.random() < self.duplicate_rate)
            extra = extra or int(self.duplicating is not None and self.duplicating(detail))
            for _ in range(1 + extra):
                fired.append(self._send(detail))
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

    def _send(self, detail: dict[str, Any]) -> Firing:
        target = detail["Target"]
        arn, body, role = target["Arn"], target.get("Input") or "{}", target.get("RoleArn", "")
        fields = {"group": detail["GroupName"], "name": detail["Name"], "target_arn": arn, "body": body}
        at = self._clock.now()
        if arn not in self._grants.get(role, frozenset()):
            error = f"role {role or '(none)'} may not sqs:SendMessage to {arn} (per the template)"
            return Firing(**fields, at=at, ok=False, error=error)
        if arn.split(":")[2] != "sqs":
            return Firing(**fields, at=at, ok=False, error="only SQS targets are emulated")
        if self.failing is not None and (error := self.failing(detail)):
            return Firing(**fields, at=at, ok=False, error=error)
        url = self._sqs.get_queue_url(QueueName=arn.rsplit(":", 1)[-1])["QueueUrl"]
        self._sqs.send_message(QueueUrl=url, MessageBody=body)
        return Firing(**fields, at=at, ok=True)

    def _list(self, group: str) -> Iterator[dict[str, Any]]:
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
