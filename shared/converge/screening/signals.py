"""A signal as a sender gives it (`converge.signal`, the CLI, the HTTP API), screened like a message.

Its payload sits in DynamoDB as plaintext and shows in every receipt, as a job's payload does: a flat object of
identifiers and small integers, size caps first (`converge.screening.limits`), then field names that suggest PII or
a secret, then values that look like one (`converge.screening.heuristics`). Each check is linear in the input.
"""

from __future__ import annotations

import re
from typing import Any

from converge.model.errors import InvalidMessage
from converge.screening.field_names import sensitive_name
from converge.screening.limits import check_payload, shown
from converge.screening.message import check_identifier, sensitive_value_reason

SIGNAL_NAME = re.compile(r"^[a-z][a-z0-9-]{0,47}$")
"""A signal's name is its wait's (`ctx.wait_for(name, ...)`): public like a step's, lowercase letters, digits, `-`."""


def check_signal_name(name: Any) -> str:
    if not isinstance(name, str) or not SIGNAL_NAME.match(name):
        raise InvalidMessage(f"signal name {str(name)[:60]!r} must be lowercase letters, digits and '-' (at most 48)")
    return name


def check_signal(operation_id: Any, name: Any, signal_id: Any, payload: Any) -> dict[str, Any]:
    """Refuse a signal converge cannot keep (InvalidMessage naming what), or give its payload back as a dict."""
    check_identifier("operation_id", operation_id)
    check_signal_name(name)
    check_identifier("signal_id", signal_id)
    payload = {} if payload is None else payload
    check_payload(payload)  # caps first: a flat object of primitives, small
    for key, value in payload.items():
        sensitive = sensitive_name(key)
        if sensitive is not None:
            raise InvalidMessage(f"payload.{shown(key)}: the field name {sensitive.describe()}; signals carry ids only")
        if isinstance(value, str):
            reason = sensitive_value_reason(value)
            if reason:
                raise InvalidMessage(f"payload.{shown(key)}: {reason}; signals carry ids only")
    return dict(payload)
