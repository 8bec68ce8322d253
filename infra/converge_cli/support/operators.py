"""The operator the commands act as: who acts (`actor`), and the framework's operator actions and redrive over a
deployment, wired to its outputs (its DLQs)."""

from __future__ import annotations

import getpass
import os

from converge.operate.actions import Operator
from converge.operate.redrive import Redrive
from converge.runtime import Converge
from converge_cli.support.target import Target


def actor() -> str:
    """Who acts, as the receipt records it: CONVERGE_ACTOR, else cli:<login name>."""
    named = os.environ.get("CONVERGE_ACTOR", "").strip()
    if named:
        return named
    try:
        return f"cli:{getpass.getuser()}"
    except (KeyError, OSError):  # no login name (a container without a passwd entry)
        return "cli:unknown"


def operator_for(converge: Converge) -> Operator:
    return converge.operator(actor())


def operator_at(deployment: Target) -> Operator:
    """The operator actions wired to the target's stack outputs (its DLQs), in the CLI user's name."""
    return deployment.converge.operator(actor(), dlq_urls=deployment.converge.settings.dlq_urls)


def redrive_for(deployment: Target) -> Redrive:
    """The same Redrive the Lambda runs, wired to the target's stack outputs."""
    return operator_at(deployment).redriver()
