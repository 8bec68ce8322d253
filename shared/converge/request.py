"""The request: what a producer writes into the jobs table, and all that converge reads from it.

A request is the documented item shape and nothing else: `operation_id`, `job_type`, `payload`,
`correlation_id`, the optional times `run_at` and `expires_at` (ISO-8601 UTC strings) and `submitted_by`
(the enqueue API's caller). The times and the caller are fixed at admission with the content: they are
part of the fingerprint, so a later write that changes them is an identity conflict, never a new option. Any other
attribute on a producer's item (a `state`, `attempts`, `history`, whatever its type) is ignored,
never trusted: converge's own record of the operation lives in the state table, which no producer
can write. Reading an item never raises for what is in it; an item
converge cannot use is an `UnusableRequest` with the reason, which the relay records as REJECTED.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

from converge.errors import InvalidMessage
from converge.message import Envelope, canonical_json

DOCUMENTED = ("operation_id", "job_type", "payload", "correlation_id", "submitted_by", "run_at", "expires_at")
"""The attributes a producer may write; everything else on its item is ignored. `submitted_by` is set by
the enqueue API (its caller, who alone may read the operation back through the API)."""

MAX_NUMBER_DIGITS = 38
"""DynamoDB's own precision; a longer text is never read as a number."""

_TYPE_NAMES = {
    "S": "string",
    "N": "number",
    "B": "binary",
    "BOOL": "boolean",
    "NULL": "null",
    "M": "map",
    "L": "list",
    "SS": "string set",
    "NS": "number set",
    "BS": "binary set",
}


class UnusableRequest(InvalidMessage):
    """The item's documented attributes have types converge cannot use (a binary payload value, a
    numeric job type, a list for a payload...)."""


OPTIONS = ("run_at", "expires_at", "submitted_by")
"""What an operation is admitted with besides its job type and payload, fixed with it: its times and its
caller. The correlation id is tracing metadata and never part of what an operation id promises."""


def fingerprint(
    job_type: str,
    payload: Any,
    run_at: Any = None,
    expires_at: Any = None,
    submitted_by: Any = None,
) -> str:
    """What an operation id promises: this job type with this payload, and the options it was admitted with.

    Without options it is exactly what it was before options counted, so an untimed request written by
    a producer keeps its fingerprint across an upgrade."""
    content: dict[str, Any] = {"job_type": job_type, "payload": payload}
    options = {name: value for name, value in zip(OPTIONS, (run_at, expires_at, submitted_by), strict=True)}
    if any(value is not None for value in options.values()):
        content["options"] = {name: value for name, value in options.items() if value is not None}
    return hashlib.sha256(canonical_json(content).encode()).hexdigest()[:32]


def accepted_fingerprints(
    job_type: str, payload: Any, run_at: Any = None, expires_at: Any = None, submitted_by: Any = None
) -> tuple[str, ...]:
    """The fingerprint, and for a request with options also the one a state record written before options
    counted holds for it (job type and payload alone): an operation admitted then still runs after an upgrade."""
    full = fingerprint(job_type, payload, run_at, expires_at, submitted_by)
    earlier = fingerprint(job_type, payload)
    return (full,) if earlier == full else (full, earlier)


def envelope_fingerprints(envelope: Envelope) -> tuple[str, ...]:
    """What a message's content may be recorded as (its fingerprint first): see `accepted_fingerprints`."""
    return accepted_fingerprints(
        envelope.job_type, envelope.payload, envelope.run_at, envelope.expires_at, envelope.submitted_by
    )


def raw_fingerprint(image: dict[str, Any]) -> str:
    """The fingerprint of an item converge cannot read: its documented content, typed, as written."""
    options = [repr(image[name]) if name in image else None for name in OPTIONS]
    return "raw-" + fingerprint(repr(image.get("job_type")), image.get("payload"), *options)


@dataclass(frozen=True)
class JobRequest:
    operation_id: str
    job_type: str
    payload: dict[str, Any]
    correlation_id: str | None = None
    submitted_by: str | None = None
    ignored: tuple[str, ...] = field(default=(), compare=False)
    """Undocumented attributes found on the item, by name (never read)."""
    run_at: str | None = None
    """Not before this time (ISO-8601 UTC, as written; `converge.timing` checks it)."""
    expires_at: str | None = None
    """Not started by this time, the operation ends EXPIRED."""

    @property
    def fingerprint(self) -> str:
        """Job type, payload and the admitted options (times, caller): what this request promises."""
        return fingerprint(self.job_type, self.payload, self.run_at, self.expires_at, self.submitted_by)

    @property
    def accepted_fingerprints(self) -> tuple[str, ...]:
        return accepted_fingerprints(self.job_type, self.payload, self.run_at, self.expires_at, self.submitted_by)

    def envelope(self) -> Envelope:
        return Envelope(
            operation_id=self.operation_id,
            job_type=self.job_type,
            payload=self.payload,
            correlation_id=self.correlation_id,
            run_at=self.run_at,
            expires_at=self.expires_at,
            submitted_by=self.submitted_by,
        )

    def to_item(self) -> dict[str, Any]:
        """The low-level item converge writes for a producer: the documented attributes only."""
        item: dict[str, Any] = {
            "operation_id": {"S": self.operation_id},
            "job_type": {"S": self.job_type},
            "payload": {"M": {key: _typed(value) for key, value in self.payload.items()}},
        }
        if self.correlation_id:
            item["correlation_id"] = {"S": self.correlation_id}
        if self.submitted_by:
            item["submitted_by"] = {"S": self.submitted_by}
        for name, value in (("run_at", self.run_at), ("expires_at", self.expires_at)):
            if value:
                item[name] = {"S": value}
        return item

    @classmethod
    def from_image(cls, image: dict[str, Any]) -> JobRequest:
        """Read the documented attributes of a low-level item (a stream image or a GetItem result).

        Raises UnusableRequest naming the attribute when one has a type converge cannot use.
        """
        operation_id = _string(image, "operation_id", required=True)
        job_type = _string(image, "job_type", required=True)
        payload = _payload(image.get("payload"))
        correlation_id = _string(image, "correlation_id", required=False)
        submitted_by = _string(image, "submitted_by", required=False)
        run_at = _string(image, "run_at", required=False)
        expires_at = _string(image, "expires_at", required=False)
        ignored = tuple(sorted(name for name in image if name not in DOCUMENTED))
        assert operation_id is not None and job_type is not None
        return cls(operation_id, job_type, payload, correlation_id, submitted_by, ignored, run_at, expires_at)


def same_content(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """Whether two images of one item carry the same request (job type, payload and options, the caller
    among them; the correlation id is tracing metadata and undocumented attributes are ignored)."""
    return content_fingerprint(old) == content_fingerprint(new)


def content_fingerprint(image: dict[str, Any]) -> str:
    """The request's fingerprint when the item is usable, else the raw one (so equal content compares equal)."""
    try:
        return JobRequest.from_image(image).fingerprint
    except UnusableRequest:
        return raw_fingerprint(image)


def _type_of(value: Any) -> str:
    if isinstance(value, dict) and len(value) == 1:
        return next(iter(value))
    return "?"


def _string(image: dict[str, Any], name: str, required: bool) -> str | None:
    value = image.get(name)
    if value is None or (not required and _type_of(value) == "NULL"):
        if required:
            raise UnusableRequest(f"{name} is missing")
        return None
    kind = _type_of(value)
    if kind != "S" or not isinstance(value["S"], str):
        raise UnusableRequest(f"{name} must be a string (S), not {_TYPE_NAMES.get(kind, 'an unknown type')}")
    return str(value["S"])


def _payload(value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    kind = _type_of(value)
    if kind != "M" or not isinstance(value["M"], dict):
        raise UnusableRequest(
            f"payload must be a map (M) of primitive values, not {_TYPE_NAMES.get(kind, 'an unknown type')}"
        )
    return {str(key): _primitive(str(key), inner) for key, inner in value["M"].items()}


def _primitive(key: str, value: Any) -> Any:
    kind = _type_of(value)
    inner = value.get(kind) if isinstance(value, dict) else None
    if kind == "S" and isinstance(inner, str):
        return inner
    if kind == "BOOL" and isinstance(inner, bool):
        return inner
    if kind == "NULL":
        return None
    if kind == "N" and isinstance(inner, str):
        try:
            number = Decimal(inner) if len(inner) <= MAX_NUMBER_DIGITS else None
        except InvalidOperation:
            number = None
        if number is not None and number.is_finite() and number == number.to_integral_value():
            return int(number)
        if number is not None and number.is_finite():
            raise UnusableRequest(f"payload.{key}: floating-point numbers are not allowed in a job payload")
        raise UnusableRequest(
            f"payload.{key}: numbers in a job payload must be integers of at most {MAX_NUMBER_DIGITS} digits"
        )
    if kind in ("M", "L"):
        raise UnusableRequest(f"payload.{key}: nested objects and lists are not allowed in a job payload")
    raise UnusableRequest(
        f"payload.{key}: {_TYPE_NAMES.get(kind, 'unknown')} values are not allowed in a job payload "
        "(strings, integers and booleans only)"
    )


def _typed(value: Any) -> dict[str, Any]:
    """A payload value (already validated: str, int, bool or None) as a low-level attribute value."""
    if isinstance(value, bool):
        return {"BOOL": value}
    if isinstance(value, int):
        return {"N": str(value)}
    if value is None:
        return {"NULL": True}
    return {"S": str(value)}
