"""Size caps on untrusted input, checked first at every entry point, before any parsing or pattern.

A refusal here costs one pass over at most the cap (or nothing at all: a body longer than the cap
is refused on its length), so an input sized to make a validator slow is turned away in time linear
in the cap, never in its own size. The limits:

- an HTTP request body or an SQS message body: MAX_BODY_BYTES;
- a payload: MAX_FIELDS fields, names of at most MAX_FIELD_NAME characters, each string value at
  most MAX_STRING_LENGTH characters, integers within 64 bits, MAX_PAYLOAD_BYTES of canonical JSON;
- a raw request item on the jobs table's stream: the same payload caps, and MAX_ATTRIBUTE_LENGTH
  for its identifying attributes.
"""

from __future__ import annotations

import json
import re
from decimal import Decimal
from typing import Any

from converge.model.errors import InvalidMessage

MAX_PAYLOAD_BYTES = 4096
"""Cap on a payload's canonical JSON, in bytes: it rides in a DynamoDB item and an SQS body."""
MAX_STRING_LENGTH = 1024
"""Cap on any string value in a payload, whatever the field declares; no pattern sees a longer one."""
MAX_FIELDS = 64
MAX_FIELD_NAME = 64
MAX_BODY_BYTES = 16 * 1024
"""Cap on an HTTP request body and an SQS message body (a payload at its cap, its envelope, whitespace)."""
MAX_ATTRIBUTE_LENGTH = 1024
"""Cap on the identifying attributes of a raw request item (the id checks then apply their own, smaller, caps)."""
INT64 = (-(2**63), 2**63 - 1)

_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
_REQUEST_ATTRIBUTES = ("operation_id", "job_type", "correlation_id", "submitted_by")


def shown(name: str) -> str:
    """A field name as a refusal may show it: plain names as they are, anything else escaped."""
    return name if _PLAIN_NAME.fullmatch(name) else repr(name[:MAX_FIELD_NAME])


def check_body(body: str | bytes | None, what: str = "message body", limit: int = MAX_BODY_BYTES) -> None:
    """Refuse a body over `limit` bytes (MAX_BODY_BYTES unless told) on its length, before it is decoded or parsed."""
    if body is None:
        return
    # A str's length in characters is a lower bound of its UTF-8 size: a long one is refused unencoded.
    size = len(body) if isinstance(body, bytes) or len(body) > limit else len(body.encode())
    if size > limit:
        raise InvalidMessage(f"{what} is more than {limit} bytes; the limit is {limit} bytes")


def check_payload(payload: Any) -> None:
    """Shape and size of a payload, in one pass that stops at the first cap it crosses."""
    if not isinstance(payload, dict):
        raise InvalidMessage(f"payload must be an object of primitive values, got {type(payload).__name__}")
    if len(payload) > MAX_FIELDS:
        raise InvalidMessage(f"payload has more than {MAX_FIELDS} fields; the limit is {MAX_FIELDS}")
    size = 2
    for key, value in payload.items():
        if not isinstance(key, str) or not 0 < len(key) <= MAX_FIELD_NAME:
            raise InvalidMessage(f"payload field names must be 1-{MAX_FIELD_NAME} characters")
        size += len(key) + 4 + _value_size(key, value)
        if size > MAX_PAYLOAD_BYTES:
            raise _oversize()


def _value_size(key: str, value: Any) -> int:
    if isinstance(value, str):
        if len(value) > MAX_STRING_LENGTH:
            raise InvalidMessage(f"payload.{shown(key)}: at most {MAX_STRING_LENGTH} characters are allowed")
        return len(value)
    if isinstance(value, bool) or value is None:
        return 5
    if isinstance(value, (dict, list, tuple, set)):
        raise InvalidMessage(f"payload.{shown(key)}: nested objects and lists are not allowed in a job payload")
    if isinstance(value, float) or (isinstance(value, Decimal) and value != value.to_integral_value()):
        raise InvalidMessage(f"payload.{shown(key)}: floating-point numbers are not allowed in a job payload")
    if isinstance(value, (int, Decimal)):
        if not INT64[0] <= value <= INT64[1]:
            raise InvalidMessage(f"payload.{shown(key)}: integers must fit in 64 bits")
        return len(str(value))
    raise InvalidMessage(f"payload.{shown(key)}: {type(value).__name__} values are not allowed in a job payload")


def check_request_item(image: dict[str, Any]) -> None:
    """Caps on a raw request item as it arrives on the stream (DynamoDB's attribute-value form)."""
    for name in _REQUEST_ATTRIBUTES:
        attribute = image.get(name)
        value = next(iter(attribute.values()), "") if isinstance(attribute, dict) and attribute else ""
        if isinstance(value, str) and len(value) > MAX_ATTRIBUTE_LENGTH:
            raise InvalidMessage(f"{name} is longer than {MAX_ATTRIBUTE_LENGTH} characters")
    fields = (image.get("payload") or {}).get("M") if isinstance(image.get("payload"), dict) else None
    if not isinstance(fields, dict):
        return  # not a map: admission's own checks name what is wrong with it
    if len(fields) > MAX_FIELDS:
        raise InvalidMessage(f"payload has more than {MAX_FIELDS} fields; the limit is {MAX_FIELDS}")
    size = 2
    for key, attribute in fields.items():
        scalar = next(iter(attribute.values()), "") if isinstance(attribute, dict) and len(attribute) == 1 else None
        length = len(scalar) if isinstance(scalar, str) else len(json.dumps(attribute, default=str))
        size += len(key) + 4 + length
        if size > MAX_PAYLOAD_BYTES:
            raise _oversize()


def _oversize() -> InvalidMessage:
    return InvalidMessage(f"payload is more than {MAX_PAYLOAD_BYTES} bytes; the limit is {MAX_PAYLOAD_BYTES} bytes")
