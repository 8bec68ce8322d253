"""converge's runtime bound to a local cloud: its clients, its stack's outputs, its clock.

What a test, the demo or a tool uses to enqueue, read receipts and act as an operator on the cloud, exactly as a
producer or the command line does against a deployment (`converge_testing.Cloud.converge`)."""

from __future__ import annotations

from typing import Any

from converge.flow.registry import load_catalogue
from converge.runtime import Converge
from converge.runtime.clients import Clients
from localcloud.outputs import settings_from_outputs


def runtime_for(cloud: Any) -> Converge:
    """A converge runtime bound to the local cloud's clients, named from its stack outputs, on its clock."""
    clients = Clients(
        dynamodb=cloud.client("dynamodb"),
        sqs=cloud.client("sqs"),
        ssm=cloud.client("ssm"),
        scheduler=cloud.client("scheduler"),
    )
    return Converge(
        settings_from_outputs(cloud.outputs, cloud.catalogue),
        registry=load_catalogue(cloud.catalogue),
        clients=clients,
        clock=cloud.clock,
    )
