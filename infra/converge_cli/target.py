"""Which deployment a command talks to: AWS (names from the stack's outputs) or a local endpoint."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

from converge.aws import Clients
from converge.config import Settings
from converge.registry import load_catalogue
from converge.runtime import Converge


class TargetError(Exception):
    """The deployment cannot be found or reached; the message says what to do."""


LOCAL_CREDENTIALS = {"aws_access_key_id": "local", "aws_secret_access_key": "local"}

OUTPUT_SETTINGS = {
    "JobsTableName": "JOBS_TABLE",
    "MarkersTableName": "MARKERS_TABLE",
    "StateTableName": "STATE_TABLE",
    "ConflictIndexName": "CONFLICT_INDEX",
    "TogglePrefix": "TOGGLE_PREFIX",
    "CriticalQueueUrl": "CRITICAL_QUEUE_URL",
    "DefaultQueueUrl": "DEFAULT_QUEUE_URL",
    "BulkQueueUrl": "BULK_QUEUE_URL",
    "AttentionIndexName": "ATTENTION_INDEX",
}


def settings_from_outputs(outputs: dict[str, str], catalogue: str = "catalogue") -> Settings:
    """converge's settings for a deployed stack, from its outputs (as the template sets them for functions)."""
    env = {name: outputs[key] for key, name in OUTPUT_SETTINGS.items() if key in outputs}
    prefix = env.get("TOGGLE_PREFIX", "/converge/dev/toggles")
    env.setdefault("CONVERGE_STAGE", prefix.strip("/").split("/")[1] if prefix.count("/") >= 2 else "dev")
    env["CONVERGE_CATALOGUE"] = catalogue
    return Settings.from_env(env)


@dataclass
class Target:
    stack: str = "converge"
    endpoint_url: str | None = None
    region: str | None = None
    catalogue: str = "catalogue"
    _clients: dict[str, Any] = field(default_factory=dict)

    @cached_property
    def session(self) -> boto3.session.Session:
        if self.endpoint_url:
            # A local cloud accepts any credentials; do not require a configured profile for it.
            session = boto3.session.Session(region_name=self.region or "us-east-1", **LOCAL_CREDENTIALS)
        else:
            session = boto3.session.Session(region_name=self.region)
        return session

    def client(self, service: str) -> Any:
        if service not in self._clients:
            self._clients[service] = self.session.client(
                service,
                endpoint_url=self.endpoint_url,
                region_name=self.session.region_name or "us-east-1",
                config=Config(retries={"mode": "standard", "max_attempts": 2}, connect_timeout=3, read_timeout=30),
            )
        return self._clients[service]

    @cached_property
    def outputs(self) -> dict[str, str]:
        try:
            stacks = self.client("cloudformation").describe_stacks(StackName=self.stack)["Stacks"]
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "ValidationError":
                where = f" at {self.endpoint_url}" if self.endpoint_url else ""
                raise TargetError(f"unknown stack {self.stack!r}{where} (deploy it, or pass --stack)") from None
            raise
        return {output["OutputKey"]: output["OutputValue"] for output in stacks[0].get("Outputs", [])}

    @cached_property
    def settings(self) -> Settings:
        return settings_from_outputs(self.outputs, self.catalogue)

    @cached_property
    def converge(self) -> Converge:
        clients = Clients(
            self.session,
            endpoint_url=self.endpoint_url,
            **{service: self.client(service) for service in ("dynamodb", "sqs", "ssm")},
        )
        return Converge(self.settings, registry=load_catalogue(self.catalogue), clients=clients)
