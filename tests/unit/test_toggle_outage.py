"""Kill switches during an SSM outage: the value used, where it came from, and the metric that shows it."""

from __future__ import annotations

import boto3
import pytest
from botocore.exceptions import EndpointConnectionError

from converge.flow.toggles import Toggles, ToggleSource
from converge.model.clock import FakeClock
from converge.observability import metrics

PREFIX = "/converge/test/toggles"


class Outage:
    """The real SSM client, until `down` is set: then every read fails as if SSM were unreachable."""

    def __init__(self, real):
        self.real = real
        self.down = False

    def get_parameter(self, **kwargs):
        if self.down:
            raise EndpointConnectionError(endpoint_url="https://ssm.us-east-1.amazonaws.com")
        return self.real.get_parameter(**kwargs)

    def __getattr__(self, name):
        return getattr(self.real, name)


@pytest.fixture
def ssm(aws):
    client = boto3.client("ssm")
    client.put_parameter(Name=f"{PREFIX}/ledger.partner-benefits", Value="on", Type="String", Overwrite=True)
    metrics.clear_metrics()
    yield Outage(client)
    metrics.clear_metrics()


def test_an_outage_after_a_read_keeps_the_last_value_and_says_so(ssm):
    # Given a fail-closed job switched on, read once
    toggles = Toggles(PREFIX, ssm, max_age=0, clock=FakeClock())
    assert toggles.state("ledger.partner-benefits", False).source is ToggleSource.PARAMETER
    # When SSM becomes unreachable
    ssm.down = True
    state = toggles.state("ledger.partner-benefits", False)
    # Then the last value seen is used, labelled as such, and the failed read is counted
    assert (state.enabled, state.source, state.note) == (True, ToggleSource.LAST_KNOWN, "SSM unavailable")
    assert metrics.metric_set["ToggleReadFailed"]["Value"] == [1.0]


@pytest.mark.parametrize("default_enabled", [False, True])
def test_an_outage_before_any_read_gives_the_jobs_own_default_and_says_so(ssm, default_enabled):
    # Given SSM unreachable from the first read on
    ssm.down = True
    toggles = Toggles(PREFIX, ssm, max_age=0, clock=FakeClock())
    # When a job's toggle is read
    state = toggles.state("ledger.partner-benefits", default_enabled)
    # Then the job's own default applies (a fail-closed job stays off), labelled with why
    assert (state.enabled, state.source, state.note) == (default_enabled, ToggleSource.DEFAULT, "SSM unavailable")
    assert state.raw is None
    assert metrics.metric_set["ToggleReadFailed"]["Value"] == [1.0]


def test_a_prefix_with_a_trailing_slash_names_the_same_parameters(ssm):
    # Given the prefix configured with a trailing slash
    toggles = Toggles(PREFIX + "/", ssm, max_age=0, clock=FakeClock())
    # Then parameter names have one slash, and the deployed parameter is found
    assert toggles.parameter_name("ledger.partner-benefits") == f"{PREFIX}/ledger.partner-benefits"
    assert toggles.state("ledger.partner-benefits", False).source is ToggleSource.PARAMETER
