"""botocore event handlers that see every call the local cloud's code makes, whichever session made its client.

moto registers its stub the same way (botocore.handlers.BUILTIN_HANDLERS, which every session created later
copies); the default session, if it exists already, gets the handlers directly.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import boto3
from botocore.handlers import BUILTIN_HANDLERS

Handlers = Sequence[tuple[str, Callable[..., Any]]]


def register_everywhere(handlers: Handlers, name: str) -> None:
    """Register `handlers` (event, handler) for every session created from now on and the default session if made;
    registering again changes nothing (`name` makes each handler's unique id)."""
    for event, handler in handlers:
        if (event, handler) not in BUILTIN_HANDLERS:
            BUILTIN_HANDLERS.append((event, handler))
    if boto3.DEFAULT_SESSION is not None:
        for event, handler in handlers:
            boto3.DEFAULT_SESSION.events.register(event, handler, unique_id=f"{name}-{event}")
