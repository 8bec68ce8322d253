"""Which deployment a command talks to: AWS (names from the stack's outputs) or a local endpoint."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any
from urllib.parse import urlsplit

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

from converge.flow.registry import Registry, load_catalogue
from converge.runtime import Converge
from converge.runtime.clients import Clients
from converge.runtime.settings import Settings
from localcloud.outputs import OUTPUT_SETTINGS, settings_from_outputs
from localcloud.project import ProjectError, current_catalogue


class TargetError(Exception):
    """The deployment cannot be found or reached; the message says what to do."""


class InvalidEndpoint(ValueError):
    """--endpoint-url (or AWS_ENDPOINT_URL) is not a URL botocore can use."""


LOCAL_CREDENTIALS = {"aws_access_key_id": "local", "aws_secret_access_key": "local"}


def project_catalogue() -> str | None:
    """The current project's catalogue (its code directories put on the path), or None outside a project."""
    try:
        return current_catalogue()
    except ProjectError:
        return None


def import_catalogue(module: str | None) -> Registry:
    """The registry once the catalogue's module is imported (it registers its jobs); a clear error if it cannot be."""
    try:
        return load_catalogue(module)
    except ImportError as exc:
        raise ProjectError(f"cannot import the job catalogue {module!r}: {exc}") from None


def check_endpoint(endpoint_url: str) -> None:
    """Refuse an endpoint that is not an http(s) URL, before botocore fails on it with a ValueError."""
    parts = urlsplit(endpoint_url)
    if parts.scheme in ("http", "https") and parts.netloc:
        return
    suggestion = f"; did you mean http://{endpoint_url}?" if not parts.scheme or not parts.netloc else ""
    raise InvalidEndpoint(f"--endpoint-url {endpoint_url!r} is not an http:// or https:// URL{suggestion}")


@dataclass
class Target:
    stack: str = "converge"
    endpoint_url: str | None = None
    region: str | None = None
    catalogue: str | None = None
    """The job catalogue; default: the current project's (see localcloud.project)."""
    profile: str | None = None
    _clients: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.endpoint_url:
            check_endpoint(self.endpoint_url)

    @cached_property
    def session(self) -> boto3.session.Session:
        if self.endpoint_url and not self.profile:
            # A local cloud accepts any credentials; do not require a configured profile for it.
            session = boto3.session.Session(region_name=self.region or "us-east-1", **LOCAL_CREDENTIALS)
        else:
            session = boto3.session.Session(region_name=self.region, profile_name=self.profile)
        return session

    @property
    def region_name(self) -> str:
        return self.session.region_name or "us-east-1"

    def client(self, service: str, region: str | None = None) -> Any:
        key = f"{service}@{region}" if region else service
        if key not in self._clients:
            self._clients[key] = self.session.client(
                service,
                endpoint_url=self.endpoint_url,
                region_name=region or self.region_name,
                config=Config(retries={"mode": "standard", "max_attempts": 2}, connect_timeout=3, read_timeout=30),
            )
        return self._clients[key]

    @cached_property
    def outputs(self) -> dict[str, str]:
        try:
            stacks = self.client("cloudformation").describe_stacks(StackName=self.stack)["Stacks"]
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "ValidationError":
                raise TargetError(self._missing_stack()) from None
            raise
        outputs = {output["OutputKey"]: output["OutputValue"] for output in stacks[0].get("Outputs", [])}
        if not set(OUTPUT_SETTINGS) <= set(outputs):  # converge is a nested application of the stack: look there
            for nested in self._nested_stacks():
                for output in nested.get("Outputs", []):
                    outputs.setdefault(output["OutputKey"], output["OutputValue"])
        return outputs

    def _nested_stacks(self) -> list[dict[str, Any]]:
        """The stacks of the stack's nested applications (converge's among them). CloudFormation lists each among
        the stack's resources (AWS::CloudFormation::Stack); the local cloud, whose moto has no nested stacks,
        deploys each as a stack of its own, named as CloudFormation names a nested one (<stack>-<LogicalId>-...),
        and that name is how it is found there."""
        cfn = self.client("cloudformation")
        found = [
            summary["PhysicalResourceId"]
            for page in cfn.get_paginator("list_stack_resources").paginate(StackName=self.stack)
            for summary in page["StackResourceSummaries"]
            if summary["ResourceType"] == "AWS::CloudFormation::Stack"
        ]
        if found:
            return [cfn.describe_stacks(StackName=stack_id)["Stacks"][0] for stack_id in found]
        return [
            stack
            for page in cfn.get_paginator("describe_stacks").paginate()
            for stack in page["Stacks"]
            if stack["StackName"].startswith(f"{self.stack}-") and stack["StackStatus"].endswith("_COMPLETE")
        ]

    def _missing_stack(self) -> str:
        where = f"region {self.region_name}" + (f" at {self.endpoint_url}" if self.endpoint_url else "")
        if self.endpoint_url:
            # A local cloud answers for every region; the stack usually sits in the one it was started in.
            elsewhere = self._regions_holding_the_stack()
            if elsewhere:
                return (
                    f"unknown stack {self.stack!r} in {where}; it is in {', '.join(elsewhere)}: "
                    f"pass --region {elsewhere[0]} (or set AWS_REGION)"
                )
        return f"unknown stack {self.stack!r} in {where} (deploy it, or pass --stack or --region)"

    def _regions_holding_the_stack(self) -> list[str]:
        found = []
        for region in self.session.get_available_regions("cloudformation"):
            if region == self.region_name:
                continue
            try:
                self.client("cloudformation", region).describe_stacks(StackName=self.stack)
            except ClientError:
                continue
            found.append(region)
        return found

    @cached_property
    def catalogue_module(self) -> str | None:
        return self.catalogue or project_catalogue()

    @cached_property
    def settings(self) -> Settings:
        return settings_from_outputs(self.outputs, self.catalogue_module)

    @cached_property
    def converge(self) -> Converge:
        """converge on this deployment; its registry holds the catalogue's jobs if one was found (see `registry`)."""
        clients = Clients(
            self.session,
            endpoint_url=self.endpoint_url,
            **{service: self.client(service) for service in ("dynamodb", "sqs", "ssm")},
        )
        return Converge(self.settings, registry=import_catalogue(self.catalogue_module), clients=clients)

    @cached_property
    def registry(self) -> Registry:
        """The catalogue's jobs, for a command that lists or names them. Raises NoCatalogue (where it looked, and
        how to point at the project) when none can be found, rather than answering with no jobs at all."""
        if not self.catalogue:
            current_catalogue()
        import_catalogue(self.catalogue_module)  # a problem on this machine is said before any call to AWS
        return self.converge.registry
