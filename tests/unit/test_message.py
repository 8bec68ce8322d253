"""The message base model: identifier types only, small, and nothing that looks like PII or a secret."""

from __future__ import annotations

import enum
import uuid
from typing import Annotated, Any, Literal

import pytest
from pydantic import Field

from converge.model.errors import InvalidMessage
from converge.screening.identifiers import Allow, Code, Digest, ExternalId, Identifier, ObjectKey, Ulid, identifier
from converge.screening.limits import MAX_PAYLOAD_BYTES
from converge.screening.message import JobMessage, read_envelope, sensitive_value_reason, validate_payload


class Plan(enum.StrEnum):
    BASIC_MONTHLY = "basic monthly"
    PRO_YEARLY = "pro yearly"


class Credit(JobMessage):
    partner_id: uuid.UUID
    amount_cents: Annotated[int, Field(gt=0, le=1_000_000)]
    reason_code: Code
    order_id: Identifier | None = None
    document_key: ObjectKey | None = None
    customer_ref: ExternalId | None = None
    plan: Plan | None = None
    channel: Literal["web", "api"] = "api"
    urgent: bool = False


def valid(**changes: Any) -> dict[str, Any]:
    return {"partner_id": str(uuid.uuid4()), "amount_cents": 500, "reason_code": "welcome", **changes}


def test_a_valid_payload_becomes_the_model() -> None:
    # Given a payload of identifiers / When it is validated / Then the model holds typed values
    message = validate_payload(
        Credit,
        valid(
            order_id="ORD-2024-000123",
            document_key="Invoices/ACME-Corp/2024/INV-000123.pdf",
            customer_ref="cus_NffrFeUfNV2Hib",
            plan="basic monthly",
            channel="web",
        ),
    )
    assert isinstance(message.partner_id, uuid.UUID)
    assert message.amount_cents == 500
    assert message.plan is Plan.BASIC_MONTHLY


@pytest.mark.parametrize(
    ("change", "field", "why"),
    [
        ({"order_id": "ana@example.com"}, "order_id", "e-mail address (email)"),
        ({"order_id": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjMifQ.sig"}, "order_id", "a JWT (jwt)"),
        ({"order_id": "AKIAIOSFODNN7EXAMPLE"}, "order_id", "cloud provider's key (cloud_key)"),
        ({"customer_ref": "+44 20 7946 0958"}, "customer_ref", "phone number (phone)"),
        ({"order_id": "4111111111111111"}, "order_id", "payment card number (payment_card)"),
        ({"order_id": "kT3b9XqZ2mN8vR4pL6sY1wC5dF7gH0jK"}, "order_id", "high-entropy secret (secret)"),
        ({"order_id": "line\nbreak"}, "order_id", "control characters"),
        ({"plan": "alice@example.com"}, "plan", "e-mail address"),  # named even where the type would refuse it
        ({"password": "hunter2"}, "password", "Extra inputs"),
        ({"amount_cents": "500"}, "amount_cents", "integer"),
        ({"amount_cents": 0}, "amount_cents", "greater than 0"),
        ({"amount_cents": 5.5}, "amount_cents", "floating-point"),
        ({"amount_cents": 2**64}, "amount_cents", "64 bits"),
        ({"order_id": {"nested": "x"}}, "order_id", "nested"),
        ({"order_id": ["a"]}, "order_id", "nested"),
        ({"order_id": "x" * 1025}, "order_id", "at most 1024 characters"),
        ({"order_id": "x" * 200}, "order_id", "at most 128 characters"),
        ({"order_id": "basic monthly"}, "order_id", "pattern"),  # no spaces in an identifier
        ({"reason_code": "Welcome Bonus"}, "reason_code", "pattern"),
        ({"document_key": "/etc/passwd"}, "document_key", "pattern"),
        ({"plan": "gold"}, "plan", "basic monthly"),
        ({"partner_id": "not-a-uuid"}, "partner_id", "UUID"),
    ],
)
def test_bad_payloads_are_rejected_naming_the_field(change: dict[str, Any], field: str, why: str) -> None:
    # Given a payload with one bad field / When validated / Then InvalidMessage names the field and the reason
    with pytest.raises(InvalidMessage) as error:
        validate_payload(Credit, valid(**change))
    assert field in str(error.value)
    assert why in str(error.value)


@pytest.mark.parametrize("value", ["ana@example.com", "4111111111111111", "AKIAIOSFODNN7EXAMPLE", "hunter2"])
def test_refusals_never_echo_the_value(value: str) -> None:
    with pytest.raises(InvalidMessage) as error:
        validate_payload(Credit, valid(order_id=value if value != "hunter2" else "u-1", password=value))
    assert value not in str(error.value)


def test_oversized_payloads_are_rejected_with_the_cap() -> None:
    class Wide(JobMessage):
        a: ObjectKey
        b: ObjectKey
        c: ObjectKey
        d: ObjectKey
        e: ObjectKey

    payload = {name: "x" * 1000 for name in "abcde"}
    with pytest.raises(InvalidMessage, match=f"limit is {MAX_PAYLOAD_BYTES} bytes"):
        validate_payload(Wide, payload)


@pytest.mark.parametrize(
    "name",
    ["password", "user_email", "apiKey", "reset_token", "phone_number", "client_secret", "pwd", "authorization",
     "card_no", "cvc", "national_id"],
)  # fmt: skip
def test_models_cannot_declare_sensitive_field_names(name: str) -> None:
    # Given a model that declares a field named like PII or a secret / Then defining it fails naming the field
    with pytest.raises(TypeError, match=f"\\.{name}: the field name suggests"):
        type("Leaky", (JobMessage,), {"__annotations__": {name: Identifier}})


def test_a_field_may_keep_a_refused_name_when_it_says_why() -> None:
    class Limits(JobMessage):
        token_bucket: Annotated[Identifier, Allow("field_name", "a rate limiter's bucket id, not a credential")]

    assert Limits.allowances()["token_bucket"][0].reason == "a rate limiter's bucket id, not a credential"


@pytest.mark.parametrize(
    "annotation", [str, float, dict, list[str], bytes, "Credit", Annotated[str, Field(max_length=8)]]
)
def test_models_cannot_declare_free_text_or_non_primitive_fields(annotation: Any) -> None:
    # Given a field that is neither an identifier type nor a primitive / Then the class is refused, naming it
    field = Credit if annotation == "Credit" else annotation
    with pytest.raises(TypeError, match=r"Nested\.thing: .*(bare str|not a message field type)"):
        type("Nested", (JobMessage,), {"__annotations__": {"thing": field}})


def test_content_hashes_and_uuids_are_declared_as_such_and_pass() -> None:
    class Doc(JobMessage):
        partner_id: uuid.UUID
        sha256: Digest
        ulid: Ulid

    digest = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
    compact = uuid.uuid4().hex  # 32 hex digits: a secret in an Identifier, a UUID here
    message = validate_payload(Doc, {"partner_id": compact, "sha256": digest, "ulid": "01ARZ3NDEKTSV4RRFFQ69G5FAV"})
    assert message.sha256 == digest
    with pytest.raises(InvalidMessage, match="high-entropy secret"):
        validate_payload(Credit, valid(order_id=digest))


def test_an_allowed_field_may_hold_what_one_heuristic_refuses_and_no_other() -> None:
    # Given a field allowed to hold values that pass the Luhn check (a provider's 16-digit references)
    class Settlement(JobMessage):
        provider_ref: Annotated[Identifier, Allow("payment_card", "the acquirer's references are Luhn-checked")]

    # When such a value is validated / Then it passes; an e-mail address in the same field still does not
    assert validate_payload(Settlement, {"provider_ref": "4111111111111111"}).provider_ref == "4111111111111111"
    with pytest.raises(InvalidMessage, match="email"):
        validate_payload(Settlement, {"provider_ref": "a@example.com"})
    reason = "the acquirer's references are Luhn-checked"
    assert Settlement.allowances() == {"provider_ref": (Allow("payment_card", reason),)}


def test_allow_needs_a_known_kind_and_a_reason() -> None:
    with pytest.raises(TypeError, match="unknown kind"):
        Allow("cards", "x")
    with pytest.raises(TypeError, match="reason"):
        Allow("payment_card", " ")


def test_a_team_can_define_its_own_identifier_type() -> None:
    Sku = identifier("Sku", r"^[A-Z]{3}-\d{6}$", 10)

    class Restock(JobMessage):
        sku: Sku

    assert validate_payload(Restock, {"sku": "BLU-000042"}).sku == "BLU-000042"
    with pytest.raises(InvalidMessage, match="sku"):
        validate_payload(Restock, {"sku": "blue shirt"})


def test_the_value_reason_names_the_kind_only() -> None:
    assert sensitive_value_reason("alice@example.com") == "looks like an e-mail address (email)"
    assert sensitive_value_reason("u-1001") is None


@pytest.mark.parametrize(
    ("body", "why"),
    [
        ("not json", "not JSON"),
        ("[1,2]", "not a JSON object"),
        ("[" * 5000, "not JSON"),
        ('{"v": 2, "operation_id": "a", "job_type": "a.b.v1", "payload": {}}', "version 2"),
        ('{"v": "' + "9" * 900 + '", "operation_id": "a", "job_type": "a.b.v1", "payload": {}}', "version '?'"),
        ('{"v": 1, "operation_id": "bad id with spaces", "job_type": "a.b.v1", "payload": {}}', "operation_id"),
        ('{"v": 1, "job_type": "a.b.v1", "payload": {}}', "operation_id"),
        ('{"v": 1, "operation_id": "a", "job_type": "a.b.v1", "payload": {"x": "' + "y" * 20000 + '"}}', "16384 bytes"),
    ],
)
def test_envelopes_that_are_not_version_one_messages_are_invalid(body: str, why: str) -> None:
    with pytest.raises(InvalidMessage, match=why):
        read_envelope(body)


@pytest.mark.parametrize(
    ("body", "message"),
    [("not json", "message body is not JSON"), ("[1,2]", "message body is not a JSON object")],
)
def test_a_body_that_is_no_json_object_is_refused_in_these_words(body: str, message: str) -> None:
    # The reason is stored on the REJECTED operation and sent with the dead letter: it is read by people
    with pytest.raises(InvalidMessage) as refused:
        read_envelope(body)
    assert str(refused.value) == message
