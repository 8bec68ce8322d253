"""Job types by name: "did you mean" names what is registered and accepted where it is asked, never the input."""

from __future__ import annotations

import re

import pytest

from converge.flow.names import find_binding, require_job_type, suggestions
from converge.flow.registry import JobBinding, Policy, Queue, Registry
from converge.model.errors import UnknownJobType

from .conftest import Notice

REMINDER = "invoice.send-reminder"


def catalogue(*job_types: str) -> Registry:
    registry = Registry()
    for job_type in job_types:
        registry.register(JobBinding(job_type, Notice, object, Queue.DEFAULT, Policy.EFFECT_THEN_CLAIM))
    return registry


INVOICES = catalogue(f"{REMINDER}.v1", f"{REMINDER}.v2", "invoice.send-receipt.v1", "mail.notice.v1")


def suggested(error: pytest.ExceptionInfo[UnknownJobType]) -> list[str]:
    """The names a refusal suggests, in its order."""
    hint = str(error.value).partition("did you mean ")[2].partition("?")[0]
    return re.findall(r"'([^']+)'", hint)


def test_a_job_type_without_its_version_suggests_its_registered_versions_never_itself():
    # Given a catalogue with two versions of a job
    # When a versioned job type is asked for by its name without the version (as `converge enqueue` asks)
    with pytest.raises(UnknownJobType) as refused:
        require_job_type(INVOICES, REMINDER)
    # Then the refusal names the versions registered under it, newest first, and not the name it refused
    assert suggested(refused) == [f"{REMINDER}.v2", f"{REMINDER}.v1"]
    assert str(refused.value).startswith(f"unknown job type '{REMINDER}'; did you mean")


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("invoice.send-remnder", [f"{REMINDER}.v2", f"{REMINDER}.v1"]),  # a typo of the bare name: its versions
        (f"{REMINDER}.v3", [f"{REMINDER}.v1", f"{REMINDER}.v2"]),  # a version that does not exist: the others
        ("mail.notise.v1", ["mail.notice.v1"]),
    ],
)
def test_where_a_versioned_type_is_wanted_only_versioned_types_are_suggested(name, expected):
    with pytest.raises(UnknownJobType) as refused:
        require_job_type(INVOICES, name)
    # Then the closest come first, and every suggestion is a registered job type, never the name refused
    shown = suggested(refused)
    assert sorted(shown[: len(expected)]) == sorted(expected)
    assert set(shown) <= {binding.job_type for binding in INVOICES} and name not in shown


def test_where_a_toggle_name_is_accepted_a_toggle_name_may_be_suggested():
    # When a kill switch is named with a typo (`converge toggles set`, which takes the name without its version)
    with pytest.raises(UnknownJobType) as refused:
        find_binding(INVOICES, "invoice.send-remnder")
    # Then the toggle name itself is suggested, as it would be accepted there
    assert suggested(refused)[0] == REMINDER
    assert "converge toggles list" in str(refused.value)


def test_nothing_close_suggests_nothing():
    with pytest.raises(UnknownJobType) as refused:
        require_job_type(INVOICES, "ledger.partner-benefits.v1")
    assert "did you mean" not in str(refused.value)


def test_no_suggestion_is_ever_the_name_refused():
    # Given every registered name, its toggle name, and near misses of both
    names = {binding.job_type for binding in INVOICES} | {binding.toggle_key for binding in INVOICES}
    asked = names | {name + "x" for name in names} | {name[:-1] for name in names} | {name.upper() for name in names}
    for name in sorted(asked):
        for toggle_names in (False, True):
            # Then no name is suggested to itself
            assert name not in suggestions(INVOICES, name, toggle_names), name


def test_a_toggle_name_means_its_newest_version_counted_as_a_number():
    # Given versions 2, 9 and 10 (v10 sorts before v9 as text)
    registry = catalogue(f"{REMINDER}.v2", f"{REMINDER}.v9", f"{REMINDER}.v10")
    # Then the toggle name means v10, and the versions are suggested newest first
    assert find_binding(registry, REMINDER).job_type == f"{REMINDER}.v10"
    assert suggestions(registry, REMINDER) == [f"{REMINDER}.v10", f"{REMINDER}.v9", f"{REMINDER}.v2"]
