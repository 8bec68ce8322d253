"""Codecs: DynamoDB's low-level attribute values to converge's records and requests, and back.

Only the store reads or writes attribute values (`{"S": ...}`, `{"N": ...}`). A state record is read
leniently (an attribute of an unexpected type reads as absent: only converge writes that table), a
producer's request strictly (an attribute converge cannot use is an `UnusableRequest` naming it), and
neither read raises for anything else in the item.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import Any

from converge.model.errors import UnusableRequest
from converge.model.records import ConflictEntry, ErrorEntry, HistoryEntry, Operation, StateRecord
from converge.model.request import DOCUMENTED, OPTIONS, JobRequest, fingerprint
from converge.model.states import OperationState

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


def string_value(value: str) -> dict[str, str]:
    return {"S": value}


def number_value(value: float) -> dict[str, str]:
    return {"N": f"{value:.3f}" if isinstance(value, float) else str(value)}


def _str(item: dict[str, Any], name: str) -> str | None:
    value = item.get(name)
    return value["S"] if isinstance(value, dict) and isinstance(value.get("S"), str) else None


def _num(item: dict[str, Any], name: str) -> float | None:
    value = item.get(name)
    try:
        return float(value["N"]) if isinstance(value, dict) and "N" in value else None
    except (TypeError, ValueError):
        return None


def _strings(item: dict[str, Any], name: str) -> list[str]:
    value = item.get(name)
    entries = value.get("L") if isinstance(value, dict) else None
    return [entry["S"] for entry in entries or [] if isinstance(entry, dict) and isinstance(entry.get("S"), str)]


def _maps(item: dict[str, Any], name: str) -> list[dict[str, Any]]:
    value = item.get(name)
    entries = value.get("L") if isinstance(value, dict) else None
    return [entry["M"] for entry in entries or [] if isinstance(entry, dict) and isinstance(entry.get("M"), dict)]


def state_key(operation_id: str) -> dict[str, Any]:
    """The key of an operation's item, in either table (both are keyed by its id)."""
    return {"operation_id": string_value(operation_id)}


def image_operation_id(image: dict[str, Any]) -> str:
    """An item's operation id as written (its key: always a string in a stream image)."""
    value = image.get("operation_id")
    return str(value.get("S")) if isinstance(value, dict) and "S" in value else str(value)


def image_job_type(image: dict[str, Any] | None, unreadable: str = "") -> str:
    """An item's job type when it is a string, else `unreadable`."""
    value = (image or {}).get("job_type")
    return value["S"] if isinstance(value, dict) and isinstance(value.get("S"), str) else unreadable


# -- the state record -------------------------------------------------------------------------------------------


def history_line(entry: HistoryEntry) -> str:
    """One change as stored: one line, "<at> <state> <reason>", which reads like a log line in the console
    and costs a fraction of a map to write."""
    return f"{entry.at} {entry.state} {entry.reason}"


def history_from_line(line: str) -> HistoryEntry:
    at, _, rest = line.partition(" ")
    state, _, reason = rest.partition(" ")
    return HistoryEntry(state, at, reason)


def entry_value(entry: HistoryEntry | ErrorEntry | ConflictEntry) -> dict[str, Any]:
    """A history, error or conflict entry as the attribute value of its list."""
    if isinstance(entry, HistoryEntry):
        return {"S": history_line(entry)}
    if isinstance(entry, ErrorEntry):
        return {
            "M": {
                "at": string_value(entry.at),
                "attempt": number_value(entry.attempt),
                "error": string_value(entry.error),
            }
        }
    return {"M": {key: string_value(value) for key, value in entry.to_item().items()}}


def error_from_value(entry: dict[str, Any]) -> ErrorEntry:
    return ErrorEntry(_str(entry, "at") or "", int(_num(entry, "attempt") or 0), _str(entry, "error") or "")


def conflict_from_value(entry: dict[str, Any]) -> ConflictEntry:
    return ConflictEntry(*(_str(entry, key) or "" for key in ("at", "fingerprint", "job_type", "source")))


def record_from_item(item: dict[str, Any]) -> StateRecord:
    """converge's record of one operation, from its item in the state table."""
    state_value = _str(item, "state")
    try:
        state = OperationState(state_value) if state_value else OperationState.ACCEPTED
    except ValueError:
        # Only converge writes this table; a value it does not know is kept visible, never guessed.
        raise ValueError(f"state record {item.get('operation_id')} has an unknown state {state_value!r}") from None
    original = None
    if isinstance(item.get("original"), dict) and "M" in item["original"]:
        try:
            original = request_from_image({"operation_id": item["operation_id"], **item["original"]["M"]})
        except UnusableRequest:
            original = None
    return StateRecord(
        operation_id=item["operation_id"]["S"],
        state=state,
        job_type=_str(item, "job_type"),
        fingerprint=_str(item, "fingerprint"),
        attempts=int(_num(item, "attempts") or 0),
        history=tuple(history_from_line(line) for line in _strings(item, "history")),
        last_error=_str(item, "last_error"),
        errors=tuple(error_from_value(entry) for entry in _maps(item, "errors")),
        lease_owner=_str(item, "lease_owner"),
        lease_until=_num(item, "lease_until"),
        redrives=int(_num(item, "redrives") or 0),
        attention=_str(item, "attention"),
        stuck_kind=(_str(item, "stuck") or "").partition(": ")[0] or None,
        stuck_reason=(_str(item, "stuck") or "").partition(": ")[2] or None,
        conflicts=tuple(conflict_from_value(entry) for entry in _maps(item, "conflicts")),
        conflicts_dropped=int(_num(item, "conflicts_dropped") or 0),
        original=original,
        run_at=_num(item, "run_at"),
        waiting=_str(item, "waiting"),
        waiting_for=_str(item, "waiting_for"),
        reopened_from=_final_state(item, "reopened_from"),
    )


def _final_state(item: dict[str, Any], name: str) -> OperationState | None:
    value = _str(item, name)
    try:
        return OperationState(value) if value else None
    except ValueError:
        return None


def operation_from_records(
    operation_id: str, request_item: dict[str, Any] | None, state_item: dict[str, Any] | None
) -> Operation:
    """The operator's view of one operation: its request item joined with its state item (either may be None)."""
    record = record_from_item(state_item) if state_item else StateRecord.absent(operation_id)
    request, problem = None, None
    if request_item is None:
        problem = "the request is not in the jobs table"
    else:
        try:
            request = request_from_image(request_item)
        except UnusableRequest as exc:
            problem = str(exc)
    shown = record.original or request
    job_type = (record.job_type or (shown.job_type if shown else None)) or image_job_type(request_item)
    return Operation(
        operation_id=operation_id,
        job_type=job_type,
        payload=shown.payload if shown else {},
        state=record.state,
        correlation_id=shown.correlation_id if shown else None,
        record=record,
        request=request,
        request_problem=problem,
        parent_id=_parent(request_item),
    )


def _parent(image: dict[str, Any] | None) -> str | None:
    """The parent a continuation's request names (converge writes it; shown, never trusted)."""
    value = (image or {}).get("parent_id", {})
    return value.get("S") if isinstance(value, dict) and isinstance(value.get("S"), str) else None


# -- the request ------------------------------------------------------------------------------------------------


def request_from_image(image: dict[str, Any]) -> JobRequest:
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
    return JobRequest(operation_id, job_type, payload, correlation_id, submitted_by, ignored, run_at, expires_at)


def request_item(request: JobRequest) -> dict[str, Any]:
    """The low-level item converge writes for a producer: the documented attributes only."""
    item: dict[str, Any] = {
        "operation_id": {"S": request.operation_id},
        "job_type": {"S": request.job_type},
        "payload": {"M": {key: _typed(value) for key, value in request.payload.items()}},
    }
    if request.correlation_id:
        item["correlation_id"] = {"S": request.correlation_id}
    if request.submitted_by:
        item["submitted_by"] = {"S": request.submitted_by}
    for name, value in (("run_at", request.run_at), ("expires_at", request.expires_at)):
        if value:
            item[name] = {"S": value}
    return item


def raw_fingerprint(image: dict[str, Any]) -> str:
    """The fingerprint of an item converge cannot read: its documented content, typed, as written."""
    options = [repr(image[name]) if name in image else None for name in OPTIONS]
    return "raw-" + fingerprint(repr(image.get("job_type")), image.get("payload"), *options)


def same_content(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """Whether two images of one item carry the same request (job type, payload and options, the caller
    among them; the correlation id is tracing metadata and undocumented attributes are ignored)."""
    return content_fingerprint(old) == content_fingerprint(new)


def content_fingerprint(image: dict[str, Any]) -> str:
    """The request's fingerprint when the item is usable, else the raw one (so equal content compares equal)."""
    try:
        return request_from_image(image).fingerprint
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


def payload_of(value: Any) -> dict[str, Any]:
    """A payload attribute as written (a map of primitives; none is an empty payload); UnusableRequest saying why
    it is not one converge can read."""
    return _payload(value)


def typed_payload(payload: dict[str, Any]) -> dict[str, Any]:
    """A screened payload's fields as low-level attribute values (a map's `M`)."""
    return {key: _typed(value) for key, value in payload.items()}


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
