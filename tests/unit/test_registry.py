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


def test_a_named_message_is_imported_and_checked_on_first_use():
    # Given a binding that names its message model instead of holding it
    named = binding(message="tests.unit.conftest:Notice", tenant_field="user_id")
    # Then the binding keeps the name, and its model is the class that name imports
    assert named.message == "tests.unit.conftest:Notice"
    assert named.message_class() is Notice
    # And a binding holding the class gives that class
    assert binding().message_class() is Notice


@pytest.mark.parametrize(
    ("message", "error"),
    [
        ("tests.unit.conftest", "must look like 'package.module:Model'"),
        ("not a name:Notice", "must look like 'package.module:Model'"),
    ],
)
def test_a_message_name_of_the_wrong_shape_is_refused_when_the_binding_is_made(message, error):
    with pytest.raises(RegistryError, match=error):
        binding(message=message)


@pytest.mark.parametrize(
    ("message", "tenant_field", "error"),
    [
        ("tests.unit.no_such_module:Notice", None, r"mail\.notice\.v1: its message: cannot load .*no_such_module"),
        ("tests.unit.conftest:NoSuchModel", None, r"mail\.notice\.v1: its message: cannot load .*NoSuchModel"),
        ("tests.unit.conftest:Recorder", None, "message must be a JobMessage subclass"),
        ("tests.unit.conftest:Notice", "tenant", "tenant_field 'tenant' is not a field of its message"),
    ],
)
def test_a_named_message_that_cannot_be_used_fails_on_first_use_naming_the_job(message, tenant_field, error):
    # Given a binding whose message name is well formed (nothing is imported when it is made)
    named = binding(message=message, tenant_field=tenant_field)
    # When its model is first needed / Then the error names the job and what is wrong
    with pytest.raises(RegistryError, match=error):
        named.message_class()


def test_a_held_message_is_checked_when_the_binding_is_made():
    from .conftest import Recorder

    with pytest.raises(RegistryError, match="JobMessage subclass"):
        binding(message=Recorder)
    with pytest.raises(RegistryError, match="tenant_field"):
        binding(tenant_field="tenant")


def test_a_named_runner_factory_that_cannot_be_loaded_names_the_job():
    registry = Registry([binding(runner="tests.unit.conftest:no_such_factory")])
    with pytest.raises(RegistryError, match=r"mail\.notice\.v1: its runner: cannot load"):
        registry.runner("mail.notice.v1")
    with pytest.raises(RegistryError, match="is not callable"):
        binding(runner="tests.unit.conftest:PREFIX").runner_factory()


def test_a_continuations_payload_function_may_be_named():
    from converge.flow.registry import NamedFunction, Then

    # Given a continuation that names its payload function
    then = Then("mail.notice.v2", "tests.unit.test_registry:next_payload")
    # Then it is called as the function would be, imported on its first call
    assert then.payload == NamedFunction("tests.unit.test_registry:next_payload")
    assert then.payload_of({"user_id": "u-1"}) == {"user_id": "u-1", "version": 2}
    assert then.payload("x") == {"user_id": "x", "version": 2}  # type: ignore[operator]
    # And a name of the wrong shape is refused when the continuation is made
    with pytest.raises(RegistryError, match=r"must look like 'package\.module:function'"):
        Then("mail.notice.v2", "next_payload")


def next_payload(message):
    user = message["user_id"] if isinstance(message, dict) else message
    return {"user_id": user, "version": 2}
