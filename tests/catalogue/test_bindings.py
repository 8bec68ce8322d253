"""The catalogue's bindings: loaded from its BINDINGS, routed as designed, fail-closed where it matters."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

import catalogue
from catalogue.demo import example_payloads
from converge.flow.registry import Policy, Queue, load_catalogue, load_named
from converge.model.errors import ConfigurationError
from converge.screening.message import validate_payload

registry = load_catalogue("catalogue")

EXPECTED = {
    "email.partner-verification.v1": (Queue.CRITICAL, Policy.EFFECT_THEN_CLAIM, True),
    "email.password-reset.v1": (Queue.CRITICAL, Policy.EFFECT_THEN_CLAIM, True),
    "partner-docs.upload.v1": (Queue.DEFAULT, Policy.KEYED_EFFECT, True),
    "ads.image-process.v1": (Queue.BULK, Policy.KEYED_EFFECT, True),
    "pdf.cv.v1": (Queue.DEFAULT, Policy.KEYED_EFFECT, True),
    "pdf.cv-refresh.v1": (Queue.DEFAULT, Policy.KEYED_EFFECT, True),
    "ledger.partner-benefits.v1": (Queue.CRITICAL, Policy.CLAIM_THEN_EFFECT, False),
    "email.partner-credited.v1": (Queue.CRITICAL, Policy.EFFECT_THEN_CLAIM, True),
    "ledger.approved-credit.v1": (Queue.CRITICAL, Policy.EFFECT_THEN_CLAIM, False),
    "sweep.boost-expiry.v1": (None, Policy.RECURRING, False),
    "billing.partner-statement.v1": (Queue.BULK, Policy.EFFECT_THEN_CLAIM, True),
    "billing.statements-sent.v1": (Queue.DEFAULT, Policy.KEYED_EFFECT, True),
}


def test_loading_the_catalogue_registers_every_job_with_its_queue_policy_and_default() -> None:
    # Given the catalogue loaded (a registry of its BINDINGS) / Then each job is registered exactly as designed
    for job_type, (queue, policy, enabled) in EXPECTED.items():
        binding = registry.get(job_type)
        assert (binding.queue, binding.policy, binding.default_enabled) == (queue, policy, enabled)
        assert binding.description
    assert {b.job_type for b in catalogue.BINDINGS} == set(EXPECTED)


def test_money_and_bulk_sweeps_are_fail_closed() -> None:
    # Then a missing or unreadable toggle can never start a ledger credit (plain or approved) or the sweep
    assert registry.get("ledger.partner-benefits.v1").fail_closed
    assert registry.get("ledger.approved-credit.v1").fail_closed
    assert registry.get("sweep.boost-expiry.v1").fail_closed


def test_the_money_job_notifies_the_partner_as_its_continuation_on_success_only() -> None:
    # Given the money job's binding
    credit = registry.get("ledger.partner-benefits.v1")
    # Then a credit that SUCCEEDED is followed by the partner's notice, built from the credit's message and
    # valid for the notice's own; a failed or UNKNOWN credit is followed by nothing
    assert credit.on_success is not None and credit.on_failure is None
    notice = registry.get(credit.on_success.job_type)
    message = validate_payload(credit.message_class(), example_payloads()[credit.job_type])
    payload = dict(credit.on_success.payload(message))
    assert payload == message.model_dump()
    validate_payload(notice.message_class(), payload)


def test_fail_closed_jobs_have_a_toggle_deployed_off(template: dict) -> None:
    # Given the template / Then every fail-closed job's kill switch is deployed "off"
    toggles = {
        resource["Properties"]["Name"]["Fn::Sub"].rsplit("/", 1)[-1]: resource["Properties"]["Value"]
        for resource in template["Resources"].values()
        if resource["Type"] == "AWS::SSM::Parameter"
    }
    for binding in catalogue.BINDINGS:
        if binding.fail_closed:
            assert toggles.get(binding.toggle_key) == "off", binding.job_type


@pytest.mark.parametrize("job_type", sorted(EXPECTED))
def test_example_payloads_are_valid_messages(job_type: str) -> None:
    # Given each job's example payload / When validated against its model / Then it passes
    validate_payload(registry.get(job_type).message_class(), example_payloads()[job_type])


def test_importing_builds_no_aws_clients(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given boto3 unable to build any client
    import boto3

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a client was built at import time")

    monkeypatch.setattr(boto3.session.Session, "client", refuse)
    # When every catalogue module is imported afresh: the catalogue, then each job's module its bindings name
    for name in [m for m in sys.modules if m == "catalogue" or m.startswith("catalogue.")]:
        monkeypatch.delitem(sys.modules, name)
    load_named.cache_clear()
    fresh = importlib.import_module("catalogue")
    for binding in fresh.BINDINGS:
        binding.message_class()
        binding.runner_factory()
    # Then nothing talks to AWS
    load_named.cache_clear()  # the next test's lookups find the modules it imports itself


def test_importing_the_catalogue_loads_none_of_its_jobs() -> None:
    # Given the catalogue imported in a fresh interpreter (its bindings name their models and runners)
    probe = (
        "import sys\n"
        "import catalogue\n"
        "print(sorted(m for m in sys.modules if m.startswith('catalogue')), 'pydantic' in sys.modules)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(catalogue.__file__).parents[1])}
    done = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    # Then it loaded its bindings and the ids of their examples, and no job's module, nor pydantic
    assert done.stdout.split("]")[0] + "]" == "['catalogue', 'catalogue.bindings', 'catalogue.examples']"
    assert done.stdout.split("]")[1].split() == ["False"]
    # And each job's model and runner is found by its name
    for binding in catalogue.BINDINGS:
        assert binding.message_class().__module__ == binding.message.split(":")[0]  # type: ignore[union-attr]


def test_a_factory_names_the_missing_environment_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given no ledger table configured / When the ledger runner is built / Then the error names LEDGER_TABLE
    monkeypatch.setenv("APP_TABLE", "app")
    monkeypatch.delenv("LEDGER_TABLE", raising=False)
    with pytest.raises(ConfigurationError, match="LEDGER_TABLE"):
        registry.get("ledger.partner-benefits.v1").runner_factory()()


def test_a_factory_builds_its_runner_without_touching_aws(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given the environment the template sets, and no AWS reachable
    for name in ("APP_TABLE", "DOCUMENTS_BUCKET", "SIGNING_SECRET_ARN", "SENDER_EMAIL", "LEDGER_TABLE"):
        monkeypatch.setenv(name, f"value-of-{name.lower()}")
    import boto3

    monkeypatch.setattr(boto3.session.Session, "client", lambda *a, **k: pytest.fail("client built eagerly"))
    # When every runner is built / Then none creates a client before its first call
    for binding in catalogue.BINDINGS:
        assert binding.runner_factory()() is not None
