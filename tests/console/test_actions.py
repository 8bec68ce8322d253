"""Each console action through the test client: a reason, a confirmation, then the framework's operator.

What each did is read back from the services (the state table's receipt, SSM, the DLQ's depth),
never from the page alone.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from flask import Flask
from flask.testing import FlaskClient

from converge.model.states import OperationState
from converge_cli.console.app import create_app
from converge_cli.console.guard import Origins
from converge_cli.support.target import Target
from localcloud.cloud import LocalCloud

from .conftest import (
    CONSOLE_SECRET,
    HELD_JOB,
    HELD_TOGGLE,
    dead_letter,
    depth_of,
    history_reasons,
    plant,
    signed_in,
    stored_receipt,
    wait_for,
    waiting_for_approval,
)

ACTOR = "console:test-operator"


@pytest.fixture(scope="module")
def app(deployment: Target) -> Flask:
    return create_app(deployment, Origins.of({"localhost"}), ACTOR, secret=CONSOLE_SECRET)


@pytest.fixture
def client(app: Flask) -> Iterator[FlaskClient]:
    with app.test_client() as test_client:
        yield signed_in(test_client)


def token_of(client: FlaskClient) -> str:
    match = re.search(r'name="csrf_token" value="([^"]+)"', client.get("/toggles").get_data(as_text=True))
    assert match
    return match.group(1)


def test_resolving_asks_for_a_reason_and_a_confirmation_then_records_both(
    client: FlaskClient, cloud: LocalCloud, deployment: Target
) -> None:
    # Given an UNKNOWN operation
    plant(deployment, "resolve-me-1", OperationState.UNKNOWN, "the provider timed out")
    token, path = token_of(client), "/operations/resolve-me-1/resolve"
    before = stored_receipt(cloud, "resolve-me-1")
    # When the form is sent without a reason, then with one but not yet confirmed
    empty = client.post(path, data={"csrf_token": token, "outcome": "succeeded", "reason": "  "})
    review = client.post(path, data={"csrf_token": token, "outcome": "succeeded", "reason": "ledger shows the credit"})
    # Then the first is refused, the second only asks for confirmation; nothing is stored
    assert empty.status_code == 400 and "reason" in empty.get_data(as_text=True)
    assert review.status_code == 200 and 'id="confirm"' in review.get_data(as_text=True)
    assert stored_receipt(cloud, "resolve-me-1") == before
    # When it is confirmed
    done = client.post(
        path,
        data={"csrf_token": token, "outcome": "succeeded", "reason": "ledger shows the credit", "confirmed": "yes"},
    )
    # Then the operation page follows, with the new state, and the receipt names the actor and the reason
    assert done.status_code == 303
    page = client.get(done.headers["Location"]).get_data(as_text=True)
    assert 'id="state">SUCCEEDED<' in page
    receipt = stored_receipt(cloud, "resolve-me-1")
    assert receipt["state"]["S"] == "SUCCEEDED"
    latest = history_reasons(receipt)[-1]
    assert ACTOR in latest and "ledger shows the credit" in latest
    # And resolving it again is not applied: it is no longer UNKNOWN, and the page says so
    again = client.post(
        path,
        data={"csrf_token": token, "outcome": "failed", "reason": "again", "confirmed": "yes"},
        follow_redirects=True,
    )
    assert "SUCCEEDED" in again.get_data(as_text=True)
    assert history_reasons(stored_receipt(cloud, "resolve-me-1")) == history_reasons(receipt)


def test_retrying_a_failed_operation_sends_it_again_with_the_same_identity(
    client: FlaskClient, cloud: LocalCloud, deployment: Target
) -> None:
    # Given a FAILED operation of the held (switched off) job
    plant(deployment, "retry-me-1", OperationState.FAILED, "the provider said no")
    token = token_of(client)
    # When it is retried through the form and confirmed
    done = client.post(
        "/operations/retry-me-1/retry",
        data={"csrf_token": token, "reason": "the provider is back", "confirmed": "yes"},
    )
    assert done.status_code == 303
    # Then the receipt records the retry by the actor, and the re-sent message reached the worker (paused: job off)
    assert wait_for(lambda: deployment.converge.operations.require("retry-me-1").state is OperationState.PAUSED)
    reasons = history_reasons(stored_receipt(cloud, "retry-me-1"))
    assert any(ACTOR in reason and "the provider is back" in reason for reason in reasons)


def test_a_toggle_is_turned_after_confirmation_and_ssm_holds_the_new_value(
    client: FlaskClient, cloud: LocalCloud
) -> None:
    # Given a job's kill switch
    parameter = f"{cloud.outputs['TogglePrefix']}/pdf.cv"
    ssm = cloud.client("ssm")
    token = token_of(client)
    # When it is turned off through the console, first reviewed, then confirmed
    review = client.post("/toggles/pdf.cv", data={"csrf_token": token, "value": "off", "reason": "renderer broken"})
    assert review.status_code == 200 and 'id="confirm"' in review.get_data(as_text=True)
    done = client.post(
        "/toggles/pdf.cv",
        data={"csrf_token": token, "value": "off", "reason": "renderer broken", "confirmed": "yes"},
        follow_redirects=True,
    )
    # Then SSM holds "off", and the toggles page shows it
    assert ssm.get_parameter(Name=parameter)["Parameter"]["Value"] == "off"
    assert re.search(r'id="toggle-pdf.cv">.*?switch off', done.get_data(as_text=True), re.S)
    # And turning it on again writes "on"
    client.post("/toggles/pdf.cv", data={"csrf_token": token, "value": "on", "reason": "fixed", "confirmed": "yes"})
    assert ssm.get_parameter(Name=parameter)["Parameter"]["Value"] == "on"


def test_a_redrive_shows_its_dry_run_first_and_acts_only_when_confirmed(
    client: FlaskClient, cloud: LocalCloud, deployment: Target
) -> None:
    # Given two dead letters on the default queue's DLQ: one of a settled operation, one of a switched-off job
    settled = plant(deployment, "redrive-settled-1", OperationState.SUCCEEDED)
    failed = plant(deployment, "redrive-failed-1", OperationState.FAILED, "the store said no")
    dlq = cloud.outputs["DefaultDlqUrl"]
    dead_letter(cloud, dlq, settled, "an old failure")
    dead_letter(cloud, dlq, failed, "the store said no")
    depth = depth_of(cloud, dlq)
    token = token_of(client)
    # When the DLQ page is read, and its redrive form sent
    listing = client.get("/dlqs").get_data(as_text=True)
    assert "the store said no" in listing and "redrive-failed-1" in listing
    dry = client.post("/dlqs/default/redrive", data={"csrf_token": token, "reason": "provider fixed"})
    # Then the dry run's report comes first: the settled copy would be deleted, the disabled one left; nothing moved
    report = dry.get_data(as_text=True)
    assert dry.status_code == 200 and "dry run" in report and 'id="confirm"' in report
    assert "would delete" in report and "disabled" in report
    assert depth_of(cloud, dlq) == depth
    # When it is confirmed
    done = client.post(
        "/dlqs/default/redrive", data={"csrf_token": token, "reason": "provider fixed", "confirmed": "yes"}
    ).get_data(as_text=True)
    # Then the settled copy is gone from the DLQ, the disabled job's message stays, and its operation is still FAILED
    assert "converged" in done
    assert wait_for(lambda: depth_of(cloud, dlq) == depth - 1)
    assert deployment.converge.operations.require("redrive-failed-1").state is OperationState.FAILED
    # When its job is switched on (through the console) and the redrive confirmed again
    switch = {"csrf_token": token, "reason": "store is back", "confirmed": "yes"}
    assert client.post(f"/toggles/{HELD_TOGGLE}", data={**switch, "value": "on"}).status_code == 303
    try:
        moved = client.post(
            "/dlqs/default/redrive",
            data={"csrf_token": token, "reason": "store is back", "job_type": HELD_JOB, "confirmed": "yes"},
        ).get_data(as_text=True)
        # Then its message left the DLQ, and its receipt says who redrove it and why
        assert "moved" in moved
        assert wait_for(lambda: depth_of(cloud, dlq) == depth - 2)
        reasons = history_reasons(stored_receipt(cloud, "redrive-failed-1"))
        assert any("redriven from the DLQ by console:test-operator: store is back" in reason for reason in reasons)
    finally:
        client.post(f"/toggles/{HELD_TOGGLE}", data={**switch, "value": "off"})


def test_cancelling_an_operation_that_has_not_started_ends_it_cancelled_with_the_reason(
    client: FlaskClient, cloud: LocalCloud, deployment: Target
) -> None:
    # Given a PAUSED operation of the held job (not started) and a FAILED one (settled)
    plant(deployment, "cancel-me-1", OperationState.PAUSED)
    plant(deployment, "cancel-too-late-1", OperationState.FAILED, "the provider said no")
    token = token_of(client)
    # Then the paused one's page offers the cancel form, the failed one's does not
    assert 'id="cancel"' in client.get("/operations/cancel-me-1").get_data(as_text=True)
    assert 'id="cancel"' not in client.get("/operations/cancel-too-late-1").get_data(as_text=True)
    # When the paused one is cancelled, reviewed first, then confirmed
    path = "/operations/cancel-me-1/cancel"
    review = client.post(path, data={"csrf_token": token, "reason": "the order was withdrawn"})
    assert review.status_code == 200 and stored_receipt(cloud, "cancel-me-1")["state"]["S"] == "PAUSED"
    done = client.post(path, data={"csrf_token": token, "reason": "the order was withdrawn", "confirmed": "yes"})
    # Then it is CANCELLED, and the receipt names the actor and the reason
    assert done.status_code == 303
    receipt = stored_receipt(cloud, "cancel-me-1")
    assert receipt["state"]["S"] == "CANCELLED"
    assert any(ACTOR in reason and "the order was withdrawn" in reason for reason in history_reasons(receipt))
    # And a cancel posted for the settled one is too late: nothing changes
    before = stored_receipt(cloud, "cancel-too-late-1")
    late = client.post(
        "/operations/cancel-too-late-1/cancel",
        data={"csrf_token": token, "reason": "too late", "confirmed": "yes"},
        follow_redirects=True,
    )
    assert "too late" in late.get_data(as_text=True)
    assert stored_receipt(cloud, "cancel-too-late-1") == before


def test_a_person_approves_a_waiting_operation_once_confirmed_and_a_later_rejection_is_refused_and_listed(
    client: FlaskClient, deployment: Target
) -> None:
    # Given an operation waiting for its approval
    waiting_for_approval(deployment, "approve-me-1")
    signals = deployment.converge.operations.signals
    # Then its page offers the decision, behind the console's form token
    page = client.get("/operations/approve-me-1").get_data(as_text=True)
    assert 'id="signal"' in page and 'name="name" value="approval"' in page
    token, path = token_of(client), "/operations/approve-me-1/signal"
    form = {"csrf_token": token, "name": "approval", "decision": "approved", "reason": "partner verified by phone"}
    # When the decision is sent without a reason, with another decision, or not yet confirmed
    empty = client.post(path, data={**form, "reason": " "})
    unknown = client.post(path, data={**form, "decision": "maybe"})
    review = client.post(path, data=form)
    # Then the first two are refused, the last asks for confirmation; nothing is sent
    assert (empty.status_code, unknown.status_code) == (400, 400)
    assert review.status_code == 200 and 'id="confirm"' in review.get_data(as_text=True)
    assert signals.get("approve-me-1", "approval") is None
    # When it is confirmed
    done = client.post(path, data={**form, "confirmed": "yes"})
    # Then the signal is kept once, sent by the person with the reason, and the operation is woken
    assert done.status_code == 303
    assert "accepted" in client.get(done.headers["Location"]).get_data(as_text=True)
    kept = signals.get("approve-me-1", "approval")
    assert kept is not None and dict(kept.payload) == {"decision": "approved"}
    assert kept.sent_by == f"{ACTOR}: partner verified by phone"
    # When another person rejects it afterwards
    late = client.post(path, data={**form, "decision": "rejected", "reason": "too late", "confirmed": "yes"})
    # Then the rejection is refused, said so, and listed on the wait; the approval stands
    assert "refused" in client.get(late.headers["Location"]).get_data(as_text=True)
    kept = signals.get("approve-me-1", "approval")
    assert kept is not None and dict(kept.payload) == {"decision": "approved"}
    assert [r.sent_by for r in kept.refused] == [f"{ACTOR}: too late"]
    page = client.get("/operations/approve-me-1").get_data(as_text=True)
    assert 'id="signals"' in page and "too late" in page


def test_a_decision_needs_the_consoles_login_and_a_signal_name_in_form(app: Flask, deployment: Target) -> None:
    waiting_for_approval(deployment, "approve-me-2")
    form = {"name": "approval", "decision": "approved", "reason": "ok", "confirmed": "yes"}
    with app.test_client() as anonymous:
        assert anonymous.post("/operations/approve-me-2/signal", data=form).status_code in (302, 303, 401, 403)
    with app.test_client() as browser:
        client = signed_in(browser)
        token = token_of(client)
        bad = client.post("/operations/approve-me-2/signal", data={**form, "csrf_token": token, "name": "Approval!"})
        assert bad.status_code == 400
    assert deployment.converge.operations.signals.get("approve-me-2", "approval") is None
