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


def a_retry(markers: MarkerStore, owner: str = "delivery-c") -> Steps:
    """The steps of a later attempt: the operation's markers are read once, before its first step."""
    return Steps(markers, "op-1", owner, False, Policy.EFFECT_THEN_CLAIM, FakeClock())


def test_a_retry_finding_its_step_claimed_asks_the_provider_without_claiming_again(markers):
    # Given the step claimed by an earlier delivery that died, and the provider with the charge applied
    assert markers.claim_step("op-1", "charge", 1, CLAIM, "delivery-a") is None
    provider = Provider(answer=Confirmation.APPLIED)
    from .conftest import sent

    calls = sent(markers._client)
    # When a retry runs the step / Then its one read found the claim: no second claim, one write recording it done
    assert a_retry(markers).run("charge", provider.charge, CLAIM, provider.confirm) is None
    assert [name for name, _ in calls] == ["Query", "PutItem"] and provider.charged == []


def test_a_step_settled_failed_by_an_operator_fails_the_retry_with_the_operators_words(markers):
    # Given a claimed step an operator settled as failed
    assert markers.claim_step("op-1", "charge", 1, CLAIM, "delivery-a") is None
    claimed = markers.steps("op-1")["charge"]
    assert markers.settle_step("op-1", claimed, StepState.FAILED, "the bank refused the account")
    # When a retry reaches it / Then it fails for good, saying why, and charges nothing
    from converge.model.errors import PermanentError

    provider = Provider()
    with pytest.raises(PermanentError) as failed:
        a_retry(markers).run("charge", provider.charge, CLAIM, provider.confirm)
    assert str(failed.value) == "step 'charge' was settled as failed: the bank refused the account"
    assert provider.charged == []


def test_each_policy_notes_how_its_step_was_recorded(markers):
    steps = first_delivery(markers)
    steps.run("render", lambda key: {"pdf": "cv/1.pdf"}, "keyed_effect", None)
    steps.run("notify", lambda key: None, "effect_then_claim", None)
    recorded = markers.steps("op-1")
    assert (recorded["render"].note, recorded["notify"].note) == (
        "keyed effect written",
        "effect applied, then claimed",
    )


def test_a_step_under_a_claim_then_effect_binding_is_refused_saying_what_to_bind(markers):
    from converge.model.errors import ConfigurationError

    steps = Steps(markers, "op-1", "owner", True, Policy.CLAIM_THEN_EFFECT, FakeClock())
    with pytest.raises(ConfigurationError) as refused:
        steps.run("render", lambda key: None, "keyed_effect", None)
    assert str(refused.value) == (
        "a job made of steps binds effect_then_claim or keyed_effect: each step carries its own policy"
    )


def test_a_step_marker_holds_who_when_why_its_compact_result_and_never_expires(markers, tables):
    # When a delivery records a step with a result
    clock = FakeClock()
    store = MarkerStore(tables["markers"], boto3.client("dynamodb"), clock)
    assert store.record_step("op-2", "charge", 3, CLAIM, "delivery-a", {"charge": "ch-1", "amount": 12}, "done") is None
    # Then the item holds the owner, the time, the note, the result as compact sorted JSON, and no time to live
    # (the markers table's TTL attribute, read from the template, is absent: kept as long as the operation's record)
    from converge.model.clock import iso

    item = boto3.client("dynamodb").get_item(
        TableName=tables["markers"], Key={"pk": {"S": "operation#op-2"}, "sk": {"S": "step#charge"}}
    )["Item"]
    assert (item["owner"]["S"], item["at"]["S"], item["note"]["S"]) == ("delivery-a", iso(clock.now()), "done")
    assert item["result"]["S"] == '{"amount":12,"charge":"ch-1"}'
    ttl = boto3.client("dynamodb").describe_time_to_live(TableName=tables["markers"])["TimeToLiveDescription"]
    assert ttl["AttributeName"] not in item


def test_a_step_run_twice_or_with_an_unknown_policy_is_refused_word_for_word(markers):
    from converge.model.errors import ConfigurationError

    steps = first_delivery(markers)
    steps.run("render", lambda key: None, "keyed_effect", None)
    with pytest.raises(ConfigurationError) as twice:
        steps.run("render", lambda key: None, "keyed_effect", None)
    assert str(twice.value) == "step 'render' is run twice in one delivery; each step needs its own name"
    with pytest.raises(ConfigurationError) as unknown:
        steps.run("notify", lambda key: None, "recurring", None)
    assert str(unknown.value) == (
        "step 'notify': policy 'recurring' is not one of effect_then_claim, claim_then_effect, keyed_effect"
    )


def test_an_earlier_claim_the_provider_cannot_answer_for_is_unknown_saying_so(markers):
    from converge.model.errors import OutcomeUnknown

    # Given the step claimed by another delivery (its marker notes the claim), and a provider that can neither
    # deduplicate nor be queried
    assert markers.claim_step("op-1", "charge", 1, CLAIM, "delivery-a") is None
    assert markers.steps("op-1")["charge"].note == "claimed"
    provider = Provider(answer=Confirmation.UNKNOWABLE)
    # When this delivery runs the step / Then its outcome is unknown, saying why word for word; nothing is charged
    with pytest.raises(OutcomeUnknown) as unknown:
        first_delivery(markers).run("charge", provider.charge, CLAIM, provider.confirm)
    assert str(unknown.value) == (
        "step 'charge': claimed by an earlier delivery; the provider can neither deduplicate nor be queried"
    )
    assert provider.charged == []


def test_each_step_is_recorded_at_its_place_in_the_runners_order_counted_from_one(markers):
    steps = first_delivery(markers)
    for name in ("render", "notify", "file"):
        steps.run(name, lambda key: None, "effect_then_claim", None)
    recorded = markers.steps("op-1")
    assert [(name, recorded[name].position) for name in ("render", "notify", "file")] == [
        ("render", 1),
        ("notify", 2),
        ("file", 3),
    ]


def test_a_step_recorded_done_meanwhile_by_another_delivery_answers_with_that_deliverys_result(markers):
    # Given the step recorded done by another delivery after this first attempt began (it reads no marker)
    assert markers.record_step("op-1", "render", 1, "effect_then_claim", "delivery-a", {"pdf": "a.pdf"}, "done") is None
    # When this delivery's effect is made and its record is refused / Then the step's result is the one recorded
    result = first_delivery(markers).run("render", lambda key: {"pdf": "b.pdf"}, "effect_then_claim", None)
    assert result == {"pdf": "a.pdf"}
    assert markers.steps("op-1")["render"].owner == "delivery-a"


def test_a_result_of_exactly_the_limit_is_recorded_and_one_byte_more_is_not():
    from converge.flow.steps import RESULT_LIMIT, result_problem

    def of_size(size: int) -> dict[str, str]:
        return {"k": "x" * (size - len('{"k":""}'))}

    assert result_problem(of_size(RESULT_LIMIT)) is None
    assert result_problem(of_size(RESULT_LIMIT + 1)) == (
        f"{RESULT_LIMIT + 1} bytes as JSON, over the {RESULT_LIMIT}-byte limit (record identifiers, not content)"
    )


def test_a_step_as_an_operators_receipt_shows_it():
    from converge.model.records import StepRecord

    at = "2026-11-02T10:00:00.000Z"
    step = StepRecord("render", 1, "keyed_effect", StepState.DONE, at, "w-1", {"pdf": "a"}, "ok")
    assert step.to_item() == {
        "name": "render",
        "policy": "keyed_effect",
        "state": "done",
        "at": at,
        "result": {"pdf": "a"},
        "note": "ok",
    }
