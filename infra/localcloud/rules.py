"""EventBridge rules and EventBridge Scheduler schedules from the template, delivered in-process.

moto stores AWS::Events::Rule but never fires schedules, and never emits the events AWS services
publish (such as SSM's "Parameter Store Change"); AWS::Scheduler::Schedule is skipped by moto's
CloudFormation altogether. The local cloud reads both from the template and delivers:
* `EventBus.put_event(event)`: to every enabled pattern rule that matches (patterns.py);
* `EventBus.fire(rule)`: a schedule's event (its Input, or the "Scheduled Event" shape).
Targets are invoked asynchronously as on AWS: an error is retried twice, then recorded, never raised.
Lambda, SQS and SNS targets are supported; InputPath and InputTransformer are not.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .clients import ACCOUNT_ID, Clients
from .clock import EmulatedClock, iso8601
from .destinations import send_json
from .patterns import matches

LOG = logging.getLogger(__name__)
ASYNC_ATTEMPTS = 3  # Lambda's asynchronous invocation: the first attempt and two retries


@dataclass(frozen=True)
class Target:
    arn: str
    input: str | None = None
    function_id: str | None = None  # set when the target is one of the template's functions


@dataclass
class EventRule:
    logical_id: str
    name: str
    arn: str
    targets: list[Target]
    schedule: str | None = None
    pattern: dict[str, Any] | None = None
    enabled: bool = True
    is_scheduler_schedule: bool = False
    next_due: float | None = field(default=None, compare=False)


@dataclass
class Delivery:
    rule_id: str
    target_arn: str
    event: Any
    ok: bool
    error: str | None = None


class EventBus:
    """The default event bus, as far as the template's rules need it."""

    def __init__(
        self,
        rules: list[EventRule],
        invoke: Callable[[str, Any], Any],
        clients: Clients,
        clock: EmulatedClock,
    ) -> None:
        self.rules = rules
        self._invoke = invoke
        self._clients = clients
        self._clock = clock
        self.deliveries: list[Delivery] = []

    @property
    def schedules(self) -> list[EventRule]:
        return [r for r in self.rules if r.schedule]

    def put_event(self, event: dict[str, Any]) -> list[Delivery]:
        """Deliver an event to every enabled pattern rule it matches."""
        delivered: list[Delivery] = []
        for rule in self.rules:
            if rule.enabled and rule.pattern is not None and matches(rule.pattern, event):
                delivered.extend(self._deliver(rule, event))
        return delivered

    def fire(self, rule: EventRule) -> list[Delivery]:
        """Deliver a schedule's event to its targets now."""
        return self._deliver(rule, None)

    def _deliver(self, rule: EventRule, event: dict[str, Any] | None) -> list[Delivery]:
        delivered = []
        for target in rule.targets:
            payload = json.loads(target.input) if target.input is not None else event
            if payload is None:
                payload = {} if rule.is_scheduler_schedule else self._scheduled_event(rule)
            delivery = self._send(rule, target, payload)
            self.deliveries.append(delivery)
            delivered.append(delivery)
        return delivered

    def _send(self, rule: EventRule, target: Target, payload: Any) -> Delivery:
        if target.function_id is not None:
            error = None
            for _attempt in range(ASYNC_ATTEMPTS):
                try:
                    self._invoke(target.function_id, payload)
                    return Delivery(rule.logical_id, target.arn, payload, ok=True)
                except Exception as exc:
                    error = f"{type(exc).__name__}: {exc}"
                    LOG.warning("rule %s -> %s failed: %s", rule.logical_id, target.function_id, error)
            return Delivery(rule.logical_id, target.arn, payload, ok=False, error=error)
        if target.arn.split(":")[2] in ("sqs", "sns"):
            send_json(self._clients, target.arn, payload)
            return Delivery(rule.logical_id, target.arn, payload, ok=True)
        return Delivery(rule.logical_id, target.arn, payload, ok=False, error="unsupported target type")

    def _scheduled_event(self, rule: EventRule) -> dict[str, Any]:
        return {
            "version": "0",
            "id": str(uuid.uuid4()),
            "detail-type": "Scheduled Event",
            "source": "aws.events",
            "account": ACCOUNT_ID,
            "time": iso8601(self._clock.now()),
            "region": self._clients.region,
            "resources": [rule.arn],
            "detail": {},
        }
