"""The request: what a producer writes into the jobs table, and all that converge reads from it.

A request is the documented item shape and nothing else: `operation_id`, `job_type`, `payload`,
`correlation_id`, the optional times `run_at` and `expires_at` (ISO-8601 UTC strings) and `submitted_by`
(the enqueue API's caller). The times and the caller are fixed at admission with the content: they are
part of the fingerprint, so a later write that changes them is an identity conflict, never a new option. Any other
attribute on a producer's item (a `state`, `attempts`, `history`, whatever its type) is ignored,
never trusted: converge's own record of the operation lives in the state table, which no producer
can write. Reading an item never raises for what is in it; an item
converge cannot use is an `UnusableRequest` with the reason, which the relay records as REJECTED
(reading an item is the store's: `converge.store.codecs.request_from_image`).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from converge.model.envelope import Envelope, canonical_json

DOCUMENTED = ("operation_id", "job_type", "payload", "correlation_id", "submitted_by", "run_at", "expires_at")
"""The attributes a producer may write; everything else on its item is ignored. `submitted_by` is set by
the enqueue API (its caller, who alone may read the operation back through the API)."""

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
    """Not before this time (ISO-8601 UTC, as written; `converge.model.timing` checks it)."""
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
