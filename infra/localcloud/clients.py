"""boto3 clients for the local cloud: one place that knows the region, credentials and endpoint."""

from __future__ import annotations

import threading
from typing import Any

import boto3
from botocore.config import Config

REGION = "us-east-1"
ACCOUNT_ID = "123456789012"  # moto's default account
# moto accepts any credentials; fixed dummies keep a stray real profile from ever being used.
DUMMY_CREDENTIALS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}


class Clients:
    """Caches one boto3 client per service, pointed at moto (in-process mock or a loopback server)."""

    def __init__(self, endpoint_url: str | None = None, region: str = REGION) -> None:
        self.endpoint_url = endpoint_url
        self.region = region
        self._session = boto3.Session(region_name=region, **DUMMY_CREDENTIALS)
        self._cache: dict[str, Any] = {}
        self._lock = threading.Lock()

    def __call__(self, service: str) -> Any:
        with self._lock:
            if service not in self._cache:
                self._cache[service] = self._session.client(
                    service,
                    endpoint_url=self.endpoint_url,
                    # Account-based endpoints (<account>.ddb...) route DynamoDB Streams calls past moto.
                    config=Config(retries={"max_attempts": 2, "mode": "standard"}, account_id_endpoint_mode="disabled"),
                )
            return self._cache[service]
