"""The reference application's producers: a business row and its job, written in one transaction.

Each is called by a function of the application's own (functions/sign_up, functions/partner_credit): the handler
parses its event and delegates here. `enqueue_put` gives the job's write, which goes into the producer's own
TransactWriteItems beside the business row, so both are written or neither; the operation id is the business
operation's, so a caller's retry writes nothing twice (the row's condition fails, and the job is the same).

- a sign-up writes the user (unconfirmed, with the address it confirms) and enqueues the verification e-mail;
- a partner credit writes its request (who, how much, why: the business record of the credit) and enqueues the
  credit itself, a money job (fail-closed: it waits PAUSED until its toggle is on); a credit above the approval
  threshold is enqueued as the credit that waits for an operator's approval first (catalogue.approvals).
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError
from pydantic import BaseModel, ConfigDict, Field

from catalogue.benefits import APPROVAL_THRESHOLD_CENTS, MAX_CREDIT_CENTS
from catalogue.bindings import APPROVED_CREDIT, PARTNER_BENEFITS, PARTNER_VERIFICATION
from catalogue.clients import LazyClient
from catalogue.records import user_key
from converge import Code, Converge, Identifier, error_code

CREDIT_REQUEST_PREFIX = "credit-request#"


class SignUp(BaseModel):
    """A sign-up: the new user's id, address and name (the address stays in the user's row, never in a job)."""

    model_config = ConfigDict(extra="forbid")

    user_id: Identifier
    email: str = Field(min_length=3, max_length=254, pattern=r"^[^@\s]+@[^@\s]+$")
    display_name: str = Field(min_length=1, max_length=100)


class PartnerCredit(BaseModel):
    """A credit to a partner's balance, as the benefits team requests it: its request id names the operation."""

    model_config = ConfigDict(extra="forbid")

    request_id: Identifier
    partner_id: Identifier
    amount_cents: int = Field(gt=0, le=MAX_CREDIT_CENTS)
    benefit: Code


def verification_id(user_id: str) -> str:
    return f"verify-{user_id}"


def credit_request_key(request_id: str) -> str:
    return f"{CREDIT_REQUEST_PREFIX}{request_id}"


class Producers:
    """The two producers over the application's table, with one converge runtime and one DynamoDB client."""

    def __init__(self, converge: Converge, app_table: str, dynamodb_client: Any = None) -> None:
        self.converge = converge
        self.app_table = app_table
        self._dynamodb = LazyClient("dynamodb", dynamodb_client)

    def sign_up(self, request: SignUp) -> dict[str, Any]:
        """Write the user and enqueue their verification e-mail, atomically; a repeated sign-up writes nothing."""
        user = {
            "pk": {"S": user_key(request.user_id)},
            "email": {"S": request.email},
            "display_name": {"S": request.display_name},
            "email_confirmed": {"BOOL": False},
        }
        operation_id = verification_id(request.user_id)
        job = self.converge.enqueue_put(PARTNER_VERIFICATION.job_type, operation_id, {"user_id": request.user_id})
        return {"user_id": request.user_id, "operation_id": operation_id, "created": self._write(user, job)}

    def request_credit(self, request: PartnerCredit) -> dict[str, Any]:
        """Write the credit's request and enqueue the credit, atomically; a repeated request writes nothing. A credit
        above the threshold waits for an operator's approval (`awaits_approval`)."""
        row = {
            "pk": {"S": credit_request_key(request.request_id)},
            "partner_id": {"S": request.partner_id},
            "amount_cents": {"N": str(request.amount_cents)},
            "benefit": {"S": request.benefit},
        }
        payload = {"partner_id": request.partner_id, "amount_cents": request.amount_cents, "benefit": request.benefit}
        large = request.amount_cents > APPROVAL_THRESHOLD_CENTS
        job_type = (APPROVED_CREDIT if large else PARTNER_BENEFITS).job_type
        job = self.converge.enqueue_put(job_type, request.request_id, payload)
        return {"operation_id": request.request_id, "created": self._write(row, job), "awaits_approval": large}

    def _write(self, item: dict[str, Any], job: dict[str, Any]) -> bool:
        """The business row (new, or nothing) and the job in one transaction; False when both were written before."""
        row = {"Put": {"TableName": self.app_table, "Item": item, "ConditionExpression": "attribute_not_exists(pk)"}}
        try:
            self._dynamodb().transact_write_items(TransactItems=[row, job])
        except ClientError as exc:
            if error_code(exc) == "TransactionCanceledException" and _both_exist(exc):
                return False
            raise
        return True


def _both_exist(exc: ClientError) -> bool:
    """A retry: the row and the job were both written by an earlier call (each condition failed, nothing else)."""
    reasons = exc.response.get("CancellationReasons") or []
    return bool(reasons) and all(reason.get("Code") == "ConditionalCheckFailed" for reason in reasons)
