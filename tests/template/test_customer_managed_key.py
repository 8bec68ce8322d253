"""The KmsKeyArn parameter in the template: one condition, every encrypted resource, every role that uses one.

What the stack does with a key, deployed, is tests/localcloud/test_customer_managed_key.py; these are the rules
that keep the templates right as resources and roles are added (template.yaml, converge's application and the
scaffold's template).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cfnlint.api import ManualArgs, lint_file

from converge_cli.commands.init import SCAFFOLD, scaffold
from localcloud.template import load_sam_template
from tests.conftest import TEMPLATE
from tests.template.conftest import APPLICATION

OPTIONAL_KEY = {"Fn::If": ["HasKmsKey", {"Ref": "KmsKeyArn"}, {"Ref": "AWS::NoValue"}]}
KEY_POLICIES = {"KeySendersPolicy", "KeyReadersPolicy", "ProducerKeyPolicy"}
EXAMPLE_KEY = "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"


@pytest.fixture(scope="module", params=["template.yaml", "application", "scaffold"])
def sam(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    if request.param == "template.yaml":
        return load_sam_template(TEMPLATE)
    if request.param == "application":
        return load_sam_template(APPLICATION)
    project = tmp_path_factory.mktemp("init") / "shop-jobs"
    scaffold(project)
    return load_sam_template(project / "template.yaml")


@pytest.fixture(scope="module")
def functions_sam() -> dict[str, Any]:
    """The template that declares converge's functions and roles: converge's application (which template.yaml and
    every project's template include)."""
    return load_sam_template(APPLICATION)


def _resources(sam: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {lid: r for lid, r in sam["Resources"].items() if r["Type"] == kind}


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _key_references(node: Any, path: str = "") -> Iterator[str]:
    """Where the template refers to the KmsKeyArn parameter, as paths."""
    if isinstance(node, dict):
        if node == {"Ref": "KmsKeyArn"}:
            yield path
        for key, value in node.items():
            yield from _key_references(value, f"{path}/{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _key_references(value, f"{path}/{index}")


def test_the_key_is_used_only_through_the_one_condition(sam: dict[str, Any]) -> None:
    # Given the parameter, empty by default (AWS-managed keys) / Then one condition tests it
    assert sam["Parameters"]["KmsKeyArn"]["Default"] == ""
    if "Conditions" in sam:  # a project's template may only pass the key on to converge's application
        assert sam["Conditions"]["HasKmsKey"] == {"Fn::Not": [{"Fn::Equals": [{"Ref": "KmsKeyArn"}, ""]}]}
    # And every other use of the key is the condition's If, or sits in a resource deployed only under it
    unguarded = []
    for logical_id, resource in sam["Resources"].items():
        if resource.get("Condition") == "HasKmsKey":
            continue
        for path in _key_references(resource):
            passed_on = (
                resource["Type"] == "AWS::Serverless::Application" and path == "/Properties/Parameters/KmsKeyArn"
            )
            if not (path.endswith("/Fn::If/1") or passed_on):
                unguarded.append(f"{logical_id}{path}")
    for section in ("Globals", "Outputs"):
        for path in _key_references(sam.get(section, {})):
            output = path.split("/")[1]
            if not (path.endswith("/Fn::If/1") or sam[section].get(output, {}).get("Condition") == "HasKmsKey"):
                unguarded.append(f"{section}{path}")
    assert unguarded == []


def test_every_encrypted_resource_takes_the_key_when_given(sam: dict[str, Any]) -> None:
    # Then every table, queue, log group, topic and secret, and the functions' environment, name it under the If
    missing = []
    for logical_id, table in _resources(sam, "AWS::DynamoDB::Table").items():
        sse = table["Properties"].get("SSESpecification", {})
        if sse != {"SSEEnabled": True, "SSEType": "KMS", "KMSMasterKeyId": OPTIONAL_KEY}:
            missing.append(logical_id)
    for logical_id, queue in _resources(sam, "AWS::SQS::Queue").items():
        properties = queue["Properties"]
        if properties.get("KmsMasterKeyId") != OPTIONAL_KEY or properties.get("SqsManagedSseEnabled") != {
            "Fn::If": ["HasKmsKey", False, True]
        }:
            missing.append(logical_id)
    for kind, key in (("AWS::Logs::LogGroup", "KmsKeyId"), ("AWS::SNS::Topic", "KmsMasterKeyId"),
                      ("AWS::SecretsManager::Secret", "KmsKeyId")):  # fmt: skip
        missing += [lid for lid, r in _resources(sam, kind).items() if r["Properties"].get(key) != OPTIONAL_KEY]
    assert missing == []
    functions = _resources(sam, "AWS::Serverless::Function")
    if functions:
        assert sam["Globals"]["Function"]["KmsKeyArn"] == OPTIONAL_KEY
        assert all("KmsKeyArn" not in f["Properties"] for f in functions.values())  # none overrides it
    else:  # the reference application's own template: converge's functions are its application's, which it passes
        [application] = _resources(sam, "AWS::Serverless::Application").values()
        assert application["Properties"]["Parameters"]["KmsKeyArn"] == {"Ref": "KmsKeyArn"}


def _actions_by_role(sam: dict[str, Any]) -> dict[str, set[str]]:
    """Each role's allowed actions: its own policies and the AWS::IAM::Policy resources attached to it."""
    actions: dict[str, set[str]] = {lid: set() for lid in _resources(sam, "AWS::IAM::Role")}
    for logical_id, role in _resources(sam, "AWS::IAM::Role").items():
        for policy in role["Properties"].get("Policies", []):
            for statement in policy["PolicyDocument"]["Statement"]:
                actions[logical_id] |= set(_as_list(statement["Action"]))
    for logical_id, policy in _resources(sam, "AWS::IAM::Policy").items():
        if logical_id in KEY_POLICIES:
            continue
        for role in policy["Properties"]["Roles"]:
            for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
                actions[role["Ref"]] |= set(_as_list(statement["Action"]))
    return actions


def _key_policy(sam: dict[str, Any], logical_id: str) -> tuple[set[str], set[str]]:
    """A key policy's roles and actions; it is deployed only with a key, and grants on the key alone."""
    policy = sam["Resources"][logical_id]
    assert policy["Condition"] == "HasKmsKey"
    [statement] = policy["Properties"]["PolicyDocument"]["Statement"]
    assert statement["Effect"] == "Allow" and statement["Resource"] == {"Ref": "KmsKeyArn"}
    roles = {role["Ref"] for role in policy["Properties"].get("Roles", [])}
    return roles, set(_as_list(statement["Action"]))


def test_each_role_is_granted_what_its_use_of_encrypted_resources_needs_and_no_more(
    functions_sam: dict[str, Any],
) -> None:
    sam = functions_sam
    # Given what each role does with queues, tables, streams and secrets
    actions = _actions_by_role(sam)
    sends = {role for role, acts in actions.items() if "sqs:SendMessage" in acts}
    uses = {
        role
        for role, acts in actions.items()
        if any(a.startswith(("sqs:", "dynamodb:", "secretsmanager:")) and a != "dynamodb:ListStreams" for a in acts)
    }
    senders, sender_actions = _key_policy(sam, "KeySendersPolicy")
    readers, reader_actions = _key_policy(sam, "KeyReadersPolicy")
    # Then a sender to an (encrypted) queue may generate data keys and decrypt; the others only decrypt
    assert sender_actions == {"kms:Decrypt", "kms:GenerateDataKey"}
    assert reader_actions == {"kms:Decrypt"}
    assert senders == sends
    # And every other role that touches an encrypted resource may decrypt; a role in neither touches none
    assert not senders & readers
    assert uses - sends <= readers
    assert readers - uses <= {"RecurringRole"}  # a recurring job's pass uses its own tables, in the catalogue's policy
    # And a producer gets the key as a managed policy of its own, beside ProducerPolicy
    producer_roles, producer_actions = _key_policy(sam, "ProducerKeyPolicy")
    assert producer_roles == set() and producer_actions == {"kms:Decrypt"}
    assert sam["Outputs"]["ProducerKeyPolicyArn"] == {"Condition": "HasKmsKey", "Value": {"Ref": "ProducerKeyPolicy"}}


@pytest.mark.parametrize("parameters", [[], [f"KmsKeyArn={EXAMPLE_KEY}"]], ids=["no key", "a key"])
def test_cfn_lint_is_clean_with_and_without_a_key(parameters: list[str], tmp_path: Path) -> None:
    # Given the template and a project's template from the scaffold, linted with the parameter empty and set
    project = tmp_path / "shop-jobs"
    scaffold(project)
    for template in (TEMPLATE, project / "template.yaml"):
        matches = lint_file(template, config=ManualArgs(parameters=parameters) if parameters else None)
        # Then nothing is reported
        assert [f"{template.name}: {m.rule.id} {m.message} ({m.linenumber})" for m in matches] == []


def test_the_scaffold_passes_the_key_to_converges_application() -> None:
    # The scaffold's template takes the same parameter and hands it to converge's application, which uses it
    ours, theirs = load_sam_template(APPLICATION), load_sam_template(SCAFFOLD / "template.yaml")
    settings = ({k: v for k, v in t["Parameters"]["KmsKeyArn"].items() if k != "Description"} for t in (ours, theirs))
    assert next(settings) == next(settings)
    [application] = _resources(theirs, "AWS::Serverless::Application").values()
    assert application["Properties"]["Parameters"]["KmsKeyArn"] == {"Ref": "KmsKeyArn"}
