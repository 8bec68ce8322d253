"""The console in a real browser: headless Chromium (Debian's chromium and chromium-driver) via Selenium.

One local cloud and one `converge console` process, started as an operator starts it, serve every
test here. The browser signs in through the URL the console printed, opens the overview, follows
the UNKNOWN count to the operation planted by the test, resolves it through the form and its
confirmation, and sees the new state and the receipt entry, which is also read back from the state
table. A browser without the printed URL, a forged form on a foreign page, a POST without the form
token and a rebound Host are refused, and the receipt stays as it was.

`CONSOLE_SCREENSHOTS=docs/console` saves the main pages there as PNGs (`make screenshots`).
"""

from __future__ import annotations

import http.client
import os
import re
import shutil
import subprocess
import sys
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from converge.model.states import OperationState
from converge_cli.console.figures import recent_outcomes
from converge_cli.support.target import Target
from localcloud.cloud import LocalCloud
from tests.conftest import WITH_STACKS, as_a_shell_starts_it, stopped_with_ctrl_c

from .conftest import HELD_JOB, dead_letter, history_reasons, plant, stored_receipt, wait_for, waiting_for_approval

CONVERGE = Path(sys.executable).with_name("converge")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
INSTALL = "sudo apt-get install -y chromium chromium-driver (Debian) for the console's browser tests"
SCREENSHOTS = os.environ.get("CONSOLE_SCREENSHOTS")
SETTLED = {OperationState.SUCCEEDED, OperationState.NOOP}

pytestmark = pytest.mark.skipif(not (CHROMIUM and CHROMEDRIVER), reason=f"no chromium/chromedriver found: {INSTALL}")


@dataclass(frozen=True)
class Console:
    printed: str
    """The URL it printed: its address with this start's key (`/?token=...`)."""
    base: str
    """Its address alone."""


@pytest.fixture(scope="module")
def console(cloud: LocalCloud) -> Iterator[Console]:
    """`converge console` against the local cloud's endpoint, in its own process; the URL it printed."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("AWS_")}
    server = subprocess.Popen(
        [str(CONVERGE), "console", "--endpoint-url", cloud.clients.endpoint_url, "--actor", "console:browser-test"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env | {"COLUMNS": "200"} | WITH_STACKS,
        preexec_fn=as_a_shell_starts_it,  # stopped with SIGINT below, whatever this worker inherited
    )
    try:
        assert server.stdout is not None
        line = server.stdout.readline()
        match = re.search(r"((http://127\.0\.0\.1:\d+/)\?token=[\w-]{40,})", line)
        assert match, f"the console printed no URL with its key: {line!r}"
        yield Console(match.group(1), match.group(2))
    finally:
        stopped_with_ctrl_c(server, "the console")  # a console Ctrl-C does not stop is an error of this module


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,900"):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)), options=options)
    driver.implicitly_wait(5)
    try:
        yield driver
    finally:
        driver.quit()


def shot(browser: object, name: str) -> None:
    if SCREENSHOTS:
        folder = Path(SCREENSHOTS)
        folder.mkdir(parents=True, exist_ok=True)
        # The whole page, not only the window: its height as laid out.
        height = browser.execute_script("return document.documentElement.scrollHeight")  # type: ignore[attr-defined]
        browser.set_window_size(1280, max(700, min(int(height) + 40, 2400)))  # type: ignore[attr-defined]
        browser.save_screenshot(str(folder / f"{name}.png"))  # type: ignore[attr-defined]
        browser.set_window_size(1280, 900)  # type: ignore[attr-defined]


def traffic(deployment: Target) -> int:
    """Each enabled one-off job's example run a few times (for the charts); how many of each settled."""
    converge, runs = deployment.converge, 3
    enabled = [b for b in converge.registry if b.default_enabled and b.queue and b.job_type != HELD_JOB]
    for binding in enabled:
        for n in range(runs):
            converge.enqueue(binding.job_type, f"browser-{binding.toggle_key}-{n}", dict(binding.example_payload))
    for binding in enabled:
        for n in range(runs):
            operation_id = f"browser-{binding.toggle_key}-{n}"
            assert wait_for(lambda i=operation_id: converge.operations.require(i).state in SETTLED), operation_id
    return runs


def sign_in(browser, console: Console) -> None:
    """Open the URL the console printed, as the operator does: the key is exchanged for a session."""
    browser.get(console.printed)
    # The key has left the address bar: the browser is on the overview at the console's bare address
    assert browser.current_url == console.base, browser.current_url


def test_the_browser_gets_in_only_through_the_printed_url(browser, console: Console, cloud: LocalCloud) -> None:
    from selenium.webdriver.common.by import By

    # Given a browser that has not opened the printed URL (no session of this console)
    browser.delete_all_cookies()
    # When it opens the console's address, or a page with a wrong key
    for url in (console.base, console.base + "toggles", console.base + "?token=not-the-key"):
        browser.get(url)
        # Then it is refused with the page that says where the key is, and shows none of the console's data
        assert browser.find_element(By.TAG_NAME, "h1").text == "locked", url
        assert "Open the URL that converge console printed" in browser.find_element(By.ID, "how").text
        assert "ledger.partner-benefits" not in browser.page_source
    # When it opens the printed URL
    sign_in(browser, console)
    # Then the pages are served, and the session cookie is this console's, out of reach of any script
    assert browser.find_element(By.TAG_NAME, "h1").text == "overview"
    [cookie] = [c for c in browser.get_cookies() if c["name"].startswith("converge_console")]
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and cookie["path"] == "/"
    assert cookie["name"] == f"converge_console_{urllib.parse.urlsplit(console.base).port}"


def test_an_unknown_operation_is_found_and_resolved_in_the_browser(
    browser, console: Console, cloud: LocalCloud, deployment: Target
) -> None:
    from selenium.webdriver.common.by import By

    # Given an UNKNOWN operation planted in the local cloud, a dead-lettered FAILED one, and ordinary traffic
    plant(deployment, "browser-unknown-1", OperationState.UNKNOWN, "the upload store timed out; the copy may exist")
    failed = plant(deployment, "browser-failed-1", OperationState.FAILED, "upload store refused the copy")
    dead_letter(cloud, cloud.outputs["DefaultDlqUrl"], failed, "upload store refused the copy")
    ran = traffic(deployment)
    assert wait_for(lambda: recent_outcomes(deployment, 6)[0].total("email.password-reset.v1") >= ran, timeout=30)
    # When the operator opens the printed URL and follows the UNKNOWN count
    sign_in(browser, console)
    assert int(browser.find_element(By.ID, "count-UNKNOWN").text) >= 1
    shot(browser, "overview")
    browser.find_element(By.CSS_SELECTOR, "a.key-unknown").click()
    shot(browser, "attention")
    browser.find_element(By.LINK_TEXT, "browser-unknown-1").click()
    # Then the operation's page shows it UNKNOWN, with its receipt
    assert browser.find_element(By.ID, "state").text == "UNKNOWN"
    assert "the upload store timed out" in browser.find_element(By.ID, "timeline").text
    shot(browser, "operation")
    # When the operator resolves it as failed, with a reason, and confirms
    browser.find_element(By.CSS_SELECTOR, "input[name=outcome][value=failed]").click()
    browser.find_element(By.CSS_SELECTOR, "#resolve textarea[name=reason]").send_keys("the ledger has no such credit")
    browser.find_element(By.CSS_SELECTOR, "#resolve button[type=submit]").click()
    assert "resolve browser-unknown-1 as failed" in browser.find_element(By.ID, "what").text
    shot(browser, "confirm")
    browser.find_element(By.ID, "confirm").click()
    # Then the page shows the new state and the receipt entry naming the actor and the reason
    assert browser.find_element(By.ID, "state").text == "FAILED"
    timeline = browser.find_element(By.ID, "timeline").text
    assert "console:browser-test" in timeline and "the ledger has no such credit" in timeline
    # And the state table holds exactly that
    receipt = stored_receipt(cloud, "browser-unknown-1")
    assert receipt["state"]["S"] == "FAILED"
    assert "the ledger has no such credit" in history_reasons(receipt)[-1]
    # And the other pages render for the screenshots
    browser.get(console.base + "toggles")
    shot(browser, "toggles")
    browser.get(console.base + "dlqs")
    assert "upload store refused the copy" in browser.find_element(By.ID, "dlq-default").text
    shot(browser, "dlqs")


def test_a_person_rejects_a_waiting_operation_in_the_browser(browser, console: Console, deployment: Target) -> None:
    from selenium.webdriver.common.by import By

    # Given an operation waiting for its approval
    waiting_for_approval(deployment, "browser-approval-1")
    # When the operator opens it, rejects it with a reason, and confirms
    sign_in(browser, console)
    browser.get(console.base + "operations/browser-approval-1")
    browser.find_element(By.CSS_SELECTOR, "#signal input[name=decision][value=rejected]").click()
    browser.find_element(By.CSS_SELECTOR, "#signal textarea[name=reason]").send_keys("the partner withdrew")
    browser.find_element(By.CSS_SELECTOR, "#signal button[type=submit]").click()
    assert "the signal 'approval': rejected" in browser.find_element(By.ID, "what").text
    browser.find_element(By.ID, "confirm").click()
    # Then the page it lands on (once the browser has followed the confirmation) says it was kept and lists the
    # signal, sent by the operator with the reason
    assert wait_for(lambda: "the partner withdrew" in text_of(browser, "signals"))
    assert "accepted" in browser.page_source
    assert "console:browser-test: the partner withdrew" in text_of(browser, "signals")
    # And the markers table holds exactly that decision
    kept = deployment.converge.operations.signals.get("browser-approval-1", "approval")
    assert kept is not None and dict(kept.payload) == {"decision": "rejected"}


def text_of(browser, element_id: str) -> str:
    """An element's text, or nothing while the browser is between pages (the element absent, or of the old page)."""
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.common.by import By

    try:
        return str(browser.find_element(By.ID, element_id).text)
    except WebDriverException:
        return ""


def test_a_forged_form_on_a_foreign_page_is_refused(browser, console: Console, cloud: LocalCloud, deployment: Target):
    from selenium.webdriver.common.by import By

    # Given a browser signed in to the console, an UNKNOWN operation, and a page from elsewhere holding a form
    # aimed at the console
    sign_in(browser, console)
    plant(deployment, "browser-forged-1", OperationState.UNKNOWN, "ambiguous")
    before = stored_receipt(cloud, "browser-forged-1")
    action = console.base + "operations/browser-forged-1/resolve"
    forged = (
        f'<form method="post" action="{action}"><input name="outcome" value="succeeded">'
        '<input name="reason" value="forged"><input name="confirmed" value="yes">'
        '<button id="go">win a prize</button></form>'
    )
    browser.get("data:text/html," + urllib.parse.quote(forged))
    # When the operator's browser submits it
    browser.find_element(By.ID, "go").click()
    # Then the console refuses it, and the receipt is unchanged
    assert "refused" in browser.find_element(By.TAG_NAME, "h1").text
    assert stored_receipt(cloud, "browser-forged-1") == before


def test_a_post_without_the_session_or_the_form_token_and_a_rebound_host_are_refused(
    console: Console, cloud: LocalCloud, deployment
):
    # Given an UNKNOWN operation, and a session of the console taken through its printed URL
    plant(deployment, "browser-forged-2", OperationState.UNKNOWN, "ambiguous")
    before = stored_receipt(cloud, "browser-forged-2")
    address = urllib.parse.urlsplit(console.base)
    exchange = request(address, "GET", "/?" + urllib.parse.urlsplit(console.printed).query, address.netloc)
    assert exchange.status == 303
    session = exchange.headers["Set-Cookie"].split(";")[0]
    body = urllib.parse.urlencode({"outcome": "succeeded", "reason": "forged", "confirmed": "yes"})
    path = "/operations/browser-forged-2/resolve"
    # When a POST is sent without a session, then with the session but without the form's token, then to a
    # DNS name rebound to 127.0.0.1
    without_session = request(address, "POST", path, address.netloc, body)
    without_form_token = request(address, "POST", path, address.netloc, body, session)
    rebound = request(address, "POST", path, f"rebound.example:{address.port}", body, session)
    # Then each is refused with 403, saying why
    assert (without_session.status, without_form_token.status, rebound.status) == (403, 403, 403)
    assert "needs the key" in without_session.body and "form&#39;s token" in without_form_token.body
    # And a GET under the rebound name is refused too: no page of the console reaches a foreign name
    assert request(address, "GET", "/", f"rebound.example:{address.port}", cookie=session).status == 403
    # And the receipt is unchanged
    assert stored_receipt(cloud, "browser-forged-2") == before


@dataclass(frozen=True)
class Answer:
    status: int
    headers: http.client.HTTPMessage
    body: str


def request(
    address: urllib.parse.SplitResult, method: str, path: str, host: str, body: str | None = None, cookie: str = ""
) -> Answer:
    """One request as a script sends it: no browser, so no Origin and no Sec-Fetch-Site."""
    connection = http.client.HTTPConnection(address.hostname, address.port, timeout=10)
    headers = {"Host": host, "Content-Type": "application/x-www-form-urlencoded"}
    if cookie:
        headers["Cookie"] = cookie
    try:
        connection.request(method, path, body=body, headers=headers)
        response = connection.getresponse()
        return Answer(response.status, response.headers, response.read().decode())
    finally:
        connection.close()
