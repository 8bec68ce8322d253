"""A catalogue's settings, as converge's application hands them to every function (CONVERGE_CATALOGUE_ENVIRONMENT)."""

from __future__ import annotations

import pytest

import converge
from converge import ConfigurationError


def test_the_templates_object_is_read_under_the_functions_own_variables() -> None:
    # Given what a template passes (a JSON object) and a variable set directly on the function
    env = {
        "CONVERGE_CATALOGUE_ENVIRONMENT": '{"GREETINGS_BUCKET": "b-1", "LEDGER_TABLE": "t-1"}',
        "LEDGER_TABLE": "t-2",
    }
    # When a runner reads its settings / Then it finds the object's names, the function's own variable winning
    settings = converge.catalogue_environment(env)
    assert settings["GREETINGS_BUCKET"] == "b-1" and settings["LEDGER_TABLE"] == "t-2"
    # And without the variable it has the function's environment alone
    assert converge.catalogue_environment({"APP_TABLE": "a"}) == {"APP_TABLE": "a"}


def test_it_reads_the_environment_when_called(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONVERGE_CATALOGUE_ENVIRONMENT", '{"GREETINGS_BUCKET": "now"}')
    assert converge.catalogue_environment()["GREETINGS_BUCKET"] == "now"


@pytest.mark.parametrize("passed", ["{not json", '["a", "list"]', '{"COUNT": 3}'])
def test_anything_but_an_object_of_text_is_a_configuration_error(passed: str) -> None:
    with pytest.raises(ConfigurationError, match="CONVERGE_CATALOGUE_ENVIRONMENT"):
        converge.catalogue_environment({"CONVERGE_CATALOGUE_ENVIRONMENT": passed})
