"""The command line finds converge's outputs where converge is: in its nested application's stack, when the stack
it is pointed at (a team's, made by `converge init`) includes converge as one application and re-exports nothing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from converge_cli.commands.init import scaffold
from converge_cli.support.target import Target
from localcloud import LocalCloud
from tests.conftest import local_aws


@pytest.fixture
def project_cloud(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalCloud]:
    local_aws(monkeypatch)
    project = tmp_path / "shop-jobs"
    scaffold(project)
    with LocalCloud.start(project / "template.yaml") as cloud:
        yield cloud


# moto re-reads each stack's template as it lists them, warning about the types its CloudFormation skips
@pytest.mark.filterwarnings("ignore:Tried to parse AWS::")
def test_the_cli_reads_converges_outputs_from_its_nested_stack(project_cloud: LocalCloud) -> None:
    # Given a project's stack, whose own outputs hold the jobs table but not converge's other names
    assert project_cloud.deployment is not None
    root = project_cloud.client("cloudformation").describe_stacks(StackName="converge")["Stacks"][0]
    own = {o["OutputKey"] for o in root["Outputs"]}
    assert "StateTableName" not in own and "CriticalQueueUrl" not in own
    own.discard("JobsTableName")  # re-exported by the project for its producers: the CLI must still look further
    # When the command line reads the deployment's outputs
    outputs = Target(stack="converge").outputs
    # Then it has converge's, as the nested application's stack holds them, beside the project's own
    application = project_cloud.deployment.nested["Converge"]
    assert outputs["StateTableName"] == application.own_outputs["StateTableName"]
    assert outputs["CriticalQueueUrl"] == application.own_outputs["CriticalQueueUrl"]
    assert outputs["GreetingsBucketName"] == project_cloud.outputs["GreetingsBucketName"]
    # And the settings it builds from them name the deployed tables
    settings = Target(stack="converge").settings
    assert settings.state_table == application.own_outputs["StateTableName"]
    assert settings.jobs_table == application.own_outputs["JobsTableName"]
