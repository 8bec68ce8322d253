"""POST /operations/{id}/signals/{name}: a signal sent over HTTP, scoped to the operation's caller as the job routes
are; POST /admin/operations/{id}/signals/{name}: any operation's, for the principals IAM grants that route.

The body is `{"payload": {...}, "signal_id": "..."}` (both optional; an empty body is a signal with no payload),
checked size first (`413`), then its shape (`400 invalid_body`), then the signal as every way in screens it
(`400 invalid_signal`, naming what: `converge.screening.signals`). The caller's route answers another caller's
operation, and one enqueued by other means, with the `404` of a missing one, as `GET /operations/{id}` does.

What became of the signal is the sender's receipt (`converge.flow.signals`), with a status of its own:
`accepted` 202, `duplicate` 200 (`Idempotent-Replayed: true`: this signal id was received before), `refused` 409
(the wait has its outcome: the signal is listed on the operation), `ended` 409 (the operation is final: nothing is
kept), `not_found` 404. Every 4xx carries `error` and `message`; a receipt's also its fields.
"""

from __future__ import annotations

from typing import Any, Protocol

from converge.api.http import ApiResponse, error, json_body
from converge.model.errors import InvalidMessage
from converge.model.signals import SignalAnswer, SignalReceipt
from converge.model.submission import SignalSubmission
from converge.screening.limits import check_body
from converge.screening.message import check_identifier
from converge.screening.signals import check_signal_name
from converge.store.operations import OperationStore

BODY_FIELDS = frozenset({"payload", "signal_id"})
STATUS = {
    SignalAnswer.ACCEPTED: 202,
    SignalAnswer.DUPLICATE: 200,
    SignalAnswer.REFUSED: 409,
    SignalAnswer.ENDED: 409,
    SignalAnswer.NOT_FOUND: 404,
}
"""The HTTP status of each answer a sender can get."""


class Senders(Protocol):
    """What the API sends signals through (the runtime's: `converge.flow.signals.Signals`)."""

    def send(self, signal: SignalSubmission) -> SignalReceipt: ...


class SignalApi:
    """The two signal routes, independent of the HTTP framework around them."""

    def __init__(self, senders: Senders, operations: OperationStore) -> None:
        self._senders = senders
        self._operations = operations

    def send(
        self,
        caller: str | None,
        operation_id: str,
        name: str,
        body: str | None,
        base64_encoded: bool = False,
        *,
        any_caller: bool = False,
    ) -> ApiResponse:
        """A signal to one of this caller's operations, or to any when `any_caller` (the admin route)."""
        try:
            check_body(body, "the request body")  # size first: before any decoding, parsing or pattern
        except InvalidMessage as exc:
            return error(413, "payload_too_large", str(exc))
        if not caller:
            return error(403, "forbidden", "the request carries no caller identity")
        try:
            check_identifier("operation_id", operation_id)
        except InvalidMessage as exc:
            return error(400, "invalid_operation_id", str(exc))
        try:
            check_signal_name(name)
        except InvalidMessage as exc:
            return error(400, "invalid_signal_name", str(exc))
        document = _document(body, base64_encoded)
        if isinstance(document, ApiResponse):
            return document
        if not any_caller:
            operation = self._operations.get(operation_id)
            if operation is None or operation.submitted_by != caller:
                return error(404, "not_found", f"no operation {operation_id!r}")
        sent_by = f"api-admin:{caller}" if any_caller else f"api:{caller}"
        signal = SignalSubmission(operation_id, name, document.get("payload"), document.get("signal_id"), sent_by)
        try:
            receipt = self._senders.send(signal)
        except InvalidMessage as exc:
            return error(400, "invalid_signal", str(exc))
        view = receipt.to_json()
        if receipt.answer is SignalAnswer.ACCEPTED:
            return ApiResponse(202, view)
        if receipt.answer is SignalAnswer.DUPLICATE:
            return ApiResponse(200, view, {"Idempotent-Replayed": "true"})
        return ApiResponse(STATUS[receipt.answer], {"error": receipt.answer.value, "message": receipt.detail, **view})


def _document(body: str | None, base64_encoded: bool) -> dict[str, Any] | ApiResponse:
    """The body's object of `payload` and `signal_id` (an empty body is an empty object), or the 400 saying why."""
    document = json_body(body, base64_encoded, blank={})
    if isinstance(document, ApiResponse):
        return document
    shape = '{"payload": {...}, "signal_id": "..."} (both optional) and nothing else'
    if not isinstance(document, dict) or not set(document) <= BODY_FIELDS:
        return error(400, "invalid_body", f"the body must be a JSON object {shape}")
    if document.get("signal_id") is not None and not isinstance(document["signal_id"], str):
        return error(400, "invalid_body", "signal_id must be a string")
    if document.get("payload") is not None and not isinstance(document["payload"], dict):
        return error(400, "invalid_body", "payload must be a JSON object of identifiers and small integers")
    return document
