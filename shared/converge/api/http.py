"""The enqueue HTTP API: request-level idempotency (Powertools) over job-level admission.

Two layers compose. The request layer (Powertools Idempotency, keyed by caller and the
`Idempotency-Key` header) replays the original response to a retried request, answers 409 while
the first is still running and refuses the same key with a different job type or payload (422).
The operation id is derived from the same caller and key, so once the request record has expired,
admission (same id, same content) still absorbs a replay: same operation id, nothing dispatched twice.

What a request "is" is the same for both layers: its job type, normalized payload and times (`Run-At`,
`Expires-At`, in their stored form), which with the caller make the operation's fingerprint. A retry
with the same key and body but another `Run-At` is another request: 422 `idempotency_key_reused` while
the request record lasts, and the same 422 after it (admission refuses the same id with other options),
never a silent replay that drops the new time. The correlation id is tracing metadata, so a retry that
carries a fresh one is still a retry, before and after the request record expires.

Reads are scoped to their caller: the operation a request creates records its caller
(`submitted_by`, fixed at admission with the content: a later write of the jobs table item naming
another caller is an identity conflict and names no new owner), and `GET /operations/{id}` answers
only that caller, with the same 404 as for an
operation that does not exist, so another caller's ids (or guessable business ids of operations
enqueued by other means) reveal nothing. Reading any operation is a separate route,
`GET /admin/operations/{id}`, which IAM grants apart (see docs/http-api.md). `POST /operations/{id}/cancel` is
scoped the same way: a caller cancels only its own operations, and only those not started yet.

A request may be timed with the `Run-At` and `Expires-At` headers (ISO-8601 UTC, at most a year ahead).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer, IdempotencyConfig, idempotent_function
from aws_lambda_powertools.utilities.idempotency.exceptions import (
    IdempotencyAlreadyInProgressError,
    IdempotencyValidationError,
)

from converge.flow.admission import normalized_payload, timing_fields
from converge.flow.registry import Registry
from converge.model.clock import Clock
from converge.model.errors import IdentityConflict, InvalidMessage, InvalidTiming, UnknownJobType
from converge.model.records import Admission
from converge.model.submission import Submission
from converge.screening.limits import check_body
from converge.screening.message import check_identifier
from converge.store.operations import OperationStore

if TYPE_CHECKING:
    from converge.operate.cancel import CancelResult

IDEMPOTENCY_KEY = re.compile(r"^[\x20-\x7e]{1,128}$")
"""1-128 printable ASCII characters, space included (0x20-0x7E), once the header's outer whitespace is removed."""
HEADER_WHITESPACE = " \t"
"""What HTTP strips around a field value (RFC 9110's OWS): proxies and API Gateway may drop it, so it is never part
of a key. A space inside a key is part of it."""
DEFAULT_RETENTION_SECONDS = 24 * 3600
_ASSUMED_ROLE_SESSION = re.compile(r"^(arn:[^:]+:sts::\d{12}:assumed-role/[^/]+)/.+$")
STATUS_FIELDS = ("operation_id", "job_type", "state", "attempts", "last_error", "updated_at", "run_at", "expires_at")
MAX_REASON_CHARS = 300
ADMIN_FIELDS = (*STATUS_FIELDS, "correlation_id", "created_at", "submitted_by")


@dataclass(frozen=True)
class ApiResponse:
    status: int
    body: dict[str, Any]
    headers: dict[str, str] | None = None


def caller_principal(arn: str) -> str:
    """The stable identity of a signing principal: an assumed-role session stands for its role.

    A session name changes with every credential refresh (ECS task, new Lambda sandbox, `aws sts
    assume-role`), but a retry from the same service must find its own Idempotency-Keys.
    """
    match = _ASSUMED_ROLE_SESSION.match(arn)
    return match.group(1) if match else arn


def operation_id_for(caller: str, key: str) -> str:
    """The operation id for a caller's request key: stable, so every replay names the same operation."""
    return "api-" + hashlib.sha256(f"{caller}\n{key}".encode()).hexdigest()[:40]


def error(status: int, code: str, message: str) -> ApiResponse:
    return ApiResponse(status, {"error": code, "message": message})


def json_body(body: str | None, base64_encoded: bool, blank: dict[str, Any] | None = None) -> Any:
    """The body's JSON, decoded from base64 first when API Gateway says it is, or the 400 `malformed_json`
    (an `ApiResponse`, which no JSON document is). An empty or blank body is `blank` when given, else malformed."""
    try:
        text = base64.b64decode(body or "", validate=True).decode() if base64_encoded else body
        if blank is not None and not (text and text.strip()):
            return blank
        return json.loads(text or "")
    except (ValueError, RecursionError, binascii.Error):  # RecursionError: nesting deeper than the parser goes
        return error(400, "malformed_json", "the request body is not valid JSON")


class Admissions(Protocol):
    """What the API admits and cancels through (the runtime: `Converge.admit` and `Converge.cancel`)."""

    def admit(self, submission: Submission) -> Admission: ...

    def cancel(self, operation_id: str, reason: str, actor: str = "operator") -> CancelResult: ...


class EnqueueApi:
    """POST /jobs/{job_type}, GET /operations/{id} and GET /admin/operations/{id}, independent of the HTTP
    framework around them."""

    def __init__(
        self,
        admissions: Admissions,
        registry: Registry,
        operations: OperationStore,
        clock: Clock,
        idempotency_table: str,
        dynamodb_client: Any,
        retention_seconds: int = DEFAULT_RETENTION_SECONDS,
    ) -> None:
        self._admissions = admissions
        self._registry = registry
        self._operations = operations
        self._clock = clock
        self._config = IdempotencyConfig(
            event_key_jmespath="[caller, key]",
            # the operation's content and options, as admission compares them (the caller is in the key)
            payload_validation_jmespath="[job_type, payload, run_at, expires_at]",
            expires_after_seconds=retention_seconds,
            raise_on_no_idempotency_key=True,
            response_hook=_mark_replayed,  # type: ignore[arg-type]
        )
        persistence = DynamoDBPersistenceLayer(
            table_name=idempotency_table,
            boto3_client=dynamodb_client,
        )
        self._admit = idempotent_function(
            data_keyword_argument="request",
            persistence_store=persistence,
            config=self._config,
            # v2: the validation covers the times since; records of the earlier form are not compared with a
            # hash of another shape (a retry falls through to admission, which is idempotent on the same content)
            key_prefix="converge.enqueue.v2",
        )(self._enqueue)

    def register_context(self, context: Any) -> None:
        """Lets Powertools expire an in-flight record if this invocation times out."""
        self._config.register_lambda_context(context)

    def submit(
        self,
        caller: str | None,
        key: str | None,
        job_type: str,
        body: str | None,
        correlation_id: str | None,
        base64_encoded: bool = False,
        run_at: str | None = None,
        expires_at: str | None = None,
    ) -> ApiResponse:
        try:
            check_body(body, "the request body")  # size first: before any decoding, parsing or pattern
        except InvalidMessage as exc:
            return error(413, "payload_too_large", str(exc))
        if not caller:
            return error(403, "forbidden", "the request carries no caller identity")
        key = key.strip(HEADER_WHITESPACE) if key is not None else None
        if not key:
            return error(400, "missing_idempotency_key", "the Idempotency-Key header is required")
        if not IDEMPOTENCY_KEY.fullmatch(key):
            return error(
                400,
                "invalid_idempotency_key",
                "Idempotency-Key must be 1-128 printable ASCII characters (space included, 0x20-0x7E)",
            )
        payload = json_body(body, base64_encoded)
        if isinstance(payload, ApiResponse):
            return payload
        if not isinstance(payload, dict):
            return error(400, "invalid_payload", "the request body must be a JSON object (the job's payload)")
        try:
            if correlation_id is not None:
                check_identifier("correlation_id", correlation_id)
            stored = normalized_payload(self._registry, job_type, payload)
            times = timing_fields(run_at, expires_at, self._clock.now())
        except UnknownJobType as exc:
            return error(400, "unknown_job_type", str(exc))
        except InvalidTiming as exc:
            return error(400, "invalid_timing", str(exc))
        except InvalidMessage as exc:
            return error(400, "invalid_payload", str(exc))
        request = {
            "caller": caller,
            "key": key,
            "job_type": job_type,
            "payload": stored,
            "correlation_id": correlation_id,
            "run_at": times[0],
            "expires_at": times[1],
        }
        try:
            result = self._admit(request=request)
        except IdempotencyValidationError:
            return error(422, "idempotency_key_reused", "this Idempotency-Key was used with a different request")
        except IdempotencyAlreadyInProgressError:
            return error(409, "request_in_progress", "a request with this Idempotency-Key is still in progress")
        except IdentityConflict:
            # The request record expired, but the operation it created is still there with other content.
            return error(422, "idempotency_key_reused", "this Idempotency-Key was used with a different request")
        replayed = bool(result.pop("_replayed", False))
        headers = {"Location": f"/operations/{result['operation_id']}"}
        if replayed:
            headers["Idempotent-Replayed"] = "true"
        return ApiResponse(202, result, headers)

    def _enqueue(self, request: dict[str, Any]) -> dict[str, Any]:
        operation_id = operation_id_for(request["caller"], request["key"])
        submission = Submission(
            request["job_type"],
            operation_id,
            request["payload"],
            request["correlation_id"],
            submitted_by=request["caller"],
            run_at=request.get("run_at"),
            expires_at=request.get("expires_at"),
        )
        admission = self._admissions.admit(submission)
        return {
            "operation_id": operation_id,
            "job_type": request["job_type"],
            "state": admission.operation.state.value,
        }

    def status(self, caller: str | None, operation_id: str) -> ApiResponse:
        """An operation this caller enqueued; any other (another caller's, or enqueued by other means)
        gets the same 404 as one that does not exist."""
        if not caller:
            return error(403, "forbidden", "the request carries no caller identity")
        operation = self._read(operation_id)
        if isinstance(operation, ApiResponse):
            return operation
        if operation.submitted_by != caller:
            return _not_found(operation_id)
        view = operation.to_json()
        return ApiResponse(200, {key: view[key] for key in STATUS_FIELDS})

    def cancel(self, caller: str | None, operation_id: str, body: str | None) -> ApiResponse:
        """Cancel one of this caller's operations that has not started: 200 when cancelled, 409 when too late.

        The body is `{"reason": "..."}`; another caller's operation gets the same 404 as a missing one."""
        if not caller:
            return error(403, "forbidden", "the request carries no caller identity")
        try:
            check_body(body, "the request body")
            reason = json.loads(body or "").get("reason")
        except (InvalidMessage, ValueError, AttributeError, RecursionError):
            return error(400, "invalid_body", 'the body must be a JSON object {"reason": "..."}')
        if not isinstance(reason, str) or not reason.strip() or len(reason) > MAX_REASON_CHARS:
            return error(400, "invalid_reason", f"reason must be a non-empty string of at most {MAX_REASON_CHARS}")
        operation = self._read(operation_id)
        if isinstance(operation, ApiResponse):
            return operation
        if operation.submitted_by != caller:
            return _not_found(operation_id)
        result = self._admissions.cancel(operation_id, reason, actor=f"api:{caller}")
        return ApiResponse(200 if result.applied else 409, result.to_json())

    def admin_status(self, operation_id: str) -> ApiResponse:
        """Any operation, with who submitted it: the route IAM grants to operators only."""
        operation = self._read(operation_id)
        if isinstance(operation, ApiResponse):
            return operation
        view = operation.to_json()
        return ApiResponse(200, {key: view[key] for key in ADMIN_FIELDS})

    def _read(self, operation_id: str) -> Any:
        try:
            check_identifier("operation_id", operation_id)
        except InvalidMessage as exc:
            return error(400, "invalid_operation_id", str(exc))
        operation = self._operations.get(operation_id)
        return operation if operation is not None else _not_found(operation_id)


def _not_found(operation_id: str) -> ApiResponse:
    return error(404, "not_found", f"no operation {operation_id!r}")


def _mark_replayed(response: Any, record: Any) -> Any:
    if isinstance(response, dict):
        return {**response, "_replayed": True}
    return response
