"""A listing's next page as an opaque token: what `converge ops list` prints, and `--next` and the console take."""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from converge_cli.support.errors import UsageError


def encode_token(key: dict[str, Any] | None) -> str | None:
    """LastEvaluatedKey as an opaque, URL-safe token."""
    if not key:
        return None
    return base64.urlsafe_b64encode(json.dumps(key, sort_keys=True).encode()).decode()


def decode_token(token: str | None) -> dict[str, Any] | None:
    if not token:
        return None
    try:
        key = json.loads(base64.urlsafe_b64decode(token.encode()))
    except (binascii.Error, ValueError):
        raise UsageError("--next is not a token printed by `converge ops list`") from None
    if not isinstance(key, dict):
        raise UsageError("--next is not a token printed by `converge ops list`")
    return key
