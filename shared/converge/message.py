"""The message base model and the envelope that carries it through the outbox and SQS.

A job message holds primitive identifiers only. Payloads sit in DynamoDB and SQS as plaintext and
show in every ops listing, so the base model refuses anything that looks like PII or a secret;
the runner fetches or regenerates sensitive data at execution time.
"""

from __future__ import annotations

import json
import re
import types
import typing
import uuid
from decimal import Decimal
from typing import Any, ClassVar, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from converge.errors import InvalidMessage

MAX_PAYLOAD_BYTES = 4096
"""Cap on a payload's canonical JSON, in bytes: it rides in a DynamoDB item and an SQS body."""

MAX_STRING_LENGTH = 512
"""Cap on any string value in a payload, whatever the field declares."""

ENVELOPE_VERSION = 1

_PRIMITIVES: tuple[type, ...] = (str, int, bool, uuid.UUID)

_SENSITIVE_NAME_PARTS = (
    "password",
    "passwd",
    "passphrase",
    "secret",
    "token",
    "apikey",
    "accesskey",
    "privatekey",
    "credential",
    "email",
    "phone",
    "mobile",
    "msisdn",
    "ssn",
    "socialsecurity",
    "taxid",
    "passport",
    "iban",
    "creditcard",
    "cardnumber",
    "cvv",
    "birthdate",
    "dateofbirth",
    "cookie",
    "sessionid",
    "salary",
)
_SENSITIVE_NAME_WORDS = frozenset({"pin", "dob", "auth", "tel", "address", "otp", "jwt"})


def sensitive_name(name: str) -> bool:
    """True when a field name suggests PII or a secret (password, token, email, phone and similar)."""
    words = [word.lower() for word in re.split(r"[_\-\s]+|(?<=[a-z0-9])(?=[A-Z])", name) if word]
    joined = "".join(words)
    return any(part in joined for part in _SENSITIVE_NAME_PARTS) or any(w in _SENSITIVE_NAME_WORDS for w in words)


_EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[A-Za-z]{2,}")
_JWT = re.compile(r"eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.?")
_KNOWN_SECRET = re.compile(
    r"AKIA[0-9A-Z]{16}|ASIA[0-9A-Z]{16}|-----BEGIN|(?:sk|pk|rk)_(?:live|test)_|gh[pousr]_[A-Za-z0-9]{20,}"
    r"|xox[abpr]-|bearer\s|basic\s",
    re.IGNORECASE,
)
_PHONE = re.compile(r"^\+?[\d\s().-]{10,20}$")
_TOKENISH = re.compile(r"^[A-Za-z0-9_\-+/=.~]{24,}$")
_UUID = re.compile(r"^[0-9a-fA-F]{8}-?([0-9a-fA-F]{4}-?){3}[0-9a-fA-F]{12}$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
IDENTIFIER = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")
"""Operation and correlation ids: printable ASCII, at most 128 characters."""


def sensitive_value_reason(value: str) -> str | None:
    """Why a string value looks like PII or a secret, or None when it looks like an identifier."""
    if _CONTROL.search(value):
        return "contains control characters"
    if _EMAIL.search(value):
        return "looks like an e-mail address"
    if _JWT.search(value):
        return "looks like a JWT"
    if _KNOWN_SECRET.search(value):
        return "looks like a credential or key"
    if _PHONE.match(value) and sum(ch.isdigit() for ch in value) >= 9:
        return "looks like a phone number"
    if _TOKENISH.match(value) and not _UUID.match(value):
        classes = sum(
            (
                any(ch.islower() for ch in value),
                any(ch.isupper() for ch in value),
                any(ch.isdigit() for ch in value),
            )
        )
        if classes == 3:
            return "looks like a token"
    return None


def _allowed_annotation(annotation: Any) -> bool:
    origin = typing.get_origin(annotation)
    if origin is Literal:
        return all(isinstance(arg, (str, int, bool)) for arg in typing.get_args(annotation))
    if origin is typing.Annotated:
        return _allowed_annotation(typing.get_args(annotation)[0])
    if origin in (Union, types.UnionType):
        return all(arg is type(None) or _allowed_annotation(arg) for arg in typing.get_args(annotation))
    return isinstance(annotation, type) and issubclass(annotation, _PRIMITIVES)


class JobMessage(BaseModel):
    """Base of every job's payload model: primitive identifiers only, nothing sensitive, small.

    Subclasses declare fields of type str, int, bool or UUID (optionally None or a Literal).
    Field names that suggest PII or secrets are refused when the class is defined; values that look
    like e-mail addresses, phone numbers, JWTs or tokens are refused when a payload is validated.
    """

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, str_max_length=MAX_STRING_LENGTH)

    sensitive_fields_allowed: ClassVar[frozenset[str]] = frozenset()
    """Field names a subclass asserts are not sensitive despite their name (use sparingly)."""

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        for name, field in cls.model_fields.items():
            if sensitive_name(name) and name not in cls.sensitive_fields_allowed:
                raise TypeError(
                    f"{cls.__name__}.{name}: field names that suggest PII or secrets are not allowed in a "
                    "job message; carry an identifier and fetch or regenerate the value at execution"
                )
            if not _allowed_annotation(field.annotation):
                raise TypeError(
                    f"{cls.__name__}.{name}: job message fields must be str, int, bool or UUID "
                    f"(got {field.annotation!r}); no nested objects, lists or floats"
                )

    @field_validator("*", mode="after")
    @classmethod
    def _refuse_sensitive_values(cls, value: Any, info: Any) -> Any:
        if isinstance(value, str):
            reason = sensitive_value_reason(value)
            if reason:
                raise ValueError(f"value {reason}; job payloads must not carry PII or secrets")
        return value


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


def describe_validation_error(exc: ValidationError) -> str:
    """A one-line, field-naming summary of a pydantic error, without echoing the rejected values."""
    parts = []
    for error in exc.errors(include_url=False, include_input=False):
        where = ".".join(str(part) for part in error["loc"]) or "payload"
        parts.append(f"{where}: {error['msg']}")
    return "; ".join(parts)


def validate_payload(model: type[JobMessage], payload: Any) -> JobMessage:
    """Check a raw payload against a job's model; raise InvalidMessage naming each bad field."""
    if not isinstance(payload, dict):
        raise InvalidMessage(f"payload must be an object of primitive values, got {type(payload).__name__}")
    for key, value in payload.items():
        if isinstance(value, (dict, list, tuple, set)):
            raise InvalidMessage(f"payload.{key}: nested objects and lists are not allowed in a job payload")
        if isinstance(value, float) or (isinstance(value, Decimal) and value != value.to_integral_value()):
            raise InvalidMessage(f"payload.{key}: floating-point numbers are not allowed in a job payload")
        reason = sensitive_value_reason(value) if isinstance(value, str) else None
        if reason:
            raise InvalidMessage(f"payload.{key}: value {reason}; job payloads must not carry PII or secrets")
    encoded = canonical_json(payload)
    size = len(encoded.encode("utf-8"))
    if size > MAX_PAYLOAD_BYTES:
        raise InvalidMessage(f"payload is {size} bytes; the limit is {MAX_PAYLOAD_BYTES} bytes")
    try:
        return model.model_validate_json(encoded)
    except ValidationError as exc:
        raise InvalidMessage(describe_validation_error(exc)) from None


def check_identifier(name: str, value: Any) -> str:
    """Validate an operation or correlation id; raise InvalidMessage naming it."""
    if not isinstance(value, str) or not IDENTIFIER.match(value):
        shown = value if isinstance(value, str) and len(value) <= 40 else f"{str(value)[:40]}…"
        raise InvalidMessage(
            f"{name} {shown!r} is invalid: use 1-128 characters from letters, digits and . _ : - "
            "starting with a letter or digit"
        )
    return value


class Envelope(BaseModel):
    """The versioned primitive message carried in an SQS body: identity, type, payload, correlation."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    v: Literal[1] = 1
    operation_id: str = Field(max_length=128)
    job_type: str = Field(max_length=128)
    payload: dict[str, Any]
    correlation_id: str | None = Field(default=None, max_length=128)

    def to_body(self) -> str:
        return canonical_json(self.model_dump())

    @classmethod
    def from_body(cls, body: str) -> Envelope:
        """Parse an SQS body; anything but a version-1 envelope is InvalidMessage."""
        try:
            raw = json.loads(body)
        except (TypeError, ValueError):
            raise InvalidMessage("message body is not JSON") from None
        if not isinstance(raw, dict):
            raise InvalidMessage("message body is not a JSON object")
        if raw.get("v") != ENVELOPE_VERSION:
            raise InvalidMessage(f"message version {raw.get('v')!r} is not supported (expected {ENVELOPE_VERSION})")
        try:
            envelope = cls.model_validate(raw)
        except ValidationError as exc:
            raise InvalidMessage(describe_validation_error(exc)) from None
        check_identifier("operation_id", envelope.operation_id)
        if envelope.correlation_id is not None:
            check_identifier("correlation_id", envelope.correlation_id)
        return envelope
