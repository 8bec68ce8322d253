"""The message base model: primitive ids only, small, and nothing that looks like PII or a secret."""

from __future__ import annotations

import uuid

import pytest

from converge.errors import InvalidMessage
from converge.message import MAX_PAYLOAD_BYTES, Envelope, JobMessage, validate_payload


class Credit(JobMessage):
    partner_id: uuid.UUID
    amount_cents: int
    reason_code: str
    urgent: bool = False


def valid() -> dict:
    return {"partner_id": str(uuid.uuid4()), "amount_cents": 500, "reason_code": "WELCOME"}


def test_a_valid_payload_becomes_the_model():
    # Given a payload of primitive ids / When it is validated / Then the model holds typed values
    message = validate_payload(Credit, valid())
    assert isinstance(message.partner_id, uuid.UUID)
    assert message.amount_cents == 500


@pytest.mark.parametrize(
    ("change", "field", "why"),
    [
        ({"reason_code": "ana@example.com"}, "reason_code", "e-mail"),
        ({"reason_code": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjMifQ.sig"}, "reason_code", "JWT"),
        ({"reason_code": "AKIAABCDEFGHIJKLMNOP"}, "reason_code", "credential"),
        ({"reason_code": "+44 20 7946 0958"}, "reason_code", "phone"),
        ({"reason_code": "aB3dE5gH7jK9mN1pQ3sT5vX7zA9"}, "reason_code", "token"),
        ({"reason_code": "line\nbreak"}, "reason_code", "control"),
        ({"password": "hunter2"}, "password", "Extra inputs"),
        ({"amount_cents": "500"}, "amount_cents", "integer"),
        ({"amount_cents": 5.5}, "amount_cents", "floating-point"),
        ({"reason_code": {"nested": "x"}}, "reason_code", "nested"),
        ({"reason_code": ["a"]}, "reason_code", "nested"),
        ({"reason_code": "x" * 600}, "reason_code", "at most"),
        ({"partner_id": "not-a-uuid"}, "partner_id", "UUID"),
    ],
)
def test_bad_payloads_are_rejected_naming_the_field(change, field, why):
    # Given a payload with one bad field / When validated / Then InvalidMessage names the field and the reason
    payload = {**valid(), **change}
    with pytest.raises(InvalidMessage) as error:
        validate_payload(Credit, payload)
    assert field in str(error.value)
    assert why in str(error.value)


def test_oversized_payloads_are_rejected_with_the_cap():
    class Wide(JobMessage):
        a: str
        b: str
        c: str
        d: str
        e: str
        f: str
        g: str
        h: str
        i: str

    payload = {name: "x" * 500 for name in "abcdefghi"}
    with pytest.raises(InvalidMessage, match=f"limit is {MAX_PAYLOAD_BYTES} bytes"):
        validate_payload(Wide, payload)


@pytest.mark.parametrize("name", ["password", "user_email", "apiKey", "reset_token", "phone_number", "client_secret"])
def test_models_cannot_declare_sensitive_field_names(name):
    # Given a model that declares a field named like PII or a secret / Then defining it fails naming the field
    with pytest.raises(TypeError, match=name):
        type("Leaky", (JobMessage,), {"__annotations__": {name: str}})


@pytest.mark.parametrize("annotation", [dict, list[str], float, "Credit"])
def test_models_cannot_declare_non_primitive_fields(annotation):
    with pytest.raises(TypeError, match="must be str, int, bool or UUID"):
        type("Nested", (JobMessage,), {"__annotations__": {"thing": annotation if annotation != "Credit" else Credit}})


def test_uuids_and_content_hashes_are_not_mistaken_for_tokens():
    class Doc(JobMessage):
        partner_id: str
        sha256: str

    digest = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
    message = validate_payload(Doc, {"partner_id": str(uuid.uuid4()), "sha256": digest})
    assert message.sha256 == digest


@pytest.mark.parametrize(
    ("body", "why"),
    [
        ("not json", "not JSON"),
        ("[1,2]", "not a JSON object"),
        ('{"v": 2, "operation_id": "a", "job_type": "a.b.v1", "payload": {}}', "version 2"),
        ('{"v": 1, "operation_id": "bad id with spaces", "job_type": "a.b.v1", "payload": {}}', "operation_id"),
        ('{"v": 1, "job_type": "a.b.v1", "payload": {}}', "operation_id"),
    ],
)
def test_envelopes_that_are_not_version_one_messages_are_invalid(body, why):
    with pytest.raises(InvalidMessage, match=why):
        Envelope.from_body(body)
