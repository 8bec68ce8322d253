"""The local cloud's resolver leaves out what AWS::NoValue leaves out, as CloudFormation does."""

from __future__ import annotations

from typing import Any

import pytest

from localcloud.intrinsics import Resolver, UnresolvableError


class _NoResources:
    def ref(self, logical_id: str) -> Any:
        raise UnresolvableError(logical_id)

    def get_att(self, logical_id: str, attribute: str) -> Any:
        raise UnresolvableError(f"{logical_id}.{attribute}")


def resolver(key: str) -> Resolver:
    return Resolver(
        parameters={"KmsKeyArn": key},
        mappings={},
        conditions={"HasKmsKey": {"Fn::Not": [{"Fn::Equals": [{"Ref": "KmsKeyArn"}, ""]}]}},
        pseudo={"AWS::Region": "us-east-1"},
        resources=_NoResources(),
    )


KEY = "arn:aws:kms:us-east-1:123456789012:key/k"
OPTIONAL_KEY = {"Fn::If": ["HasKmsKey", {"Ref": "KmsKeyArn"}, {"Ref": "AWS::NoValue"}]}
GRANT = {"Effect": "Allow", "Action": "kms:Decrypt", "Resource": {"Ref": "KmsKeyArn"}}


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        (KEY, {"RetentionInDays": 30, "KmsKeyId": KEY}),
        ("", {"RetentionInDays": 30}),  # the property is left out, not set to a placeholder
    ],
)
def test_a_property_that_an_if_resolves_to_no_value_is_left_out(key: str, expected: dict[str, Any]) -> None:
    assert resolver(key).resolve({"RetentionInDays": 30, "KmsKeyId": OPTIONAL_KEY}) == expected


def test_a_list_item_that_resolves_to_no_value_is_left_out() -> None:
    # Given a statement list whose last item exists only with a key
    statements = [{"Sid": "Always"}, {"Fn::If": ["HasKmsKey", GRANT, {"Ref": "AWS::NoValue"}]}, {"Ref": "AWS::NoValue"}]
    # Then without a key only the first remains, and with one the grant names the key
    assert resolver("").resolve(statements) == [{"Sid": "Always"}]
    assert resolver(KEY).resolve(statements) == [{"Sid": "Always"}, {**GRANT, "Resource": KEY}]


def test_no_value_on_its_own_resolves_to_none() -> None:
    assert resolver("").resolve(OPTIONAL_KEY) is None
    assert resolver("").resolve({"Ref": "AWS::NoValue"}) is None
