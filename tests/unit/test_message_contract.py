"""The message contract at the edges: which field types a job message may declare, which names give a
field away as PII, and how an invalid payload is described (every bad field, by its path)."""

from __future__ import annotations

from typing import Annotated, Literal

import pytest
from pydantic import Field

from converge.model.errors import InvalidMessage
from converge.screening.identifiers import Identifier
from converge.screening.message import JobMessage, validate_payload


def test_identifier_shaped_types_are_allowed_alone_inside_literals_and_optional():
    # Given a message declaring a literal, a bounded optional integer and an optional id
    class Shaped(JobMessage):
        kind: Literal["full", "delta"]
        limit: Annotated[int, Field(ge=0)] | None = None
        cursor: Identifier | None = None

    # When payloads are validated against it / Then the declared constraints apply
    assert validate_payload(Shaped, {"kind": "full", "limit": 3}).limit == 3
    assert validate_payload(Shaped, {"kind": "delta", "cursor": "c-42"}).cursor == "c-42"
    with pytest.raises(InvalidMessage, match="limit"):
        validate_payload(Shaped, {"kind": "full", "limit": -1})


@pytest.mark.parametrize(
    "annotation",
    [
        Literal[1.5],  # a float in disguise
        Annotated[list[int], "ids"] | None,  # a list behind Annotated and Optional
        list[str] | None,
        dict[str, str] | None,
    ],
    ids=["float literal", "annotated list", "optional list", "optional dict"],
)
def test_nested_or_float_types_are_refused_wherever_they_hide(annotation):
    # When a message class declares one / Then defining it fails, naming the field
    with pytest.raises(TypeError, match=r"^Hidden\.field: (Literal values must be|list is not|dict is not)"):
        type("Hidden", (JobMessage,), {"__annotations__": {"field": annotation}})


@pytest.mark.parametrize("name", ["user_pin", "userPin", "customerDob", "homeAddress", "mfa_otp", "sessionJwt"])
def test_a_sensitive_word_in_a_field_name_is_refused_in_snake_and_camel_case(name):
    # When a message class declares such a field, even with an identifier's type
    # Then defining it fails, naming the word that gave it away and saying what to do instead
    with pytest.raises(TypeError) as error:
        type("Leaky", (JobMessage,), {"__annotations__": {name: Identifier}})
    message = str(error.value)
    assert message.startswith(f"Leaky.{name}: the field name suggests ")
    word = {"user_pin": "pin", "userPin": "pin", "customerDob": "dob", "homeAddress": "address"}
    word |= {"mfa_otp": "mfa", "sessionJwt": "jwt"}
    assert f"('{word[name]}')" in message
    assert message.endswith(
        "a job message carries identifiers, never PII or secrets: carry an id and fetch or regenerate "
        "the value when the job runs"
    )


@pytest.mark.parametrize("name", ["spin_count", "spinCount", "pinnedAt", "telemetryId", "authorId", "dobbinId"])
def test_a_sensitive_word_inside_a_longer_word_is_not(name):
    # Given names that contain a sensitive word only as part of another word
    # Then they are allowed: the check splits names into words, it does not hunt for letters
    model = type("Fine", (JobMessage,), {"__annotations__": {name: Identifier}})
    assert name in model.model_fields


def test_every_bad_field_is_named_by_its_path_in_one_line():
    # Given a message whose union field and literal field are both wrong
    class Pick(JobMessage):
        ref: int | Literal["latest"] | None = None
        kind: Literal["a", "b"] = "a"

    # When it is validated
    with pytest.raises(InvalidMessage) as error:
        validate_payload(Pick, {"ref": "oldest", "kind": "c"})
    # Then each problem is listed, separated by "; ", each starting with its dotted path
    parts = str(error.value).split("; ")
    assert [part.split(": ", 1)[0] for part in parts] == ["ref.int", "ref.literal['latest']", "kind"]
    assert "oldest" not in str(error.value)  # the rejected value itself is never echoed


def test_a_sensitive_value_after_a_declared_literal_value_is_still_refused():
    # Given a message whose first field is a literal the model declares, and an id field after it
    class Tagged(JobMessage):
        kind: Literal["full", "delta"]
        note: Identifier = "none"

    # When a payload carries the declared literal, then a card number in the later field
    # Then the literal is passed over, and the later field is still screened and refused, named
    with pytest.raises(InvalidMessage) as refused:
        validate_payload(Tagged, {"kind": "full", "note": "4111111111111111"})
    assert str(refused.value).startswith("payload.note: value looks like ")
    assert str(refused.value).endswith("; job payloads must not carry PII or secrets")
    # And with a harmless value there, the same payload passes
    assert validate_payload(Tagged, {"kind": "full", "note": "order-7"}).note == "order-7"
