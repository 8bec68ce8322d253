"""Turn SSM Parameter Store changes into EventBridge "Parameter Store Change" events.

moto emits no events, so the local cloud polls describe_parameters and compares each parameter's
Version with the previous poll: any client's put-parameter or delete-parameter (a test's boto3, the
AWS CLI against the server) is seen, not only the local cloud's own writes. The first poll is the
baseline and emits nothing, like a rule created after the parameters existed.
"""

from __future__ import annotations

import uuid
from typing import Any

from moto.ssm.models import ssm_backends

from .clients import ACCOUNT_ID, Clients
from .clock import EmulatedClock, iso8601


class ParameterChangeDetector:
    def __init__(self, clients: Clients, clock: EmulatedClock) -> None:
        self._ssm = clients("ssm")
        self._region = clients.region
        self._clock = clock
        self._known: dict[str, tuple[int, str]] | None = None
        self._seen: object = None  # moto's parameters as the last poll found them (see _peek)

    def _snapshot(self) -> dict[str, tuple[int, str]]:
        found: dict[str, tuple[int, str]] = {}
        for page in self._ssm.get_paginator("describe_parameters").paginate():
            for parameter in page["Parameters"]:
                found[parameter["Name"]] = (int(parameter.get("Version", 1)), parameter.get("Type", "String"))
        return found

    def start(self) -> None:
        self._seen = self._peek()
        self._known = self._snapshot()

    def _peek(self) -> object:
        """Each parameter's latest version and type, read from moto's backend (None where that cannot be read):
        while it stays as the last poll found it, describe_parameters would list the same, so no poll asks."""
        try:
            stored = ssm_backends[ACCOUNT_ID][self._region]._parameters
            return frozenset(
                (name, versions[-1].version, versions[-1].parameter_type)
                for name, versions in list(stored.items())
                if versions
            )
        except (KeyError, AttributeError):
            return None

    def poll(self) -> list[dict[str, Any]]:
        """Events for every create, update and delete since the previous poll (name order)."""
        seen = self._peek()
        if seen is not None and seen == self._seen:  # before the first poll or start(), _seen is None
            return []
        current = self._snapshot()
        self._seen = seen
        if self._known is None:
            self._known = current
            return []
        events = []
        for name in sorted(set(current) | set(self._known)):
            before, after = self._known.get(name), current.get(name)
            if before == after:
                continue
            if before is None:
                operation = "Create"
            elif after is None:
                operation = "Delete"
            else:
                operation = "Update"
            events.append(self._event(name, operation, (after or before)[1]))  # type: ignore[index]
        self._known = current
        return events

    def _event(self, name: str, operation: str, parameter_type: str) -> dict[str, Any]:
        path = name if name.startswith("/") else f"/{name}"
        return {
            "version": "0",
            "id": str(uuid.uuid4()),
            "detail-type": "Parameter Store Change",
            "source": "aws.ssm",
            "account": ACCOUNT_ID,
            "time": iso8601(self._clock.now()),
            "region": self._region,
            "resources": [f"arn:aws:ssm:{self._region}:{ACCOUNT_ID}:parameter{path}"],
            "detail": {"operation": operation, "name": name, "type": parameter_type, "description": ""},
        }
