"""Kill switches: a present value wins, a missing key gives the job's default, SSM outages fail safe."""

from __future__ import annotations

import json

import boto3
import pytest
from botocore.exceptions import EndpointConnectionError

from converge.flow.toggles import Toggles, ToggleSource, parse_toggle
from converge.model.clock import FakeClock
from converge.observability import metrics

PREFIX = "/converge/test/toggles"


@pytest.fixture
def ssm(aws):
    return boto3.client("ssm")


def put(ssm, name, value):
    ssm.put_parameter(Name=f"{PREFIX}/{name}", Value=value, Type="String", Overwrite=True)


@pytest.mark.parametrize(
    ("raw", "parsed"),
    [
        ("true", True),
        (" ON ", True),
        ("1", True),
        ("False", False),
        ("off", False),
        ("0", False),
        ("maybe", None),
        ("", None),
    ],
)
def test_values_parse_in_any_case_trimmed(raw, parsed):
    assert parse_toggle(raw) is parsed


def test_a_misspelled_key_leaves_fail_closed_off_and_fail_open_on(ssm):
    # Given the operator switched on "ledger.partner-benefit" (misspelled: the real key ends in -benefits)
    put(ssm, "ledger.partner-benefit", "on")
    toggles = Toggles(PREFIX, ssm, max_age=0, clock=FakeClock())
    # Then the fail-closed job stays off, and a fail-open job with no parameter stays on
    assert toggles.state("ledger.partner-benefits", default_enabled=False).enabled is False
    assert toggles.state("ledger.partner-benefits", default_enabled=False).source is ToggleSource.DEFAULT
    assert toggles.is_enabled("email.partner-verification", default_enabled=True) is True


def test_a_present_value_wins_over_the_default(ssm):
    put(ssm, "ledger.partner-benefits", "on")
    put(ssm, "email.partner-verification", "off")
    toggles = Toggles(PREFIX, ssm, max_age=0)
    assert toggles.is_enabled("ledger.partner-benefits", False) is True
    assert toggles.is_enabled("email.partner-verification", True) is False


def test_an_unparsable_value_gives_the_default_with_a_warning_and_a_metric(ssm, capsys):
    # Given a broken toggle value
    metrics.clear_metrics()
    put(ssm, "ledger.partner-benefits", "yes please")
    toggles = Toggles(PREFIX, ssm, max_age=0)
    # When it is read / Then the job's default applies
    state = toggles.state("ledger.partner-benefits", False)
    assert state.enabled is False
    assert state.note == "value is not a boolean"
    # And an operator can see why: a warning naming the parameter, and a metric
    warnings = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    assert any(w["level"] == "WARNING" and w["parameter"].endswith("ledger.partner-benefits") for w in warnings)
    assert metrics.metric_set["ToggleUnparsable"]["Value"] == [1.0]
    metrics.clear_metrics()


def test_a_flip_applies_once_the_cache_ages_out(ssm):
    put(ssm, "ledger.partner-benefits", "off")
    toggles = Toggles(PREFIX, ssm, max_age=0)
    assert toggles.is_enabled("ledger.partner-benefits", False) is False
    put(ssm, "ledger.partner-benefits", "on")
    assert toggles.is_enabled("ledger.partner-benefits", False) is True


class _DownSSM:
    def __init__(self, real):
        self.real = real
        self.down = False

    def get_parameter(self, **kwargs):
        if self.down:
            raise EndpointConnectionError(endpoint_url="https://ssm.us-east-1.amazonaws.com")
        return self.real.get_parameter(**kwargs)

    def __getattr__(self, name):
        return getattr(self.real, name)


def test_ssm_down_uses_the_last_known_value(ssm):
    # Given a fail-closed job switched on and read once
    put(ssm, "ledger.partner-benefits", "on")
    flaky = _DownSSM(ssm)
    toggles = Toggles(PREFIX, flaky, max_age=0)
    assert toggles.is_enabled("ledger.partner-benefits", False) is True
    # When SSM becomes unavailable / Then the last known value is used, and says so
    flaky.down = True
    state = toggles.state("ledger.partner-benefits", False)
    assert (state.enabled, state.source) == (True, ToggleSource.LAST_KNOWN)


def test_ssm_down_with_no_known_value_keeps_a_fail_closed_job_off(ssm):
    put(ssm, "ledger.partner-benefits", "on")
    flaky = _DownSSM(ssm)
    flaky.down = True
    toggles = Toggles(PREFIX, flaky, max_age=0)
    assert toggles.state("ledger.partner-benefits", False).enabled is False
    assert toggles.state("email.partner-verification", True).enabled is True


def test_each_state_says_where_it_came_from_with_the_raw_value(ssm):
    # Given one toggle set, one unparsable and one missing
    put(ssm, "mail.on", " On ")
    put(ssm, "mail.odd", "perhaps")
    toggles = Toggles(PREFIX, ssm, max_age=0, clock=FakeClock())
    # Then each state carries its source, the value as stored, and a note where the default was used
    on = toggles.state("mail.on", default_enabled=False)
    assert (on.enabled, on.source, on.raw, on.note) == (True, ToggleSource.PARAMETER, " On ", "")
    odd = toggles.state("mail.odd", default_enabled=False)
    assert (odd.enabled, odd.source, odd.raw, odd.note) == (
        False,
        ToggleSource.DEFAULT,
        "perhaps",
        "value is not a boolean",
    )
    missing = toggles.state("mail.none", default_enabled=True)
    assert (missing.enabled, missing.source, missing.raw, missing.note) == (
        True,
        ToggleSource.DEFAULT,
        None,
        "parameter not found",
    )


def test_a_missing_parameter_is_remembered_for_the_cache_age_then_read_again(ssm):
    # Given a toggle that does not exist, read once
    clock = FakeClock()
    toggles = Toggles(PREFIX, ssm, max_age=15, clock=clock)
    assert toggles.state("mail.late", default_enabled=False).note == "parameter not found"
    # When the operator creates it
    put(ssm, "mail.late", "on")
    # Then until the cache age has passed the job still has its default, noted as not found (no read)
    clock.advance(14.9)
    cached = toggles.state("mail.late", default_enabled=False)
    assert (cached.enabled, cached.source, cached.note) == (False, ToggleSource.DEFAULT, "parameter not found")
    # And at exactly the cache age it is read again and applies
    clock.advance(0.1)
    assert toggles.state("mail.late", default_enabled=False).enabled is True


def test_a_toggle_never_read_is_read_at_once_even_at_the_clocks_start(ssm):
    # A clock at 0.5 s (a fresh emulated clock): nothing cached means the parameter is read, not assumed missing
    put(ssm, "mail.early", "on")
    toggles = Toggles(PREFIX, ssm, max_age=15, clock=FakeClock(start=0.5))
    assert toggles.state("mail.early", default_enabled=False).enabled is True


def test_an_operators_set_writes_the_parameter_with_its_reason_and_the_next_read_sees_it(ssm):
    # Given a fail-closed job switched off, its value cached for a minute, and a job never switched
    put(ssm, "ledger.partner-benefits", "off")
    toggles = Toggles(PREFIX, ssm, max_age=60, clock=FakeClock())
    assert toggles.is_enabled("ledger.partner-benefits", False) is False
    assert toggles.state("email.partner-verification", True).source is ToggleSource.DEFAULT
    # When an operator sets both (through converge, not behind its back)
    toggles.set("ledger.partner-benefits", "on", "incident 42 resolved")
    toggles.set("email.partner-verification", "off", "provider outage")
    # Then SSM holds each value with the reason as its description, under the job's parameter name
    stored = {
        parameter["Name"]: parameter
        for parameter in ssm.describe_parameters(
            ParameterFilters=[{"Key": "Name", "Option": "BeginsWith", "Values": [PREFIX]}]
        )["Parameters"]
    }
    assert stored[f"{PREFIX}/ledger.partner-benefits"]["Description"] == "incident 42 resolved"
    assert {parameter["Type"] for parameter in stored.values()} == {"String"}  # plain text, never encrypted
    assert stored[f"{PREFIX}/email.partner-verification"]["Description"] == "provider outage"
    assert ssm.get_parameter(Name=f"{PREFIX}/ledger.partner-benefits")["Parameter"]["Value"] == "on"
    assert ssm.get_parameter(Name=f"{PREFIX}/email.partner-verification")["Parameter"]["Value"] == "off"
    # And the next reads see the new values at once, although the cache had not aged out
    state = toggles.state("ledger.partner-benefits", False)
    assert (state.enabled, state.source, state.raw) == (True, ToggleSource.PARAMETER, "on")
    assert toggles.is_enabled("email.partner-verification", True) is False


def test_a_value_read_is_used_for_the_cache_age_on_converges_clock_then_read_again(ssm):
    # Given a toggle read once, on converge's clock (the emulated one in the local cloud)
    put(ssm, "mail.cached", "on")
    clock = FakeClock()
    toggles = Toggles(PREFIX, ssm, max_age=15, clock=clock)
    assert toggles.is_enabled("mail.cached", default_enabled=False) is True
    # When the operator turns it off behind converge's back
    put(ssm, "mail.cached", "off")
    # Then until the cache age has passed the value read is used (no read)
    clock.advance(14.9)
    assert toggles.state("mail.cached", default_enabled=False).raw == "on"
    # But a fresh read sees the new value at once
    assert toggles.state("mail.cached", default_enabled=False, fresh=True).raw == "off"
    # And that read is cached in turn, until exactly the cache age after it
    put(ssm, "mail.cached", "on")
    clock.advance(14.9)
    assert toggles.state("mail.cached", default_enabled=False).raw == "off"
    clock.advance(0.1)
    assert toggles.state("mail.cached", default_enabled=False).raw == "on"


def test_without_a_cache_age_every_read_goes_to_ssm(ssm):
    put(ssm, "mail.uncached", "on")
    toggles = Toggles(PREFIX, ssm, max_age=0, clock=FakeClock())
    assert toggles.is_enabled("mail.uncached", False) is True
    put(ssm, "mail.uncached", "off")
    assert toggles.is_enabled("mail.uncached", False) is False
