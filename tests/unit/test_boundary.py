"""The boundary's exact answers: what an id, a payload and a raw item may be, at the limits, in the words used.

Pure: no AWS call. Each refusal's text is what a producer sees (HTTP 400) or what is stored on a REJECTED
operation, so it is pinned word for word where it names the rule.
"""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from converge.model.envelope import canonical_json, plain
from converge.model.errors import InvalidMessage, UnusableRequest
from converge.screening.identifiers import Identifier
from converge.screening.limits import MAX_PAYLOAD_BYTES
from converge.screening.message import check_identifier, read_envelope, validate_payload
from converge.store.codecs import MAX_NUMBER_DIGITS, request_from_image

from .conftest import Notice

RULE = "use 1-128 characters from letters, digits and . _ : - starting with a letter or digit"


def refusal(value: object) -> str:
    with pytest.raises(InvalidMessage) as refused:
        check_identifier("operation_id", value)
    return str(refused.value)


def test_an_id_is_one_to_128_characters():
    assert check_identifier("operation_id", "a") == "a"
    assert check_identifier("operation_id", "a" * 128) == "a" * 128
    assert refusal("") == f"operation_id '' is invalid: {RULE}"
    assert refusal("a" * 129) == f"operation_id '{'a' * 40}…' is invalid: {RULE}"


def test_a_refused_id_is_shown_up_to_forty_characters():
    assert refusal("-" + "b" * 39) == f"operation_id '{'-' + 'b' * 39}' is invalid: {RULE}"  # 40: shown whole
    assert refusal("-" + "b" * 40) == f"operation_id '{'-' + 'b' * 39}…' is invalid: {RULE}"  # 41: cut at 40


def test_an_id_that_is_not_a_string_is_shown_as_text():
    assert refusal(12345) == f"operation_id '12345' is invalid: {RULE}"
    assert refusal(["x"] * 30) == f"operation_id {str(['x'] * 30)[:40] + '…'!r} is invalid: {RULE}"


def test_canonical_json_sorts_keys_and_keeps_text_as_written():
    assert canonical_json({"b": 1, "a": "café"}) == '{"a":"café","b":1}'


def test_plain_numbers_are_integers_when_whole():
    assert plain(Decimal("3")) == 3 and isinstance(plain(Decimal("3")), int)
    assert plain(Decimal("2.5")) == 2.5 and isinstance(plain(Decimal("2.5")), float)


def payload_of(size: int) -> dict:
    """A payload of exactly `size` bytes of canonical JSON, each value within the per-string limit."""
    payload = {f"k{n}": "" for n in range(6)}
    room = size - len(canonical_json(payload).encode())
    for n in range(6):
        payload[f"k{n}"] = "a" * min(1000, room)
        room -= len(payload[f"k{n}"])
    assert len(canonical_json(payload).encode()) == size
    return payload


def test_a_payload_of_exactly_the_limit_passes_the_size_check_and_one_byte_more_is_refused_saying_so():
    with pytest.raises(InvalidMessage) as at_limit:  # past the size check, the model refuses the unknown keys
        validate_payload(Notice, payload_of(MAX_PAYLOAD_BYTES))
    assert "bytes" not in str(at_limit.value)
    with pytest.raises(InvalidMessage) as refused:
        validate_payload(Notice, payload_of(MAX_PAYLOAD_BYTES + 1))
    assert str(refused.value) == f"payload is {MAX_PAYLOAD_BYTES + 1} bytes; the limit is {MAX_PAYLOAD_BYTES} bytes"


class Flagged(Notice):
    urgent: bool = False
    note: Identifier = "none"
    reference: int = 0


def test_a_sensitive_value_after_a_boolean_is_still_refused():
    # The boolean is passed over; the note after it is still checked
    with pytest.raises(InvalidMessage, match="note"):
        validate_payload(
            Flagged, {"user_id": "2c9d6c2e-8f5e-4c43-9a51-0d2b9d0c1f00", "urgent": True, "note": "4111111111111111"}
        )


def test_a_number_that_is_a_card_number_is_refused_like_the_same_text():
    with pytest.raises(InvalidMessage, match="reference"):
        validate_payload(Flagged, {"user_id": "2c9d6c2e-8f5e-4c43-9a51-0d2b9d0c1f00", "reference": 4111111111111111})


def envelope_body(**fields: object) -> str:
    return json.dumps({"v": 1, "operation_id": "op-1", "job_type": "mail.notice.v1", "payload": {}, **fields})


def test_the_envelopes_ids_are_named_when_refused():
    with pytest.raises(InvalidMessage) as bad_id:
        read_envelope(envelope_body(operation_id="op 1"))
    assert str(bad_id.value).startswith("operation_id 'op 1' is invalid")
    with pytest.raises(InvalidMessage) as bad_correlation:
        read_envelope(envelope_body(correlation_id="not ok"))
    assert str(bad_correlation.value).startswith("correlation_id 'not ok' is invalid")


@pytest.mark.parametrize(
    ("version", "shown"),
    [(None, "None"), (2, "2"), (999, "999"), (1000, "'?'"), (-1000, "'?'"), ("1", "'?'")],
)
def test_an_unsupported_version_is_shown_when_it_is_small_enough_to_read(version, shown):
    with pytest.raises(InvalidMessage) as refused:
        read_envelope(envelope_body(v=version))
    assert str(refused.value) == f"message version {shown} is not supported (expected 1)"


# -- raw items: the types DynamoDB holds, and what a payload may contain --------------------------------------


def item(**attributes: dict) -> dict:
    return {"operation_id": {"S": "op-1"}, "job_type": {"S": "mail.notice.v1"}, "payload": {"M": {}}, **attributes}


def unusable(image: dict) -> str:
    with pytest.raises(UnusableRequest) as refused:
        request_from_image(image)
    return str(refused.value)


def test_payload_values_of_each_type_read_as_their_python_value():
    request = request_from_image(
        item(payload={"M": {"s": {"S": "x"}, "n": {"N": "7"}, "b": {"BOOL": False}, "z": {"NULL": True}}})
    )
    assert request.payload == {"s": "x", "n": 7, "b": False, "z": None}


def test_a_number_of_dynamodbs_full_precision_is_read_and_a_longer_one_is_refused():
    fits = "9" * MAX_NUMBER_DIGITS
    assert request_from_image(item(payload={"M": {"n": {"N": fits}}})).payload == {"n": int(fits)}
    assert "payload.n" in unusable(item(payload={"M": {"n": {"N": "9" * (MAX_NUMBER_DIGITS + 1)}}}))


@pytest.mark.parametrize("value", [{"L": [{"S": "x"}]}, {"M": {"k": {"S": "x"}}}], ids=["list", "map"])
def test_nested_values_are_refused(value):
    assert (
        unusable(item(payload={"M": {"k": value}}))
        == "payload.k: nested objects and lists are not allowed in a job payload"
    )


def test_other_types_are_refused_naming_their_type():
    assert unusable(item(payload={"M": {"k": {"SS": ["x"]}}})) == (
        "payload.k: string set values are not allowed in a job payload (strings, integers and booleans only)"
    )


def test_a_value_of_a_type_dynamodb_does_not_have_is_named_unknown():
    assert unusable(item(payload={"M": {"k": {"XX": "1"}}})).startswith("payload.k: unknown values are not allowed")
    assert unusable(item(payload={"XX": "1"})) == "payload must be a map (M) of primitive values, not an unknown type"
    assert unusable(item(job_type={"XX": "1"})) == "job_type must be a string (S), not an unknown type"


def test_a_boolean_must_be_a_boolean():
    assert "payload.k" in unusable(item(payload={"M": {"k": {"BOOL": "yes"}}}))


def test_an_optional_attribute_may_be_null_and_a_required_one_may_not_be_missing():
    assert request_from_image(item(correlation_id={"NULL": True})).correlation_id is None
    image = item()
    del image["operation_id"]
    assert "operation_id" in unusable(image)


def test_an_attribute_that_is_not_a_typed_value_is_refused_as_an_unknown_type():
    # A single-character plain string looks like a one-key mapping to a careless check; it is no typed value
    assert unusable(item(job_type="S")) == "job_type must be a string (S), not an unknown type"


def test_the_submitted_by_attribute_is_read_back():
    request = request_from_image(item(submitted_by={"S": "arn:aws:iam::123456789012:user/p"}))
    assert request.submitted_by == "arn:aws:iam::123456789012:user/p"
