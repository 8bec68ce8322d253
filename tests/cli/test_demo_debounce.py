"""The demo's debounce (converge_cli.commands.demo_debounce) on its own: a burst of CV re-renders for one profile
holds on the reference application (one run, the newest, in time), and its checks fail when the burst runs more
than once or its run's effect is made twice."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from catalogue.local import cv_refresh_burst
from converge.flow.debounce import Debouncing
from converge.local_hooks import Scenario
from converge_cli.commands import demo_debounce
from converge_cli.commands.demo_run import Check, Demo
from localcloud import LocalCloud, effects
from localcloud.server import catalogue_seeder

NEWEST = "demo-burst-3"
"""The burst's third request carries version 5, the newest of 3, 1, 5, 2, 4."""


@pytest.fixture
def cloud() -> Iterator[LocalCloud]:
    with LocalCloud.start(seeders=[catalogue_seeder]) as local:
        effects.instrument(local)
        yield local


def run(cloud: LocalCloud) -> Demo:
    demo = Demo(cloud, lambda text: None, Scenario(planned=[], debounce=cv_refresh_burst()))
    demo.report.events["burst_emails"] = demo_debounce.run(demo, Check)
    return demo


def failed(demo: Demo) -> dict[str, str]:
    return {check.name.split(": ", 1)[1]: check.detail for check in demo.report.checks if not check.ok}


def test_the_burst_runs_once_as_its_newest_request_in_time(cloud: LocalCloud) -> None:
    # Given the reference application's burst: five edits of one profile, versions 3, 1, 5, 2, 4
    # When the demo runs it
    demo = run(cloud)
    # Then its three checks hold, and the report shows the run (version 5) and four NOOPs naming it
    assert len(demo.report.checks) == 3 and failed(demo) == {}
    burst = demo.report.burst
    assert (burst["run"], burst["run_payload"]["version"]) == (NEWEST, 5)
    ended = {request["operation_id"]: (request["state"], request["reason"]) for request in burst["requests"]}
    assert ended.pop(NEWEST)[0] == "SUCCEEDED"
    assert set(ended.values()) == {("NOOP", f"debounced into {NEWEST}")} and len(ended) == 4
    assert 0 < burst["started_after_seconds"] <= 60
    # And one CV was stored and one link e-mailed, both by the run (counted in S3 and SES)
    counted = effects.count(cloud)
    assert counted.object_writes[NEWEST] == 1 and counted.emails[NEWEST] == 1
    assert demo.report.events["burst_emails"] == 1


def test_a_burst_that_runs_each_request_fails_the_demo(cloud: LocalCloud, monkeypatch: pytest.MonkeyPatch) -> None:
    # Given the debounce taken away: every request starts as it comes
    def no_debounce(self: Debouncing, *args: Any, **kwargs: Any) -> None:
        return None

    monkeypatch.setattr(Debouncing, "hold", no_debounce)
    # When the demo runs the burst
    demo = run(cloud)
    # Then the one-run and NOOP checks fail, saying each request made a CV and none was debounced
    found = failed(demo)
    once = next(name for name in found if name.startswith("the burst ran once"))
    assert found[once].startswith("made by demo-burst-1, demo-burst-2, demo-burst-3, demo-burst-4, demo-burst-5")
    assert "s3 5, ses 5" in found[once]
    assert "demo-burst-1: SUCCEEDED" in found["the 4 other requests ended NOOP, debounced into demo-burst-3"]


def test_the_run_s_e_mail_sent_twice_fails_the_demo(cloud: LocalCloud) -> None:
    # Given a second e-mail already names the run (its link sent twice)
    cloud.client("ses").send_email(
        Source="no-reply@example.com",
        Destination={"ToAddresses": ["tomas.berg@example.com"]},
        Message={"Subject": {"Data": "Your CV is ready"}, "Body": {"Text": {"Data": f"Reference: {NEWEST}\n"}}},
    )
    # When the demo runs the burst
    demo = run(cloud)
    # Then the one-run check alone fails, the two e-mails counted
    found = failed(demo)
    assert list(found) == [f"the burst ran once, as its newest request ({NEWEST}), making s3 1, ses 1"]
    assert "ses 2" in found[next(iter(found))]
