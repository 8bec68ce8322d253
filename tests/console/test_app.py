"""The console's application through Flask's test client, against a local cloud: escaping, the guard, figures.

Browser-level behaviour (a real Chromium clicking through the forms) is in test_browser.py; here
each page and each refusal is checked directly, with what is stored read back from the services.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import boto3
import pytest
from flask import Flask
from flask.testing import FlaskClient

from converge.model.states import OperationState
from converge_cli.console import pages
from converge_cli.console.app import create_app
from converge_cli.console.guard import Origins
from converge_cli.support.target import Target
from localcloud import project
from localcloud.cloud import LocalCloud

from .conftest import CONSOLE_SECRET, HELD_JOB, plant, signed_in, stored_receipt, wait_for

HOSTILE_REASON = '<script>alert("reason")</script> [bold]x:smile:[/bold] <b>bold</b>'
HOSTILE_ID = '<script>alert("id")</script>'
HOSTILE_PAYLOAD_VALUE = "<img src=x onerror=alert(1)>"
ACTOR = "console:test-operator"


@pytest.fixture(scope="module")
def app(deployment: Target) -> Flask:
    return create_app(deployment, Origins.of({"localhost"}), ACTOR, secret=CONSOLE_SECRET)


@pytest.fixture
def client(app: Flask) -> Iterator[FlaskClient]:
    with app.test_client() as test_client:
        yield signed_in(test_client)


def token_of(client: FlaskClient, path: str = "/toggles") -> str:
    page = client.get(path).get_data(as_text=True)
    match = re.search(r'name="csrf_token" value="([^"]+)"', page)
    assert match, "the page carries no form token"
    return match.group(1)


@pytest.fixture(scope="module")
def hostile(cloud: LocalCloud, deployment: Target) -> dict[str, str]:
    """An UNKNOWN operation whose reason is markup, and a raw PutItem whose id and payload are markup."""
    unknown = plant(deployment, "order:new:42", OperationState.UNKNOWN, HOSTILE_REASON)
    cloud.client("dynamodb").put_item(
        TableName=cloud.outputs["JobsTableName"],
        Item={
            "operation_id": {"S": HOSTILE_ID},
            "job_type": {"S": HELD_JOB},
            "payload": {"M": {"partner_id": {"S": HOSTILE_PAYLOAD_VALUE}}},
        },
    )
    rejected = wait_for(lambda: deployment.converge.operations.get(HOSTILE_ID))
    assert wait_for(lambda: deployment.converge.operations.require(HOSTILE_ID).state is OperationState.REJECTED)
    return {"unknown": unknown.operation_id, "rejected": rejected.operation_id}


def test_every_page_shows_data_literally_and_runs_none_of_it(client: FlaskClient, hostile: dict[str, str]) -> None:
    # Given an UNKNOWN operation with a reason full of markup, and a REJECTED one whose id and payload are markup
    paths = [
        "/",
        "/attention/UNKNOWN",
        "/attention/REJECTED",
        "/toggles",
        "/dlqs",
        f"/operations/{hostile['unknown']}",
        "/operations/%3Cscript%3Ealert(%22id%22)%3C%2Fscript%3E",
    ]
    # When each page is rendered
    for path in paths:
        response = client.get(path)
        page = response.get_data(as_text=True)
        assert response.status_code == 200, (path, page)
        # Then no markup from data reaches the page as markup
        assert "<script" not in page and "<img" not in page and "<b>" not in page, path
    # And what the data says is shown literally: ids with :word: codes, [tags], and the escaped markup
    unknown_page = client.get("/attention/UNKNOWN").get_data(as_text=True)
    assert "order:new:42" in unknown_page and "[bold]x:smile:[/bold]" in unknown_page
    assert "&lt;script&gt;alert(&#34;reason&#34;)&lt;/script&gt;" in unknown_page
    rejected_page = client.get("/operations/%3Cscript%3Ealert(%22id%22)%3C%2Fscript%3E").get_data(as_text=True)
    assert "&lt;script&gt;alert(&#34;id&#34;)&lt;/script&gt;" in rejected_page
    assert "&lt;img src=x onerror=alert(1)&gt;" in rejected_page
    assert 'href="/operations/%3Cscript%3Ealert(%22id%22)%3C/script%3E"' in client.get("/attention/REJECTED").get_data(
        as_text=True
    )


def test_the_operation_page_lists_its_steps_literally(client: FlaskClient, deployment: Target) -> None:
    # Given an UNKNOWN operation whose delivery recorded a step, and claimed another (a markup-looking result)
    unknown = plant(deployment, "order:steps:7", OperationState.UNKNOWN, "step 'charge': the provider cannot tell")
    markers = deployment.converge.operations.markers
    assert markers is not None
    markers.record_step(unknown.operation_id, "store", 1, "keyed_effect", "w-1", {"object": "<b>cv/7.pdf</b>"}, "x")
    markers.claim_step(unknown.operation_id, "charge", 2, "claim_then_effect", "w-1")
    # When its page is shown
    page = client.get(f"/operations/{unknown.operation_id}").get_data(as_text=True)
    # Then its steps table lists both, in the runner's order, the result shown as text, never as markup
    table = page.split('id="steps"')[1].split("</table>")[0]
    assert table.index("store") < table.index("charge") and "claimed" in table and "claim_then_effect" in table
    assert "&lt;b&gt;cv/7.pdf&lt;/b&gt;" in table and "<b>cv/7.pdf</b>" not in table


def test_a_post_without_the_token_is_refused_and_the_receipt_is_unchanged(
    client: FlaskClient, cloud: LocalCloud, hostile: dict[str, str]
) -> None:
    # Given an UNKNOWN operation and its stored receipt
    before = stored_receipt(cloud, hostile["unknown"])
    # When a form is posted without the session's token, or with a made-up one
    for token in (None, "forged-token"):
        form = {"outcome": "succeeded", "reason": "forged", "confirmed": "yes"}
        if token:
            form["csrf_token"] = token
        response = client.post(f"/operations/{hostile['unknown']}/resolve", data=form)
        # Then it is refused, saying why
        assert response.status_code == 403
        assert "token" in response.get_data(as_text=True)
    # And the receipt is exactly as it was
    assert stored_receipt(cloud, hostile["unknown"]) == before


def test_another_sessions_token_is_refused(app: Flask, cloud: LocalCloud, hostile: dict[str, str]) -> None:
    # Given a token that belongs to one browser session
    with signed_in(app.test_client()) as first, signed_in(app.test_client()) as second:
        token = token_of(first)
        token_of(second)  # the second session has its own
        before = stored_receipt(cloud, hostile["unknown"])
        # When another session posts it
        response = second.post(
            f"/operations/{hostile['unknown']}/resolve",
            data={"outcome": "failed", "reason": "x", "confirmed": "yes", "csrf_token": token},
        )
    # Then it is refused and nothing changed
    assert response.status_code == 403
    assert stored_receipt(cloud, hostile["unknown"]) == before


def test_a_foreign_host_or_origin_is_refused(client: FlaskClient, cloud: LocalCloud, hostile: dict[str, str]) -> None:
    # Given a page served to the console's own Host
    assert client.get("/").status_code == 200
    # When a request names another Host (a rebound DNS name pointing at 127.0.0.1)
    rebound = client.get("/", headers={"Host": "attacker.example:8080"})
    # Then it is refused before any page is built
    assert rebound.status_code == 403 and "attacker.example" in rebound.get_data(as_text=True)
    # And a POST from a foreign Origin is refused even with a valid token
    before = stored_receipt(cloud, hostile["unknown"])
    token = token_of(client)
    cross = client.post(
        f"/operations/{hostile['unknown']}/resolve",
        data={"outcome": "succeeded", "reason": "x", "confirmed": "yes", "csrf_token": token},
        headers={"Origin": "http://attacker.example"},
    )
    assert cross.status_code == 403
    assert stored_receipt(cloud, hostile["unknown"]) == before
    # And the console's own Origin is accepted
    assert client.get("/", headers={"Origin": "http://localhost"}).status_code == 200


# -- the console's key: nothing without the session its printed URL opens --------------------------------------

PAGES = ["/", "/attention/UNKNOWN", "/toggles", "/dlqs", "/operations/order:new:42", "/no-such-page"]
LEDGER_TOGGLE = "ledger.partner-benefits"
"""The fail-closed money job's kill switch: deployed off."""


def ledger_switch(cloud: LocalCloud) -> str:
    """The money job's parameter as SSM holds it (not through the console or converge)."""
    name = f"{cloud.outputs['TogglePrefix']}/{LEDGER_TOGGLE}"
    return str(cloud.client("ssm").get_parameter(Name=name)["Parameter"]["Value"])


def is_locked(response) -> bool:
    page = response.get_data(as_text=True)
    return response.status_code == 403 and "Open the URL that" in page and "converge console" in page


def test_without_the_session_no_page_is_served_and_no_action_taken(
    app: Flask, cloud: LocalCloud, hostile: dict[str, str]
) -> None:
    # Given the money job's switch off, as deployed, and a local process that never opened the printed URL
    assert ledger_switch(cloud) == "off"
    before = stored_receipt(cloud, hostile["unknown"])
    with app.test_client() as stranger:
        # When it reads every page
        for path in PAGES:
            response = stranger.get(path)
            # Then each is refused with the page that says how to get in, and shows nothing the console holds
            assert is_locked(response), (path, response.status_code)
            page = response.get_data(as_text=True)
            assert LEDGER_TOGGLE not in page and ACTOR not in page and "csrf_token" not in page
            assert "Set-Cookie" not in response.headers
        # When it posts a toggle, a resolve and a redrive, confirmed, with a made-up form token
        forms = {
            f"/toggles/{LEDGER_TOGGLE}": {"value": "on"},
            f"/operations/{hostile['unknown']}/resolve": {"outcome": "succeeded"},
            "/dlqs/default/redrive": {},
        }
        for path, form in forms.items():
            response = stranger.post(path, data={**form, "reason": "x", "confirmed": "yes", "csrf_token": "guess"})
            # Then each is refused
            assert is_locked(response), path
    # And nothing changed: the switch is still off, the receipt as it was
    assert ledger_switch(cloud) == "off"
    assert stored_receipt(cloud, hostile["unknown"]) == before


def test_the_printed_urls_token_is_exchanged_for_a_session_and_leaves_the_address_bar(app: Flask) -> None:
    with app.test_client() as browser:
        # When the browser opens a page with the token (and other query arguments)
        exchange = browser.get(f"/attention/PAUSED?job_type={HELD_JOB}&token={CONSOLE_SECRET}")
        # Then it is sent on to the same page without the token, and given this console's session cookie
        assert exchange.status_code == 303
        assert exchange.headers["Location"] == f"/attention/PAUSED?job_type={HELD_JOB}"
        assert exchange.headers["Referrer-Policy"] == "no-referrer"
        cookie = exchange.headers["Set-Cookie"]
        assert cookie.startswith("converge_console=") and CONSOLE_SECRET not in cookie
        assert all(part in cookie for part in ("HttpOnly", "SameSite=Strict", "Path=/"))
        assert "Expires" not in cookie and "Max-Age" not in cookie  # gone when the browser closes
        # And every page is then served on the session alone
        for path in ["/", "/toggles", "/dlqs", "/attention/UNKNOWN"]:
            response = browser.get(path)
            assert response.status_code == 200, path
            assert CONSOLE_SECRET not in response.get_data(as_text=True)


def test_a_wrong_token_a_token_in_a_referer_and_a_token_on_a_post_are_refused(app: Flask, cloud: LocalCloud) -> None:
    with app.test_client() as stranger:
        # When a guessed token, the key with a character changed, or an empty one is offered
        for guess in ("guess", CONSOLE_SECRET[:-1] + "X", CONSOLE_SECRET + "X", ""):
            # Then it is refused, and no session is given
            response = stranger.get(f"/?token={guess}")
            assert is_locked(response) and "not this console" in response.get_data(as_text=True), guess
            assert "Set-Cookie" not in response.headers
            assert is_locked(stranger.get("/toggles"))
        # When the key is only in a Referer (a page that linked here from a URL holding it)
        assert is_locked(stranger.get("/toggles", headers={"Referer": f"http://localhost/?token={CONSOLE_SECRET}"}))
        # When the key is in a POST's URL, with no session: it is no session, and the action is refused
        posted = stranger.post(
            f"/toggles/{LEDGER_TOGGLE}?token={CONSOLE_SECRET}",
            data={"value": "on", "reason": "x", "confirmed": "yes"},
        )
        assert is_locked(posted)
    assert ledger_switch(cloud) == "off"


def test_a_session_of_another_console_start_is_refused(deployment: Target, cloud: LocalCloud) -> None:
    # Given two starts of the console (each with its own key, and its own signing key for sessions)
    first = create_app(deployment, Origins.of({"localhost"}), ACTOR, secret=CONSOLE_SECRET)
    second = create_app(deployment, Origins.of({"localhost"}), ACTOR, secret="another-start-" + "s" * 29)
    with signed_in(first.test_client()) as browser:
        cookie = browser.get_cookie("converge_console")
        assert cookie is not None and browser.get("/toggles").status_code == 200
    with second.test_client() as restarted:
        # When the first start's cookie is sent to the second
        restarted.set_cookie("converge_console", cookie.value)
        # Then it is refused, and so is the first start's token
        assert is_locked(restarted.get("/toggles"))
        assert is_locked(restarted.get(f"/?token={CONSOLE_SECRET}"))
        # And the second start's own token works
        signed_in(restarted, "another-start-" + "s" * 29)
        assert restarted.get("/toggles").status_code == 200


def test_a_sign_in_starts_a_fresh_session(app: Flask) -> None:
    # Given a browser that was handed a session before it signed in (another page's form token in it)
    with app.test_client() as browser:
        with browser.session_transaction() as planted:
            planted["csrf"] = "planted-form-token"
        # When it signs in with the printed URL
        signed_in(browser)
        # Then the session it has is a new one: the planted form token is not its token
        assert 'value="planted-form-token"' not in browser.get("/toggles").get_data(as_text=True)
        with browser.session_transaction() as current:
            assert current.get("csrf") != "planted-form-token"


def test_the_stylesheet_is_served_to_anyone(app: Flask) -> None:
    # The locked page uses it, and it is the same for every console: it holds nothing of a deployment
    with app.test_client() as stranger:
        response = stranger.get("/static/console.css")
        assert response.status_code == 200 and b"converge console" in response.data


def test_started_outside_the_project_the_pages_say_why_no_job_is_shown(
    cloud: LocalCloud, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a console started in a directory outside any project, with no catalogue named
    monkeypatch.chdir(tmp_path)
    for name in ("CONVERGE_CATALOGUE", "CONVERGE_TEMPLATE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(project, "_selected", {"template": None, "catalogue": None})
    console = create_app(
        Target(endpoint_url=cloud.clients.endpoint_url), Origins.of({"localhost"}), ACTOR, secret=CONSOLE_SECRET
    )
    # (the local cloud's functions run in this process, each with CONVERGE_CATALOGUE in os.environ meanwhile)
    with cloud.runtime.held(), signed_in(console.test_client()) as browser:
        # When the toggles page and the overview are shown
        toggles, overview = browser.get("/toggles"), browser.get("/")
        # Then each says that no catalogue was found, where it looked and how to point at the project,
        # instead of an empty table
        for response in (toggles, overview):
            page = response.get_data(as_text=True)
            assert response.status_code == 200
            assert 'id="no-catalogue">no job catalogue found' in page and str(tmp_path.resolve()) in page
            assert "--catalogue" in page and "CONVERGE_CATALOGUE" in page
        assert "<table>" not in toggles.get_data(as_text=True)
        # And what needs no catalogue is still shown: the attention counts and the queues
        assert 'id="count-UNKNOWN">' in overview.get_data(as_text=True)
        assert browser.get("/attention/UNKNOWN").status_code == 200
        # And turning a job on is refused with the same reason, and nothing changes
        with browser.session_transaction() as session:  # no page offers a form here: the session's own token
            session["csrf"] = "this-sessions-form-token"
        form = {"value": "on", "reason": "x", "confirmed": "yes", "csrf_token": "this-sessions-form-token"}
        refused = browser.post(f"/toggles/{LEDGER_TOGGLE}", data=form)
        assert refused.status_code == 503 and "no job catalogue found" in refused.get_data(as_text=True)
    assert ledger_switch(cloud) == "off"


def test_pages_forbid_scripts_and_framing(client: FlaskClient) -> None:
    # Given a page with forms (its session cookie carries the form token)
    response = client.get("/toggles")
    # Then no script may run, no site may frame it, and no script may read the cookie or send it cross-site
    assert "default-src 'none'" in response.headers["Content-Security-Policy"]
    assert response.headers["X-Frame-Options"] == "DENY"
    cookie = response.headers.get("Set-Cookie", "")
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie


def test_no_credential_reaches_the_browser(cloud: LocalCloud, hostile: dict[str, str]) -> None:
    # Given a console whose AWS session holds credentials of its own
    key_id, secret = "AKIACONSOLENEVERSHOWN", "console-secret-never-shown"
    deployment = Target(endpoint_url=cloud.clients.endpoint_url)
    deployment.__dict__["session"] = boto3.session.Session(
        aws_access_key_id=key_id, aws_secret_access_key=secret, region_name="us-east-1"
    )
    console = create_app(deployment, Origins.of({"localhost"}), ACTOR, secret=CONSOLE_SECRET)
    with signed_in(console.test_client()) as browser:
        # When every page is fetched
        for path in ["/", "/attention/UNKNOWN", "/toggles", "/dlqs", f"/operations/{hostile['unknown']}"]:
            response = browser.get(path)
            assert response.status_code == 200
            seen = response.get_data(as_text=True) + str(response.headers)
            # Then neither the key id nor the secret is in any page or header
            assert key_id not in seen and secret not in seen


def test_attention_lists_filter_by_job_type_and_page_with_the_next_token(
    client: FlaskClient, deployment: Target, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given three PAUSED operations of the held job
    planted = {f"paging-{n}" for n in range(3)}
    for operation_id in sorted(planted):
        plant(deployment, operation_id, OperationState.PAUSED)
    monkeypatch.setattr(pages, "PAGE_SIZE", 2)
    # When the PAUSED list of that job type is read page by page
    seen: list[str] = []
    path: str | None = f"/attention/PAUSED?job_type={HELD_JOB}"
    while path:
        page = client.get(path).get_data(as_text=True)
        seen += re.findall(r'class="operation" href="[^"]+">([^<]+)</a>', page)
        link = re.search(r'id="next-page" href="([^"]+)"', page)
        path = link.group(1).replace("&amp;", "&") if link else None
    # Then every planted operation is listed once, and only that job type's
    assert planted <= set(seen) and len(seen) == len(set(seen))
    other = client.get("/attention/PAUSED?job_type=email.password-reset.v1").get_data(as_text=True)
    assert not planted & set(re.findall(r'class="operation" href="[^"]+">([^<]+)</a>', other))
    # And an unknown job type or a made-up token is a clear 400, not a crash
    assert client.get("/attention/PAUSED?job_type=no.such.v1").status_code == 400
    assert client.get("/attention/PAUSED?next=not-a-token").status_code == 400


def test_the_overview_counts_what_the_index_and_the_queues_hold(
    client: FlaskClient, cloud: LocalCloud, deployment: Target, hostile: dict[str, str]
) -> None:
    # Given the planted operations, and a job that runs to success
    deployment.converge.enqueue("email.password-reset.v1", "overview-reset-1", {"user_id": "u-1002"})
    assert wait_for(
        lambda: deployment.converge.operations.require("overview-reset-1").state is OperationState.SUCCEEDED
    )
    # When the overview is shown (after the success's metric reached CloudWatch from the worker's log)
    page = wait_for(lambda: (p := client.get("/").get_data(as_text=True)) and "succeeded at" in p and p, timeout=20)
    assert page, "no succeeded bar in the outcome charts"
    # Then each attention count is the number of operations the index lists under it
    for key in ("UNKNOWN", "REJECTED", "PAUSED"):
        listed = len(list(deployment.converge.operations.listings.iter_attention(key)))
        assert re.search(rf'id="count-{key}">{listed}<', page), key
    # And the password-reset chart has a bar for its success
    assert re.search(r"<title>\d+ succeeded at \d\d:00</title>", page)
    # And the queue table shows the depths SQS reports
    sqs = cloud.client("sqs")
    dlq = sqs.get_queue_attributes(QueueUrl=cloud.outputs["CriticalDlqUrl"], AttributeNames=["All"])["Attributes"]
    assert "<tr><td>critical</td>" in page
    assert dlq["ApproximateNumberOfMessages"] in page


def test_a_signal_item_is_listed_and_shown_as_its_answer_literally(
    client: FlaskClient, cloud: LocalCloud, deployment: Target
) -> None:
    # Given a producer's signal item whose key names an operation id converge cannot keep (markup)
    key = "<b>x</b>::signal:approval:ap-1"
    cloud.client("dynamodb").put_item(
        TableName=cloud.outputs["JobsTableName"],
        Item={"operation_id": {"S": key}, "payload": {"M": {"decision": {"S": "approved"}}}},
    )
    # When the relay has answered it
    operations = deployment.converge.operations
    assert wait_for(lambda: (found := operations.get(key)) is not None and found.state is OperationState.REJECTED)
    # Then the REJECTED listing and its page show it literally, as a signal item answered invalid
    listing = client.get("/attention/REJECTED").get_data(as_text=True)
    page = client.get("/operations/" + quote(key, safe=""))
    assert page.status_code == 200
    shown = page.get_data(as_text=True)
    assert "&lt;b&gt;x&lt;/b&gt;::signal:approval:ap-1" in listing and "<b>x</b>" not in listing
    assert "converge.signal" in shown and "invalid: operation_id" in shown and "<b>x</b>" not in shown


def test_the_overview_shows_each_caps_keys_with_what_runs_waits_and_who_paused(
    client: FlaskClient, deployment: Target
) -> None:
    # Given a partner's statement running with another waiting on its key, and another partner's key paused
    from converge.store.concurrency import ConcurrencyTable

    table = ConcurrencyTable(deployment.converge.settings.markers_table, deployment.converge.clients.dynamodb)
    now = float(int(deployment.converge.clock.now()))
    assert table.take("partner-statement", "console-p1", "console-statement-1", now + 600, 1, now).taken
    table.note_waiting("partner-statement", "console-p1", "console-statement-2", now + 30, [])
    assert table.pause("partner-statement", "console-p2", "console:someone", now)
    try:
        # When the overview is shown
        page = client.get("/").get_data(as_text=True)
    finally:
        table.give_back("partner-statement", "console-p1", "console-statement-1", now + 600)
        table.resume("partner-statement", "console-p2", "console:someone", now)
    # Then its flow control section lists both keys: the holder and one waiting, and who paused the other
    section = page[page.index('id="flow-control"') :]
    assert "<td>console-p1</td><td>console-statement-1</td><td>1</td>" in section
    assert re.search(r"<td>console-p2</td><td>-</td><td>0</td>\s*<td>-</td><td>console:someone</td>", section)
