"""POST /batches/{name}: a batch admitted over HTTP, with a job's screening, IAM auth and caller scoping.

The batch's id is derived from the caller and the name in the path (`batch_id_for`), as a job's operation id is
from the caller and its Idempotency-Key: two callers never share a batch, and a caller's retry names the same one.
Admission is idempotent on that id (converge.flow.batches), so the request layer needs no record of its own: the
same request again writes nothing twice and answers with the batch as it stands (202, `Idempotent-Replayed: true`),
and finishes an admission a failed request left halfway; other children or another callback under the same name
is 409 `identity_conflict`. Each child records the caller (`submitted_by`), so `GET /operations/{child}` answers it.

The body is checked in time linear in its size, its size first: at most MAX_BATCH_BODY_BYTES before it is decoded
or parsed, then its shape (`children`, 1 to MAX_CHILDREN objects of `key`, `job_type` and `payload`, and
`callback`, an object of `job_type` and `payload`; nothing else), then every child's payload against its job's
message and the callback's against its own, each refusal a 400 naming the child.
"""

from __future__ import annotations

import hashlib
from typing import Any, Protocol

from converge.api.http import ApiResponse, error, json_body
from converge.model.batches import (
    BATCH_ID_LIMIT,
    MAX_CHILDREN,
    BatchAdmission,
    BatchCallback,
    BatchChild,
    check_name,
)
from converge.model.errors import IdentityConflict, InvalidMessage, UnknownJobType
from converge.model.submission import BatchSubmission
from converge.screening.limits import check_body

MAX_BATCH_BODY_BYTES = 4 * 1024 * 1024
"""A batch's request body: base64-encoded by API Gateway it grows by a third, and the event must stay under Lambda's
6 MB for a synchronous invocation. 10,000 children of some 400 bytes each fit."""
NAME_LIMIT = BATCH_ID_LIMIT
_CHILD_FIELDS = frozenset({"key", "job_type", "payload"})
_CALLBACK_FIELDS = frozenset({"job_type", "payload"})


class BatchAdmissions(Protocol):
    """What the API admits a batch through (the runtime: `Converge.admit_batch`)."""

    def admit_batch(self, batch: BatchSubmission) -> BatchAdmission: ...


def batch_id_for(caller: str, name: str) -> str:
    """The batch id for a caller's batch name: stable, so every retry names the same batch, and the caller's own."""
    return "api-" + hashlib.sha256(f"batch\n{caller}\n{name}".encode()).hexdigest()[:40]


class BatchApi:
    """POST /batches/{name}, independent of the HTTP framework around it."""

    def __init__(self, admissions: BatchAdmissions) -> None:
        self._admissions = admissions

    def submit(self, caller: str | None, name: str, body: str | None, base64_encoded: bool = False) -> ApiResponse:
        try:
            check_body(body, "the request body", limit=MAX_BATCH_BODY_BYTES)  # size first
        except InvalidMessage as exc:
            return error(413, "payload_too_large", str(exc))
        if not caller:
            return error(403, "forbidden", "the request carries no caller identity")
        try:
            check_name("batch name", name, NAME_LIMIT)
        except InvalidMessage as exc:
            return error(400, "invalid_batch_name", str(exc))
        document = json_body(body, base64_encoded)
        if isinstance(document, ApiResponse):
            return document
        try:
            children, callback = parse_batch(document)
        except InvalidMessage as exc:
            return error(400, "invalid_batch", str(exc))
        batch_id = batch_id_for(caller, name)
        try:
            admitted = self._admissions.admit_batch(BatchSubmission(batch_id, tuple(children), callback, caller))
        except UnknownJobType as exc:
            return error(400, "unknown_job_type", str(exc))
        except IdentityConflict:
            return error(409, "identity_conflict", f"the batch {name!r} was admitted with other children or callback")
        except InvalidMessage as exc:
            return error(400, "invalid_batch", str(exc))
        batch = admitted.batch
        view = {
            "batch_id": batch.batch_id,
            "name": name,
            "state": batch.state.value,
            "total": batch.total,
            "written": batch.written,
            "counts": dict(batch.counts),
            "callback_id": batch.callback_id,
            "created": admitted.created,
        }
        return ApiResponse(202, view, None if admitted.created else {"Idempotent-Replayed": "true"})


def parse_batch(document: Any) -> tuple[list[BatchChild], BatchCallback]:
    """The children and the callback of a request's body, or InvalidMessage saying what is wrong and where."""
    if not isinstance(document, dict) or set(document) != {"children", "callback"}:
        raise InvalidMessage('the body must be a JSON object {"children": [...], "callback": {...}} and nothing else')
    listed, callback = document["children"], document["callback"]
    if not isinstance(listed, list) or not 0 < len(listed) <= MAX_CHILDREN:
        raise InvalidMessage(f"children must be a list of 1-{MAX_CHILDREN} objects")
    children = []
    for position, child in enumerate(listed):
        if not isinstance(child, dict) or set(child) != _CHILD_FIELDS:
            raise InvalidMessage(f'child {position}: an object {{"key": ..., "job_type": ..., "payload": {{...}}}}')
        if not isinstance(child["key"], str) or not isinstance(child["job_type"], str):
            raise InvalidMessage(f"child {position}: key and job_type are strings")
        if not isinstance(child["payload"], dict):
            raise InvalidMessage(f"child {position}: payload is an object")
        children.append(BatchChild(child["key"], child["job_type"], child["payload"]))
    if not isinstance(callback, dict) or not {"job_type"} <= set(callback) <= _CALLBACK_FIELDS:
        raise InvalidMessage('callback must be an object {"job_type": ..., "payload": {...}}')
    payload = callback.get("payload", {})
    if not isinstance(callback["job_type"], str) or not isinstance(payload, dict):
        raise InvalidMessage("callback: job_type is a string and payload an object")
    return children, BatchCallback(callback["job_type"], payload)
