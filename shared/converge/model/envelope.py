"""The envelope: the versioned message an operation travels in (an SQS body, a one-time schedule's input).

It carries the operation's identity, its job type, its payload and the options it was admitted with, as
canonical JSON. Reading one from an untrusted body (size first, then its shape) is screening's:
`converge.screening.message.read_envelope`.
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

ENVELOPE_VERSION = 1


def plain(value: Any) -> Any:
    """DynamoDB's Decimal and set types as the plain JSON values a payload is made of."""
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dict):
        return {key: plain(inner) for key, inner in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [plain(inner) for inner in value]
    return value


def canonical_json(value: Any) -> str:
    """Stable JSON (sorted keys, no spaces): the basis of fingerprints and size checks."""
    return json.dumps(plain(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


class Envelope(BaseModel):
    """The versioned primitive message carried in an SQS body: identity, type, payload, correlation."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    v: Literal[1] = 1
    operation_id: str = Field(max_length=128)
    job_type: str = Field(max_length=128)
    payload: dict[str, Any]
    correlation_id: str | None = Field(default=None, max_length=128)
    run_at: str | None = Field(default=None, max_length=40)
    """Not before (ISO-8601 UTC): the worker hands back a copy that arrives early."""
    expires_at: str | None = Field(default=None, max_length=40)
    """Not started by then, the operation ends EXPIRED."""
    submitted_by: str | None = Field(default=None, max_length=2048)
    """The enqueue API's caller (an IAM principal's ARN), part of what the operation was admitted with."""
    held_until: float | None = Field(default=None, ge=0)
    """The rate-limit slot this message was sent again for (epoch seconds): coming back on time, it starts on that slot
    without taking another of `held_by`. Neither is part of what the operation was admitted with
    (docs/flow-control.md)."""
    held_by: str | None = Field(default=None, max_length=64)
    """The limiter whose slot `held_until` is."""

    def to_body(self) -> str:
        body = self.model_dump()
        # absent unless set, so a body without options is what it always was
        for name in ("run_at", "expires_at", "submitted_by", "held_until", "held_by"):
            if body[name] is None:
                del body[name]
        return canonical_json(body)
