"""A claim_then_effect step when another delivery of the same operation got to its marker first (a duplicate
message, a takeover): the marker says what happened, the provider is asked by the step's key only when the
marker cannot tell, and the effect runs only when the provider says it did not happen."""

from __future__ import annotations

import boto3
import pytest

from converge.flow.registry import Policy
from converge.flow.runner import Confirmation
from converge.flow.steps import Steps
from converge.model.clock import FakeClock
from converge.model.errors import TransientError
from converge.model.records import StepState
from converge.store.markers import MarkerStore

CLAIM = "claim_then_effect"


@pytest.fixture
def markers(tables) -> MarkerStore:
    return MarkerStore(tables["markers"], boto3.client("dynamodb"), FakeClock())


class Provider:
    """A provider keyed by the step's key: what it charged, what it was asked, what it answers."""

    def __init__(self, answer: Confirmation = Confirmation.NOT_APPLIED, fails: Exception | None = None) -> None:
        self.charged: list[str] = []
        self.asked: list[str] = []
        self.answer = answer
        self.fails = fails

    def charge(self, key: str) -> dict[str, str]:
        if self.fails is not None:
            raise self.fails
        self.charged.append(key)
        return {"charge": f"ch-{len(self.charged)}"}

    def confirm(self, key: str) -> Confirmation:
        self.asked.append(key)
        return self.answer


def first_delivery(markers: MarkerStore, owner: str = "delivery-b") -> Steps:
    """The steps of a first attempt: no marker is read before its claim."""
    return Steps(markers, "op-1", owner, True, Policy.EFFECT_THEN_CLAIM, FakeClock())


def test_a_claim_lost_to_a_step_recorded_done_returns_its_result_and_runs_nothing(markers):
    # Given the step recorded done by another delivery, with its result
    assert markers.record_step("op-1", "charge", 1, CLAIM, "delivery-a", {"charge": "ch-a"}, "done") is None
    provider = Provider()
    # When this delivery runs the step / Then it gets the recorded result; no charge, no question
    assert first_delivery(markers).run("charge", provider.charge, CLAIM, provider.confirm) == {"charge": "ch-a"}
    assert (provider.charged, provider.asked) == ([], [])


def test_a_claim_lost_to_an_unfinished_claim_asks_the_provider_and_records_what_it_says(markers):
    # Given the step claimed by another delivery that never recorded it done (it died, or is slow)
    assert markers.claim_step("op-1", "charge", 1, CLAIM, "delivery-a") is None
    provider = Provider(answer=Confirmation.APPLIED)
    # When this delivery runs the step, the provider saying the charge was applied
    result = first_delivery(markers).run("charge", provider.charge, CLAIM, provider.confirm)
    # Then nothing is charged again, and the step is recorded done on the provider's word
    assert (result, provider.charged, provider.asked) == (None, [], ["op-1:charge"])
    step = markers.steps("op-1")["charge"]
    assert (step.state, step.note) == (StepState.DONE, "the provider confirms it was applied")


def test_a_claim_lost_to_a_claim_the_provider_never_saw_charges_once_and_records_it(markers):
    # Given the step claimed by another delivery, and the provider with no record of it
    assert markers.claim_step("op-1", "charge", 1, CLAIM, "delivery-a") is None
    provider = Provider(answer=Confirmation.NOT_APPLIED)
    # When this delivery runs the step / Then it charges once, by the step's key, and records the result
    result = first_delivery(markers).run("charge", provider.charge, CLAIM, provider.confirm)
    assert (result, provider.charged, provider.asked) == ({"charge": "ch-1"}, ["op-1:charge"], ["op-1:charge"])
    step = markers.steps("op-1")["charge"]
    assert (step.state, step.result, step.note) == (StepState.DONE, {"charge": "ch-1"}, "claimed, then effect applied")


def test_an_ambiguous_charge_the_provider_says_did_not_happen_is_released_and_retried(markers):
    # Given a charge that times out after sending, and a provider with no record of it
    provider = Provider(answer=Confirmation.NOT_APPLIED, fails=TimeoutError("read timed out"))
    # When the step runs / Then it is retried (transient), saying why, and its claim is dropped for the retry
    with pytest.raises(TransientError) as retried:
        first_delivery(markers).run("charge", provider.charge, CLAIM, provider.confirm)
    assert str(retried.value) == "step 'charge': the provider confirms it was not applied; retrying"
    assert provider.asked == ["op-1:charge"] and markers.steps("op-1") == {}


def test_a_lost_claim_learns_the_holder_from_its_one_refused_write(markers, tables):
    # Given the step recorded done by another delivery
    assert markers.record_step("op-1", "charge", 1, CLAIM, "delivery-a", {"charge": "ch-a"}, "done") is None
    from .conftest import sent

    calls = sent(markers._client)
    # When this delivery's claim is refused / Then the refusal itself carried the holder: no read after it
    first_delivery(markers).run("charge", Provider().charge, CLAIM, Provider().confirm)
    assert [name for name, _ in calls] == ["PutItem"]


@pytest.mark.parametrize(
    ("result", "problem"),
    [
        ({"charge": "ch-1", "amount": 12}, None),
        ({1: "ch-1"}, "a mapping result needs string keys"),
        ({"charge": b"raw"}, "a result holds identifiers and small numbers, not bytes"),
    ],
)
def test_what_a_step_may_record_as_its_result(result, problem):
    from converge.flow.steps import result_problem

    assert result_problem(result) == problem


def test_a_result_naming_personal_data_in_a_key_is_refused_as_in_a_value():
    from converge.flow.steps import result_problem

    in_value = result_problem({"sent_to": "jane.doe@example.com"})
    in_key = result_problem({"jane.doe@example.com": "sent"})
    assert in_value is not None and in_key == in_value
