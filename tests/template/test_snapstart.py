"""The SnapStart parameter: off by default, on for the workers and the enqueue API, clean either way."""

from __future__ import annotations

from typing import Any

import pytest
from cfnlint.api import ManualArgs, lint_file

from localcloud.template import load_sam_template, parameter_values, transform_sam
from tests.conftest import TEMPLATE as DEFAULT_TEMPLATE
from tests.template.conftest import APPLICATION

SNAPSTARTED = ("CriticalWorkerFunction", "DefaultWorkerFunction", "BulkWorkerFunction", "EnqueueApiFunction")


def _transformed(snapstart: str) -> dict[str, Any]:
    packaged = load_sam_template(APPLICATION)  # converge's functions
    for resource in packaged["Resources"].values():
        properties = resource.get("Properties") or {}
        for key in ("CodeUri", "ContentUri"):
            if isinstance(properties.get(key), str):
                properties[key] = f"s3://artifacts/{properties[key].strip('/')}.zip"
    return transform_sam(packaged, parameter_values(packaged, {"SnapStart": snapstart}))


def test_snapstart_is_a_parameter_off_by_default(sam: dict[str, Any]) -> None:
    parameter = sam["Parameters"]["SnapStart"]
    assert parameter["Default"] == "false" and parameter["AllowedValues"] == ["true", "false"]
    assert sam["Conditions"]["UseSnapStart"] == {"Fn::Equals": [{"Ref": "SnapStart"}, "true"]}


@pytest.mark.parametrize("snapstart", ["false", "true"])
def test_cfn_lint_is_clean_either_way(snapstart: str) -> None:
    # Given cfn-lint with the parameter set each way (the template passes it to converge's application), then
    # nothing is reported in either template
    for template in (DEFAULT_TEMPLATE, APPLICATION):
        matches = lint_file(template, ManualArgs(parameters=[{"SnapStart": snapstart}]))
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
        # ...which names the SnapStart setting (flipping it replaces the version, so a new one is published)
        assert resources[version]["Properties"]["Description"] == {"Fn::Sub": "SnapStart ${SnapStart}"}
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
