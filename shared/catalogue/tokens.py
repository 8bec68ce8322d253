"""Single-use link tokens (e-mail confirmation, password reset), signed with HMAC-SHA256.

A token is minted when the e-mail is sent, never stored in a job payload: it covers the user id,
the purpose, a fresh nonce and an expiry, and is signed with a key read from Secrets Manager at
execution. The service that redeems a token checks the signature and expiry with `verify` and
makes it single-use by recording the nonce (a conditional put) when it is consumed.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from dataclasses import dataclass
from typing import Any, Protocol

from aws_lambda_powertools.utilities.parameters import SecretsProvider

TOKEN_VERSION = "v1"


class SigningKeySource(Protocol):
    def signing_key(self) -> bytes: ...


class SecretsManagerSigningKey:
    """The signing key from a Secrets Manager secret, through Powertools Parameters (cached `max_age` s)."""

    def __init__(self, secret_arn: str, secretsmanager_client: Any = None, max_age: int = 300) -> None:
        self._secret_arn = secret_arn
        self._client = secretsmanager_client
        self._max_age = max_age
        self._provider: SecretsProvider | None = None

    def signing_key(self) -> bytes:
        if self._provider is None:
            self._provider = SecretsProvider(boto3_client=self._client) if self._client else SecretsProvider()
        value = self._provider.get(self._secret_arn, max_age=self._max_age)
        if isinstance(value, bytes):
            return value
        if isinstance(value, str) and value:
            return value.encode("utf-8")
        raise ValueError("the signing secret is empty or not a string")


@dataclass(frozen=True)
class TokenClaims:
    user_id: str
    purpose: str
    nonce: str
    expires_at: int


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class TokenSigner:
    """Mints and checks `v1.<user id>.<nonce>.<expiry>.<signature>` tokens for one purpose each."""

    def __init__(self, keys: SigningKeySource, ttl_seconds: int = 24 * 3600) -> None:
        self._keys = keys
        self._ttl_seconds = ttl_seconds

    def issue(self, user_id: str, purpose: str, now: float) -> str:
        nonce = _b64(secrets.token_bytes(16))
        expires_at = int(now) + self._ttl_seconds
        body = f"{TOKEN_VERSION}.{_b64(user_id.encode())}.{nonce}.{expires_at}"
        return f"{body}.{self._sign(purpose, body)}"

    def verify(self, token: str, purpose: str, now: float) -> TokenClaims | None:
        """The token's claims when its signature, purpose and expiry hold; None otherwise."""
        parts = token.split(".")
        if len(parts) != 5 or parts[0] != TOKEN_VERSION:
            return None
        body, signature = ".".join(parts[:4]), parts[4]
        if not hmac.compare_digest(signature, self._sign(purpose, body)):
            return None
        try:
            user_id, expires_at = _unb64(parts[1]).decode("utf-8"), int(parts[3])
        except ValueError:
            return None
        if expires_at <= now:
            return None
        return TokenClaims(user_id=user_id, purpose=purpose, nonce=parts[2], expires_at=expires_at)

    def _sign(self, purpose: str, body: str) -> str:
        # The purpose is signed but not carried: a confirmation token cannot be replayed as a reset token.
        message = f"{purpose}\n{body}".encode()
        return _b64(hmac.new(self._keys.signing_key(), message, hashlib.sha256).digest())
