"""Bindings: versioned names, one registration per type, recurring jobs without a queue."""

from __future__ import annotations

import pytest

from converge.flow.registry import JobBinding, Policy, Queue, Registry, toggle_key
from converge.model.errors import RegistryError, UnknownJobType

from .conftest import Notice


def binding(job_type="mail.notice.v1", **changes):
    fields = {"message": Notice, "runner": object, "queue": Queue.CRITICAL, "policy": Policy.EFFECT_THEN_CLAIM}
    return JobBinding(job_type=job_type, **{**fields, **changes})


@pytest.mark.parametrize(
    "name", ["mail.notice", "Mail.notice.v1", "mail.notice.v0", "notice.v1", "mail.notice.v1.x", "mail..v1"]
)
def test_job_type_names_must_be_versioned(name):
    with pytest.raises(RegistryError, match=r"<area>\.<name>\.v<N>"):
        binding(name)


def test_registering_a_type_twice_is_an_error():
    registry = Registry()
    registry.register(binding())
    with pytest.raises(RegistryError, match="already registered"):
        registry.register(binding())


def test_an_unknown_type_is_a_clear_error():
    with pytest.raises(UnknownJobType, match=r"no\.such\.v1"):
        Registry().get("no.such.v1")


def test_recurring_jobs_have_no_queue_and_others_need_one():
    with pytest.raises(RegistryError):
        binding(policy=Policy.RECURRING)
    with pytest.raises(RegistryError):
        binding(queue=None)
    assert binding(policy=Policy.RECURRING, queue=None).queue is None


def test_toggle_key_drops_the_version_and_default_enabled_false_is_fail_closed():
    assert toggle_key("ledger.partner-benefits.v12") == "ledger.partner-benefits"
    assert binding(default_enabled=False).fail_closed


def test_runners_are_built_once_on_first_use():
    built = []
    registry = Registry()
    registry.register(binding(runner=lambda: built.append(1) or object()))
    assert built == []
    first = registry.runner("mail.notice.v1")
    assert registry.runner("mail.notice.v1") is first
    assert built == [1]
