"""A boto3 client that is either injected or built on first use, never at import."""

from __future__ import annotations

from typing import Any

from converge.runtime.clients import Clients


class LazyClient:
    """Holds an injected client, or builds one for `service` the first time it is needed."""

    def __init__(self, service: str, client: Any = None) -> None:
        self._service = service
        self._client = client

    def __call__(self) -> Any:
        if self._client is None:
            self._client = Clients().get(self._service)
        return self._client
