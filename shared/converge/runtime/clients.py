"""Lazily built AWS clients: nothing is created at import, and any client can be injected.

converge's own clients are botocore's (boto3's `client()` is a thin layer over the same call): a function that
talks to AWS only through converge never imports boto3, some 15 ms of a cold start. A runner that wants boto3
imports it itself, or is given a session (`Clients(session=boto3.session.Session())`).

The runtime's clients also find the service models of `converge.runtime.lean_models` before botocore's: an SSM
client of the two operations converge calls, not of SSM's hundred and fifty (`models`).

Their User-Agent header is fixed when the client is made (botocore's `Config(user_agent=...)`): otherwise
botocore composes it from some forty parts, twice for every request, about a tenth of a DynamoDB call's CPU
time in a worker (docs/benchmarks.md). It still names converge, botocore, Python and the Lambda runtime.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from botocore import __version__ as botocore_version
from botocore.config import Config
from botocore.session import Session

from converge.runtime.lean_models import ServiceLoader

DEFAULT_REGION = "us-east-1"


def user_agent(environment: dict[str, str] | None = None) -> str:
    """What converge's clients send as their User-Agent header."""
    python = ".".join(str(part) for part in sys.version_info[:3])
    execution = (os.environ if environment is None else environment).get("AWS_EXECUTION_ENV")
    return f"converge Botocore/{botocore_version} Python/{python}" + (f" exec-env/{execution}" if execution else "")


_CONFIG = Config(
    retries={"mode": "standard", "max_attempts": 3},
    connect_timeout=3,
    read_timeout=10,
    parameter_validation=False,
    user_agent=user_agent(),
)


class Clients:
    """One client per service, created on first use (botocore honours AWS_ENDPOINT_URL by itself)."""

    def __init__(
        self,
        session: Any = None,
        endpoint_url: str | None = None,
        region: str | None = None,
        models: Path | None = None,
        **injected: Any,
    ) -> None:
        """`session`: a botocore or boto3 session (None: a botocore one, made on first use). `region` applies when
        the session names none (the runtime passes its Settings' region). `models`: a directory of botocore service
        models found before botocore's own (for a session made here)."""
        self._session = session
        self._endpoint_url = endpoint_url
        self._region = region
        self._models = models
        self._clients: dict[str, Any] = dict(injected)

    def get(self, service: str) -> Any:
        if service not in self._clients:
            # One session for every client: each new session loads botocore's data again (cold start).
            if self._session is None:
                self._session = self._new_session()
            session = self._session
            region = session.region_name if hasattr(session, "region_name") else session.get_config_variable("region")
            options = {
                "region_name": region or self._region or DEFAULT_REGION,
                "endpoint_url": self._endpoint_url,
                "config": _CONFIG,
            }
            make = session.client if hasattr(session, "client") else session.create_client  # boto3 or botocore
            self._clients[service] = make(service, **options)
        return self._clients[service]

    def _new_session(self) -> Session:
        """A botocore session whose loader asks only about the service a client is for (`ServiceLoader`), and finds
        `models` first."""
        session = Session()
        configured = session.get_config_variable("data_path")  # AWS_DATA_PATH, which a session honours
        extra = [*([str(self._models)] if self._models is not None else []), *(configured or "").split(os.pathsep)]
        session.register_component("data_loader", ServiceLoader(extra_search_paths=[path for path in extra if path]))
        return session

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
