"""The message base model, and reading the envelope that carries it through the outbox and SQS.

A job message holds identifiers only. Payloads sit in DynamoDB and SQS as plaintext and show in
every ops listing, so the rules are structural first: fields are declared with the identifier
types of converge.screening.identifiers, which leave free text nowhere to go, and a declaration that is
neither an identifier type nor a primitive is refused when the class is defined. The value
heuristics (converge.screening.heuristics) are the second net, after the size caps (converge.screening.limits) that
every entry point applies before anything else. The runner fetches or regenerates sensitive data
at execution time.
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, ValidationError

from converge.model.envelope import ENVELOPE_VERSION, Envelope, canonical_json
from converge.model.errors import InvalidMessage
from converge.screening.heuristics import Kind, screen
from converge.screening.identifiers import Allow, FieldRules, field_rules
from converge.screening.limits import MAX_PAYLOAD_BYTES, MAX_STRING_LENGTH, check_body, check_payload, shown

__all__ = [
    "JobMessage",
    "check_identifier",
    "read_envelope",
    "sensitive_value_reason",
    "validate_payload",
]

_IDENTIFIER_LENGTH = 128
_IDENTIFIER_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._:-")
"""Operation and correlation ids: printable ASCII, at most 128 characters."""
_UNSCREENED = FieldRules()


def sensitive_value_reason(value: str, skip: frozenset[Kind] = frozenset()) -> str | None:
    """Why a string value looks like PII or a secret (naming the kind, never the value), or None."""
    kind = screen(value, skip)
    return None if kind is None else f"looks like {kind.description} ({kind.value})"


class JobMessage(BaseModel):
    """Base of every job's payload model: identifiers only, nothing sensitive, small.

    Subclasses declare their fields with converge's identifier types (`Identifier`, `Code`, `ObjectKey`,
    `ExternalId`, `Ulid`, `Digest`, or one made with `identifier`), `int`, `bool`, `uuid.UUID`, an `Enum` or a
    `Literal` (optionally `| None`). A field name that suggests PII or a secret, or a type outside that list, is
    refused when the class is defined, naming the field.
    """

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, str_max_length=MAX_STRING_LENGTH)

    converge_fields: ClassVar[dict[str, FieldRules]] = {}
    """Per field: the heuristics its type makes moot and the allowances it declares (set per subclass)."""

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        cls.converge_fields = {name: field_rules(cls.__name__, name, field) for name, field in cls.model_fields.items()}

    @classmethod
    def allowances(cls) -> dict[str, tuple[Allow, ...]]:
        """Fields allowed to hold what a heuristic (or the field-name rule) would refuse, with their reasons."""
        return {name: rules.allowed for name, rules in cls.converge_fields.items() if rules.allowed}


def describe_validation_error(exc: ValidationError) -> str:
    """A one-line, field-naming summary of a pydantic error, without echoing the rejected values."""
    parts = []
    for error in exc.errors(include_url=False, include_input=False):
        where = ".".join(str(part) for part in error["loc"]) or "payload"
        parts.append(f"{where}: {error['msg']}")
    return "; ".join(parts)


def validate_payload(model: type[JobMessage], payload: Any) -> JobMessage:
    """Check a raw payload against a job's model; raise InvalidMessage naming the bad field.

    In this order: the size caps (one pass, stopping at the first cap crossed), the value heuristics
    on each value (the kind named, never the value), then the model's own structural validation.
    """
    check_payload(payload)
    encoded = canonical_json(payload)
    size = len(encoded.encode("utf-8"))
    if size > MAX_PAYLOAD_BYTES:
        raise InvalidMessage(f"payload is {size} bytes; the limit is {MAX_PAYLOAD_BYTES} bytes")
    for key, value in payload.items():
        if isinstance(value, bool) or not isinstance(value, (str, int, Decimal)):
            continue
        rules = model.converge_fields.get(key, _UNSCREENED)
        if value in rules.constants:
            continue  # a Literal or Enum value the model itself declares
        reason = sensitive_value_reason(str(value), rules.skip)
        if reason:
            raise InvalidMessage(f"payload.{shown(key)}: value {reason}; job payloads must not carry PII or secrets")
    try:
        return model.model_validate_json(encoded)
    except ValidationError as exc:
        raise InvalidMessage(describe_validation_error(exc)) from None


def check_identifier(name: str, value: Any) -> str:
    """Validate an operation or correlation id; raise InvalidMessage naming it."""
    if (
        not isinstance(value, str)
        or not 0 < len(value) <= _IDENTIFIER_LENGTH
        or not value[0].isalnum()
        or not _IDENTIFIER_CHARS.issuperset(value)
    ):
        text = str(value)
        shown_value = text if len(text) <= 40 else f"{text[:40]}…"
        raise InvalidMessage(
            f"{name} {shown_value!r} is invalid: use 1-128 characters from letters, digits and . _ : - "
            "starting with a letter or digit"
        )
    return value


def read_envelope(body: str) -> Envelope:
    """Parse an SQS body; anything but a version-1 envelope is InvalidMessage (size first)."""
    check_body(body)
    try:
        raw = json.loads(body)
    except (TypeError, ValueError, RecursionError):  # RecursionError: nesting deeper than the parser goes
        raise InvalidMessage("message body is not JSON") from None
    if not isinstance(raw, dict):
        raise InvalidMessage("message body is not a JSON object")
    version = raw.get("v")
    if version != ENVELOPE_VERSION:
        shown_version = version if version is None or (isinstance(version, int) and abs(version) < 1000) else "?"
        raise InvalidMessage(f"message version {shown_version!r} is not supported (expected {ENVELOPE_VERSION})")
    try:
        envelope = Envelope.model_validate(raw)
    except ValidationError as exc:
        raise InvalidMessage(describe_validation_error(exc)) from None
    check_identifier("operation_id", envelope.operation_id)
    if envelope.correlation_id is not None:
        check_identifier("correlation_id", envelope.correlation_id)
    return envelope
