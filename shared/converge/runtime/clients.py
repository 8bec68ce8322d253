"""Lazily built AWS clients: nothing is created at import, and any client can be injected."""

from __future__ import annotations

from typing import Any

import boto3
from botocore.config import Config

_RETRIES = Config(
    retries={"mode": "standard", "max_attempts": 3}, connect_timeout=3, read_timeout=10, parameter_validation=False
)


DEFAULT_REGION = "us-east-1"


class Clients:
    """One client per service, created on first use (boto3 honours AWS_ENDPOINT_URL by itself)."""

    def __init__(
        self,
        session: boto3.session.Session | None = None,
        endpoint_url: str | None = None,
        region: str | None = None,
        **injected: Any,
    ) -> None:
        """`region` applies when the session names none (the runtime passes its Settings' region)."""
        self._session = session
        self._endpoint_url = endpoint_url
        self._region = region
        self._clients: dict[str, Any] = dict(injected)

    def get(self, service: str) -> Any:
        if service not in self._clients:
            # One session for every client: each new session loads botocore's data again (cold start).
            if self._session is None:
                self._session = boto3.session.Session()
            session = self._session
            self._clients[service] = session.client(  # type: ignore[call-overload]
                service,
                region_name=session.region_name or self._region or DEFAULT_REGION,
                endpoint_url=self._endpoint_url,
                config=_RETRIES,
            )
        return self._clients[service]

    def close_connections(self) -> None:
        """Close every client's pooled HTTP connections; the clients stay usable and connect again on use."""
        for client in self._clients.values():
            endpoint = getattr(client, "_endpoint", None)
            session = getattr(endpoint, "http_session", None)
            if session is not None:
                session.close()

    @property
    def dynamodb(self) -> Any:
        return self.get("dynamodb")

    @property
    def sqs(self) -> Any:
        return self.get("sqs")

    @property
    def ssm(self) -> Any:
        return self.get("ssm")
