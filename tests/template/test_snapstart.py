"""The SnapStart parameter: on by default in production only, for the workers and the enqueue API, clean every way."""

from __future__ import annotations

from typing import Any

import pytest
from cfnlint.api import ManualArgs, lint_file

from localcloud.template import load_sam_template, parameter_values, transform_sam
from tests.conftest import TEMPLATE as DEFAULT_TEMPLATE
from tests.template.conftest import APPLICATION

SNAPSTARTED = ("CriticalWorkerFunction", "DefaultWorkerFunction", "BulkWorkerFunction", "EnqueueApiFunction")


def _transformed(snapstart: str, stage: str = "dev") -> dict[str, Any]:
    packaged = load_sam_template(APPLICATION)  # converge's functions
    for resource in packaged["Resources"].values():
        properties = resource.get("Properties") or {}
        for key in ("CodeUri", "ContentUri"):
            if isinstance(properties.get(key), str):
                properties[key] = f"s3://artifacts/{properties[key].strip('/')}.zip"
    return transform_sam(packaged, parameter_values(packaged, {"SnapStart": snapstart, "Stage": stage}))


def test_snapstart_is_on_by_default_in_production_only(sam: dict[str, Any]) -> None:
    # Given converge's application template and the team's (this repository's), which passes its own on
    for template in (sam, load_sam_template(DEFAULT_TEMPLATE)):
        parameter = template["Parameters"]["SnapStart"]
        assert parameter["Default"] == "auto" and parameter["AllowedValues"] == ["auto", "true", "false"]
    # Then "true" turns it on, "false" off, and "auto" on where the stage is prod
    assert sam["Conditions"]["UseSnapStart"] == {
        "Fn::Or": [
            {"Fn::Equals": [{"Ref": "SnapStart"}, "true"]},
            {"Fn::And": [{"Fn::Equals": [{"Ref": "SnapStart"}, "auto"]}, {"Fn::Equals": [{"Ref": "Stage"}, "prod"]}]},
        ]
    }


@pytest.mark.parametrize(
    ("snapstart", "stage", "on"),
    [("auto", "prod", True), ("auto", "dev", False), ("true", "dev", True), ("false", "prod", False)],
)
def test_the_setting_decides_whether_versions_are_snapshotted(snapstart: str, stage: str, on: bool) -> None:
    # Given the application transformed with the parameter and the stage
    cfn = _transformed(snapstart, stage)
    conditions = parameter_values(load_sam_template(APPLICATION), {"SnapStart": snapstart, "Stage": stage})
    # Then the condition the functions and their versions' descriptions name is on exactly where it should be
    assert (conditions["SnapStart"], conditions["Stage"]) == (snapstart, stage)
    assert _evaluate(cfn["Conditions"]["UseSnapStart"], conditions) is on


def _evaluate(condition: Any, parameters: dict[str, str]) -> bool:
    """A condition of Fn::Or / Fn::And / Fn::Equals over parameter references, as CloudFormation evaluates it."""
    [(function, arguments)] = condition.items()
    if function == "Fn::Equals":
        values = [parameters[a["Ref"]] if isinstance(a, dict) else a for a in arguments]
        return values[0] == values[1]
    results = [_evaluate(argument, parameters) for argument in arguments]
    return any(results) if function == "Fn::Or" else all(results)


@pytest.mark.parametrize(("snapstart", "stage"), [("false", "dev"), ("true", "dev"), ("auto", "prod"), ("auto", "dev")])
def test_cfn_lint_is_clean_every_way(snapstart: str, stage: str) -> None:
    # Given cfn-lint with the parameter and the stage set each way (the template passes both to converge's
    # application), then nothing is reported in either template
    for template in (DEFAULT_TEMPLATE, APPLICATION):
        matches = lint_file(template, ManualArgs(parameters=[{"SnapStart": snapstart, "Stage": stage}]))
        assert [f"{template.name}: {m.rule.id} {m.message} ({m.linenumber})" for m in matches] == []


def test_the_workers_and_the_api_are_invoked_through_a_published_alias() -> None:
    cfn = _transformed("true")
    resources = cfn["Resources"]
    for function in SNAPSTARTED:
        # Then each has a version and the alias `live` on it...
        alias = resources[f"{function}Aliaslive"]
        assert alias["Type"] == "AWS::Lambda::Alias" and alias["Properties"]["Name"] == "live"
        version = alias["Properties"]["FunctionVersion"]["Fn::GetAtt"][0]
        assert resources[version]["Type"] == "AWS::Lambda::Version"
        # ...which names whether it is snapshotted (flipping it replaces the version, so a new one is published)
        assert resources[version]["Properties"]["Description"] == {
            "Fn::If": ["UseSnapStart", "SnapStart on", "SnapStart off"]
        }
        # ...and is deleted once replaced (a retained version's snapshot would stay cached, and billed)
        assert resources[version]["DeletionPolicy"] == "Delete"
        assert resources[function]["Properties"]["SnapStart"] == {
            "ApplyOn": {"Fn::If": ["UseSnapStart", "PublishedVersions", "None"]}
        }
    # ...the queues' event source mappings invoke the alias, not $LATEST
    mappings = [r for r in resources.values() if r["Type"] == "AWS::Lambda::EventSourceMapping"]
    by_function = {m["Properties"]["FunctionName"]["Ref"] for m in mappings}
    assert {f"{worker}Aliaslive" for worker in SNAPSTARTED[:3]} <= by_function
    assert "OutboxRelayFunction" in by_function  # a function without SnapStart keeps invoking $LATEST
    # ...and so does every route of the enqueue API
    api = next(r for r in resources.values() if r["Type"] == "AWS::ApiGatewayV2::Api")
    uris = [
        str(operation["x-amazon-apigateway-integration"]["uri"])
        for path in api["Properties"]["Body"]["paths"].values()
        for operation in path.values()
    ]
    assert uris and all("EnqueueApiFunctionAliaslive" in uri for uri in uris)


def test_no_other_function_is_snapstarted(cfn: dict[str, Any]) -> None:
    for logical_id, resource in cfn["Resources"].items():
        if resource["Type"] == "AWS::Lambda::Function" and logical_id not in SNAPSTARTED:
            assert "SnapStart" not in resource["Properties"], logical_id
