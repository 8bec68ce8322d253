"""A team sets its queues' settings as parameters of converge's application, in its own template: each number
reaches the queue, its worker and its event source as one, and the command line reports what was given."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from converge_cli.commands.init import scaffold
from converge_cli.commands.jobs_caps import queue_caps
from localcloud import LocalCloud
from tests.conftest import local_aws

GIVEN = "        DefaultMaxReceiveCount: 7\n        DefaultMaximumConcurrency: 3\n"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    local_aws(monkeypatch)
    project = tmp_path / "shop-jobs"
    scaffold(project)
    # the team's one change: its default queue's settings, beside the parameters the scaffold passes
    template = project / "template.yaml"
    text = template.read_text()
    anchor = "        KmsKeyArn: !Ref KmsKeyArn\n"
    assert text.count(anchor) == 1
    template.write_text(text.replace(anchor, anchor + GIVEN))
    return project


@pytest.fixture
def cloud(project: Path) -> Iterator[LocalCloud]:
    with LocalCloud.start(project / "template.yaml") as cloud:
        yield cloud


def test_the_command_line_reports_each_queues_cap_as_the_team_gave_it(project: Path) -> None:
    # Given the team's template giving the default queue a cap of 3 / When the command line reads the caps
    # Then the default queue's is 3, and the others keep their defaults
    assert queue_caps(project / "template.yaml") == {"critical": 20, "default": 3, "bulk": 2}


def test_the_given_settings_reach_the_queue_its_worker_and_its_event_source(cloud: LocalCloud) -> None:
    # Given the team's stack deployed with the default queue's settings (7 receives, 3 at once)
    sqs = cloud.client("sqs")
    redrive = sqs.get_queue_attributes(QueueUrl=cloud.outputs["DefaultQueueUrl"], AttributeNames=["RedrivePolicy"])
    # Then SQS moves a message to the DLQ after its 7th receive
    assert int(json.loads(redrive["Attributes"]["RedrivePolicy"])["maxReceiveCount"]) == 7
    # And the worker counts its 7th attempt as its last
    [worker] = [lid for lid in cloud.runtime.specs if lid.endswith("DefaultWorkerFunction")]
    assert cloud.runtime.environment_of(worker)["MAX_RECEIVE_COUNT"] == "7"
    # And its event source runs at most 3 invocations at once, while the critical queue keeps its default 20
    caps = {source.mapping.queue_name: source.mapping.maximum_concurrency for source in cloud.queue_sources}
    assert caps[cloud.outputs["DefaultQueueUrl"].rsplit("/", 1)[-1]] == 3
    assert caps[cloud.outputs["CriticalQueueUrl"].rsplit("/", 1)[-1]] == 20
