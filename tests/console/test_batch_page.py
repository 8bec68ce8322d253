"""The console's batch page, against a local cloud whose pipeline runs the batch: a progress bar, the counts, and
links both ways (batch to children and callback; a child and the callback to their batch)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from flask import Flask
from flask.testing import FlaskClient

from catalogue import BINDINGS
from converge.flow.registry import JobBinding, Policy, Queue, Registry
from converge.model.batches import BatchCallback, BatchChild, BatchState
from converge.runtime import Converge
from converge.screening.identifiers import Identifier
from converge.screening.summary import BatchSummary
from converge_cli.console.app import create_app
from converge_cli.console.guard import Origins
from converge_cli.support.target import Target

from .conftest import CONSOLE_SECRET, signed_in, wait_for


class ResetsSent(BatchSummary):
    campaign: Identifier


@pytest.fixture(scope="module")
def app(deployment: Target) -> Flask:
    return create_app(deployment, Origins.of({"localhost"}), "console:test-operator", secret=CONSOLE_SECRET)


@pytest.fixture
def client(app: Flask) -> Iterator[FlaskClient]:
    with app.test_client() as test_client:
        yield signed_in(test_client)


def test_a_batch_page_shows_its_progress_and_links_its_children_and_its_callback(client, deployment):
    # Given a batch of three password-reset e-mails, run to completion by the cloud's pipeline
    running = deployment.converge
    summary = JobBinding("test.resets-sent.v1", ResetsSent, lambda: None, Queue.DEFAULT, Policy.EFFECT_THEN_CLAIM)
    producer = Converge(running.settings, registry=Registry([*BINDINGS, summary]), clients=running.clients)
    children = [BatchChild(user, "email.password-reset.v1", {"user_id": user}) for user in ("u-1001", "u-1002")]
    producer.enqueue_batch("console-resets", children, BatchCallback("test.resets-sent.v1", {"campaign": "c-1"}))
    batches = running.require_batches()
    assert wait_for(lambda: batches.require("console-resets").state is BatchState.COMPLETE)
    # When the operator opens its page
    page = client.get("/batches/console-resets")
    assert page.status_code == 200
    html = page.get_data(as_text=True)
    # Then it shows the progress bar full, and links each child and the callback to their own pages
    assert '<progress id="progress" value="2" max="2">' in html and "2/2 final (100%)" in html
    child = batches.require("console-resets").child_id(0, "u-1001")
    assert f'href="/operations/{child}"' in html
    assert 'href="/operations/console-resets::callback"' in html
    # And a child's page and the callback's page link back to the batch
    for operation_id in (child, "console-resets::callback"):
        shown = client.get(f"/operations/{operation_id}").get_data(as_text=True)
        assert 'href="/batches/console-resets"' in shown, operation_id


def test_an_unknown_batch_is_a_page_that_says_so(client):
    page = client.get("/batches/no-such-batch")
    assert page.status_code == 404 and "no-such-batch" in page.get_data(as_text=True)
